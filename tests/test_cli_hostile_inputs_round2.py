"""Hostile inputs found by a sweep on 2026-12-04. Deeply nested files (each parser's RecursionError
named no file); an alias bomb in a sweep spec (it hung); a what-if queue that names no VC when no
queue may borrow (it changed nothing without a word); an observation of an unknown model (an error
naming no file); log lines with impossible GPU memory or GPU indices (taken as they were); sizes
that built a cluster until the machine killed the process (a VC file's node count, --nodes,
--gpus-per-node, a cluster file's gpus, --machines); topology files that named no file. Each is
now one ``error:`` line naming the file or option, exit 2, before any work."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.cli_run import only_error
from typer.testing import CliRunner

from dlsched.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
DEEP = 5000   # levels: past the interpreter's recursion limit in every parser here


def _nested(opening: str, closing: str) -> str:
    return opening * DEEP + closing * DEEP


def test_a_deeply_nested_cluster_file_names_the_file(tmp_path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(f"x = {_nested('[', ']')}\n")
    assert only_error("simulate", "--cluster", toml, "--jobs", "10", "--out", tmp_path / "r") == (
        f"error: {toml}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)")
    pytest.importorskip("yaml")
    yaml = tmp_path / "c.yaml"
    yaml.write_text(f"x: {_nested('[', ']')}\n")
    assert only_error("cluster", "show", yaml) == (
        f"error: {yaml}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)")


def test_a_deeply_nested_queues_file_names_the_option_and_file(tmp_path) -> None:
    q = tmp_path / "q.toml"
    q.write_text(f'[[queues]]\nname = "research"\nx = {_nested("[", "]")}\n')
    line = only_error("whatif", EXAMPLES / "whatif-events.jsonl", "--queues", q, "--at", "10")
    assert line == f"error: --queues {q}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)"


def test_a_deeply_nested_log_line_names_the_line(tmp_path) -> None:
    lines = (EXAMPLES / "replay-events.jsonl").read_text().splitlines()
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([*lines[:2], '{"kind": "submit", "x": ' + _nested("[", "]") + "}", *lines[2:]]) + "\n")
    line = only_error("whatif", log, "--policy", "qssf", "--at", "46", "--durations", "recorded")
    assert line == f"error: LOG {log}: line 3 nests lists or objects too deeply to read (an event needs 2 levels)"


def test_sweep_spec_alias_bomb_is_refused_at_once(tmp_path) -> None:
    pytest.importorskip("yaml")
    rows = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    rows += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]   # 9^10 values
    spec = tmp_path / "bomb.yaml"
    spec.write_text("\n".join(rows) + "\nbase: {jobs: 10}\ngrid: {policy: [fifo]}\n")
    t0 = time.monotonic()
    line = only_error("sweep", spec, "--out", tmp_path / "out")
    assert time.monotonic() - t0 < 30   # it never ended before
    assert line == (f"error: {spec}: its YAML aliases (*name) expand to more than 2,000,000 values "
                    "(the limit; a spec of 100,000 cells needs far fewer)")
    assert not (tmp_path / "out").exists()
    deep = tmp_path / "deep.yaml"
    deep.write_text(f"base: {{jobs: 10}}\ngrid: {{policy: [fifo]}}\nx: {_nested('[', ']')}\n")
    assert only_error("sweep", deep, "--out", tmp_path / "out") == (
        f"error: {deep}: lists or mappings nested too deeply to read (a spec needs 3 levels)")


def test_sweep_spec_with_aliases_within_the_limit_still_loads(tmp_path) -> None:
    pytest.importorskip("yaml")
    from dlsched.sweep.spec import load_spec

    spec = tmp_path / "ok.yaml"
    spec.write_text("base: {jobs: &j 10}\ngrid: {policy: [fifo, sjf], seed: [0, 1, 2]}\n"
                    "runs: [{policy: las, jobs: *j}]\n")
    cells = load_spec(spec).cells
    assert len(cells) == 7 and all(c.params["jobs"] == 10 for c in cells)


def test_a_whatif_queue_naming_no_vc_is_refused_though_none_may_borrow(tmp_path) -> None:
    # one queue that lends to nobody: the forward run installs no quotas, so the name was never
    # checked and the run compared the recorded policy with itself, saying "fixed VCs"
    q = tmp_path / "q.toml"
    q.write_text('[[queues]]\nname = "nope"\nborrow_limit = 3\n')
    line = only_error("whatif", EXAMPLES / "whatif-events.jsonl", "--queues", q, "--at", "10")
    assert line == f"error: --queues {q}: queue(s) nope name no VC of the cluster and are no queue's parent"


def test_a_whatif_queue_on_a_vc_of_the_log_still_runs(tmp_path) -> None:
    q = tmp_path / "q.toml"
    q.write_text('[[queues]]\nname = "research"\nborrow_limit = 3\n')
    result = CliRunner().invoke(app, ["whatif", str(EXAMPLES / "whatif-events.jsonl"), "--queues", str(q),
                                      "--at", "10", "--durations", "recorded"])
    assert result.exit_code == 0, result.output
    assert "vs fifo with queues fixed VCs (no queue borrows)" in result.output   # prod lends nothing


def test_an_observation_of_an_unknown_model_names_file_line_and_column(tmp_path) -> None:
    csv = tmp_path / "observed.csv"
    csv.write_text("model,batchsize,mem_mib,gpu\nresnet50,16,3733,A100\nnosuchnet,16,3000,A100\n")
    line = only_error("predictor", "calibrate", csv, "--out", tmp_path / "cal")
    assert line.startswith(f"error: {csv}:3:1: column 'model' has 'nosuchnet': no zoo model of this name "
                           "(or give its graph in an 'onnx' column); known: a3c_pong, "), line
    assert not (tmp_path / "cal").exists()


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"gpu_mem_mib":32768', '"gpu_mem_mib":-5',   # was taken as is: every job then fit no GPU
     "line 2 (node): 'gpu_mem_mib' must be null or MiB of GPU memory, 1 to 16,777,216 (the range the "
     "service reads from a node's label), got -5"),
])
def test_a_log_node_with_impossible_gpu_memory_names_the_line(tmp_path, old, new, message) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text((EXAMPLES / "replay-events.jsonl").read_text().replace(old, new, 1))
    for argv in (("whatif", log, "--policy", "qssf", "--at", "46", "--durations", "recorded"),
                 ("replay", log, "--out", tmp_path / "r")):
        assert only_error(*argv) == f"error: LOG {log}: {message}"


def test_a_log_start_on_a_gpu_the_node_lacks_names_the_line(tmp_path) -> None:
    lines = (EXAMPLES / "replay-events.jsonl").read_text().splitlines()
    last = max(float(json.loads(ln)["at"]) for ln in lines)
    extra = '{"kind":"start","at":%r,"uid":"a","node":"n1","gpus":[3,99],"shared":false}' % (last + 1)
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([*lines, extra]) + "\n")
    message = (f"line {len(lines) + 1} (start): starts a on GPU(s) 99 of node 'n1', which has 8 GPUs "
               "(indices 0 to 7)")
    for argv in (("whatif", log, "--policy", "qssf", "--at", "46", "--durations", "recorded"),
                 ("replay", log, "--out", tmp_path / "r")):   # replay left the job out as "withdrawn"
        assert only_error(*argv) == f"error: LOG {log}: {message}"


FIXTURES = ROOT / "tests" / "fixtures"


def test_a_vc_file_with_too_many_nodes_is_refused_before_the_cluster_is_built(tmp_path) -> None:
    vc = tmp_path / "vc.csv"
    vc.write_text("vc,node num\na,2\nb,99999999999\n")   # the process was killed for memory
    line = only_error("simulate", "--trace", FIXTURES / "traces" / "helios_log.csv", "--vc-config", vc,
                      "--out", tmp_path / "r")
    assert line == (f"error: {vc}, line 3, column 'node num': node count '99999999999': the file describes "
                    "more than 100,000 nodes in all (the limit, as for a cluster file)")


@pytest.mark.parametrize(("argv", "message"), [
    (("simulate", "--nodes", "100000000000", "--jobs", "10"),   # it ran until killed
     "error: --nodes must be at most 100,000 (the limit, as for a cluster file), got 100,000,000,000"),
    (("simulate", "--gpus-per-node", "100000000", "--jobs", "10"),   # killed for memory
     "error: --gpus-per-node must be 1 to 1,024, got 100,000,000"),
    (("bench", "placement", "--machines", "100000000000"),
     "error: --machines must be 1 to 100,000 (the limit, as for a cluster file), got 100,000,000,000"),
    (("experiment", "topo-scenario1", "--machines", "0"),
     "error: --machines must be 1 to 100,000 (the limit, as for a cluster file), got 0"),
])
def test_sizes_that_build_a_cluster_are_bounded_first(tmp_path, argv, message) -> None:
    if argv[0] != "bench":
        argv = (*argv, "--out", tmp_path / "r")
    t0 = time.monotonic()
    assert only_error(*argv) == message
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "r").exists()


def test_a_cluster_file_node_with_too_many_gpus_is_refused(tmp_path) -> None:
    c = tmp_path / "c.toml"
    c.write_text('name = "x"\n[defaults]\ngpus = 100000000\n[[groups]]\nvc = "a"\nnodes = 2\n')
    assert only_error("cluster", "show", c) == (
        f"error: {c}, line 3: defaults.gpus = 100,000,000: at most 1,024 GPUs a node (the limit) "
        "(inherited by groups[1])")


@pytest.mark.parametrize(("content", "message"), [
    ("hello\n", "line 1: no header row with GPU0 found: 'hello'"),
    (b"\x00\xff\xfe", "not text (want what `nvidia-smi topo -m` prints)"),
    ("\t".join(f"GPU{i}" for i in range(600)) + "\n", "line 1: 600 devices: at most 512 (the limit): 'GPU0\\tGPU1"),
])
def test_topology_file_errors_name_the_file(tmp_path, content, message) -> None:
    f = tmp_path / "topo.txt"
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    line = only_error("topo", "show", f)
    assert line.startswith(f"error: {f}: {message}"), line
    assert len(line) < 300   # the offending line is quoted in part
    assert only_error("topo", "show", tmp_path / "none.txt") == (
        f"error: {tmp_path / 'none.txt'}: cannot read: No such file or directory")


def test_a_namespace_mapped_twice_in_vc_map_is_refused(tmp_path) -> None:
    pytest.importorskip("fastapi")
    line = only_error("serve", "--api-server", "https://127.0.0.1:1", "--api-token", "x",
                      "--db", f"sqlite:///{tmp_path / 's.db'}", "--vc-map", "team-a=research,team-a=prod")
    assert line == "error: --vc-map: namespace 'team-a' is mapped twice ('research' and 'prod')"
    from dlsched.service.pods import VcMapping

    # the same mapping twice is one mapping
    assert VcMapping.parse("team-a=research, team-a=research,b=prod").namespaces == {"team-a": "research", "b": "prod"}

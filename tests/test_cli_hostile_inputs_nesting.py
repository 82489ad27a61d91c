"""Hostile inputs found by a sweep on 2026-12-04: deeply nested files (each parser's
RecursionError), an alias bomb in a sweep spec (it hung), a what-if queue that names no VC when
no queue may borrow (it changed nothing without a word) and an observation of an unknown model
(an error that named no file). Each is one ``error:`` line naming the file, exit 2."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
DEEP = 5000   # levels: past the interpreter's recursion limit in every parser here


def _one_error(*argv: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _nested(opening: str, closing: str) -> str:
    return opening * DEEP + closing * DEEP


def test_a_deeply_nested_cluster_file_names_the_file(tmp_path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text(f"x = {_nested('[', ']')}\n")
    assert _one_error("simulate", "--cluster", toml, "--jobs", "10", "--out", tmp_path / "r") == (
        f"error: {toml}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)")
    pytest.importorskip("yaml")
    yaml = tmp_path / "c.yaml"
    yaml.write_text(f"x: {_nested('[', ']')}\n")
    assert _one_error("cluster", "show", yaml) == (
        f"error: {yaml}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)")


def test_a_deeply_nested_queues_file_names_the_option_and_file(tmp_path) -> None:
    q = tmp_path / "q.toml"
    q.write_text(f'[[queues]]\nname = "research"\nx = {_nested("[", "]")}\n')
    line = _one_error("whatif", EXAMPLES / "whatif-events.jsonl", "--queues", q, "--at", "10")
    assert line == f"error: --queues {q}: tables or lists nested too deeply to read (the cluster file's format needs 3 levels)"


def test_a_deeply_nested_log_line_names_the_line(tmp_path) -> None:
    lines = (EXAMPLES / "replay-events.jsonl").read_text().splitlines()
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([*lines[:2], '{"kind": "submit", "x": ' + _nested("[", "]") + "}", *lines[2:]]) + "\n")
    line = _one_error("whatif", log, "--policy", "qssf", "--at", "46", "--durations", "recorded")
    assert line == f"error: LOG {log}: line 3 nests lists or objects too deeply to read (an event needs 2 levels)"


def test_sweep_spec_alias_bomb_is_refused_at_once(tmp_path) -> None:
    pytest.importorskip("yaml")
    rows = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    rows += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]   # 9^10 values
    spec = tmp_path / "bomb.yaml"
    spec.write_text("\n".join(rows) + "\nbase: {jobs: 10}\ngrid: {policy: [fifo]}\n")
    t0 = time.monotonic()
    line = _one_error("sweep", spec, "--out", tmp_path / "out")
    assert time.monotonic() - t0 < 30   # it never ended before
    assert line == (f"error: {spec}: its YAML aliases (*name) expand to more than 2,000,000 values "
                    "(the limit; a spec of 100,000 cells needs far fewer)")
    assert not (tmp_path / "out").exists()
    deep = tmp_path / "deep.yaml"
    deep.write_text(f"base: {{jobs: 10}}\ngrid: {{policy: [fifo]}}\nx: {_nested('[', ']')}\n")
    assert _one_error("sweep", deep, "--out", tmp_path / "out") == (
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
    line = _one_error("whatif", EXAMPLES / "whatif-events.jsonl", "--queues", q, "--at", "10")
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
    line = _one_error("predictor", "calibrate", csv, "--out", tmp_path / "cal")
    assert line.startswith(f"error: {csv}:3:1: column 'model' has 'nosuchnet': no zoo model of this name "
                           "(or give its graph in an 'onnx' column); known: a3c_pong, "), line
    assert not (tmp_path / "cal").exists()

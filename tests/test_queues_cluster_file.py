"""The cluster file's queues: fidelity with borrowing off, errors naming file and key, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.traces.cluster_queues import read_half_life, read_queues
from dlsched.traces.model import TraceError

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
BASE = '[defaults]\ngpus = 8\n\n[[groups]]\nvc = "vc01"\nnodes = 2\n\n[[groups]]\nvc = "vc02"\nnodes = 1\ngpu = "A100"\n'


def _run(*argv) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize("policy", ["fifo", "qssf"])
def test_fixed_queues_give_the_plain_vcs_jobs_csv(tmp_path, policy) -> None:
    """borrow_limit 0 everywhere: the same decisions, byte for byte, as the built-in VCs."""
    common = ("--jobs", "1500", "--seed", "3", "--policy", policy)
    code, text = _run("simulate", *common, "--out", tmp_path / "plain")
    assert code == 0, text
    code, text = _run("simulate", *common, "--cluster", EXAMPLES / "queues-fixed.toml", "--out", tmp_path / "fixed")
    assert code == 0, text
    assert (tmp_path / "fixed" / "jobs.csv").read_bytes() == (tmp_path / "plain" / "jobs.csv").read_bytes()
    assert "per_queue" not in json.loads((tmp_path / "fixed" / "summary.json").read_text())


def test_borrowing_run_reports_per_queue(tmp_path) -> None:
    code, text = _run("simulate", "--jobs", "1500", "--seed", "3", "--cluster", EXAMPLES / "queues.toml",
                      "--out", tmp_path / "b")
    assert code == 0, text
    assert "queues (GPU-hours" in text and "Jain's fairness index" in text
    s = json.loads((tmp_path / "b" / "summary.json").read_text(),
                   parse_constant=lambda c: pytest.fail(f"summary.json is not strict JSON: {c}"))
    q = s["per_queue"]
    assert list(q) == [f"vc0{i}" for i in range(1, 9)]
    assert sum(r["borrowed_gpu_hours"] for r in q.values()) == pytest.approx(sum(r["lent_gpu_hours"] for r in q.values()))
    assert sum(r["borrowed_starts"] for r in q.values()) > 0
    assert sum(r["reclaimed"] for r in q.values()) == sum(r["reclaims"] for r in q.values())
    assert all(r["lent_gpu_hours"] <= r["guaranteed_gpu_hours"] * 0.5 + 1e-9 for r in q.values())  # lend_limit = half
    assert sum(r["jobs"] for r in q.values()) == s["jobs"] == 1500
    assert 0 < s["queue_fairness_jain"] <= 1


def test_queues_are_read(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(BASE + '\n[[queues]]\nname = "vc01"\nborrow_limit = 8\nparent = "x"\nguarantee = 16\n'
                    '\n[[queues]]\nname = "vc02"\nlend_limit = 0\nguarantee = {A100 = 8}\n'
                    '\n[[queues]]\nname = "x"\n')
    a, b, x = read_queues(path)
    assert x.parent is None
    assert (a.name, a.borrow_limit, a.lend_limit, a.parent) == ("vc01", 8, None, "x")
    assert (b.name, b.borrow_limit, b.lend_limit, b.parent) == ("vc02", None, 0, None)


@pytest.mark.parametrize("queues,message", [
    ('[[queues]]\nname = "vc01"\nborrow_limit = -1\n', "line 15: queues[1].borrow_limit = -1: want a whole number >= 0"),
    ('[[queues]]\nname = "vc01"\nlend_limit = "lots"\n', "queues[1].lend_limit = 'lots': want a whole number >= 0"),
    ('[[queues]]\nname = "vc09"\n', ("line 14: queues[1].name = 'vc09': no group has this VC and no queue names "
                                      "it as its parent (a leaf queue is a VC; VCs: vc01, vc02)")),
    ('[[queues]]\nname = "vc01"\n[[queues]]\nname = "vc01"\n', "queues[2].name = 'vc01': the queue has two entries"),
    ('[[queues]]\nname = "vc01"\nguarantee = 8\n', "queues[1].guarantee = 8: queue vc01's nodes give 16 GPUs"),
    ('[[queues]]\nname = "vc02"\nguarantee = {V100 = 8}\n', "queues[1].guarantee = {'V100': 8}: queue vc02's nodes give"),
    ('[[queues]]\nname = "vc01"\nweight = 0\n', "line 15: queues[1].weight = 0: want a number from 1e-06 to 1e+06"),
    ('[[queues]]\nname = "vc01"\nweight = 1e-320\n', "line 15: queues[1].weight = 1e-320: want a number from"),
    ('[[queues]]\nname = "vc01"\nweight = nan\n', "line 15: queues[1].weight = nan: want a number from"),
    # non-finite limits: one error naming line and key (inf was an internal error with exit 1)
    ('[[queues]]\nname = "vc01"\nborrow_limit = inf\n', "line 15: queues[1].borrow_limit = inf: want a whole"),
    ('[[queues]]\nname = "vc01"\nlend_limit = nan\n', "line 15: queues[1].lend_limit = nan: want a whole"),
    ('[[queues]]\nname = "vc01"\nborrow_limit = {A100 = inf}\n', "queues[1].borrow_limit.A100 = inf: want a whole"),
    # a per-type limit on a type the cluster lacks can never bind; a misspelt parent is no silent tree
    ('[[queues]]\nname = "vc01"\nborrow_limit = {H100 = 2}\n', ("line 15: queues[1].borrow_limit.H100: the cluster "
                                                               "has no H100 GPUs (it has A100, V100)")),
    (('[[queues]]\nname = "lab"\n[[queues]]\nname = "vc01"\nparent = "lab"\n[[queues]]\nname = "vc02"\n'
      'parent = "lbx"\n'), "line 20: queues[3].parent = 'lbx': no queue has this name and no other queue names it"),
    (('[[queues]]\nname = "research"\n[[queues]]\nname = "vc01"\nparent = "research"\n[[queues]]\nname = "vc02"\n'
      'parent = "reserch"\n'), "did you mean 'research'?"),
    ('[[queues]]\nname = "vc01"\nsize = 2\n', "queues[1]: unknown key(s) size; known: "),
    ('[[queues]]\nname = "vc01"\nborrow_limit = {A100 = -2}\n', "queues[1].borrow_limit.A100 = -2: want a whole"),
    ('[[queues]]\nname = "vc01"\nborrow_limit = {P99 = 2}\n', "line 15: queues[1].borrow_limit: unknown GPU type"),
    # the tree: cycles, a VC as parent, an inner queue that is a VC, its guarantee the sum of its VCs
    (('[[queues]]\nname = "a"\nparent = "b"\n[[queues]]\nname = "b"\nparent = "a"\n[[queues]]\nname = "vc01"\n'
      'parent = "a"\n'), "line 15: queues[1].parent = 'b': the parents form a cycle (a -> b -> a)"),
    ('[[queues]]\nname = "vc01"\nparent = "vc02"\n', ("line 15: queues[1].parent = 'vc02': a VC is a leaf queue and "
                                                    "cannot be a parent")),
    ('[[queues]]\nname = "vc01"\nparent = "vc02"\n[[queues]]\nname = "vc02"\n',
     "line 17: queues[2].name = 'vc02': a VC is a leaf queue, but another queue names it as its parent"),
    (('[[queues]]\nname = "lab"\nguarantee = 16\n[[queues]]\nname = "vc01"\nparent = "lab"\n[[queues]]\n'
      'name = "vc02"\nparent = "lab"\n'), "line 15: queues[1].guarantee = 16: queue lab's nodes give 24 GPUs"),
    ('fair_share_half_life = -5\n', "fair_share_half_life = -5: want a number of seconds > 0"),
    ('queues = 3\n', "'queues' must be a list of tables"),
])
def test_bad_queues_are_one_line_errors(tmp_path, queues, message) -> None:
    path = tmp_path / "c.toml"
    text = (queues + BASE) if not queues.startswith("[[") else (BASE + "\n" + queues)
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        read_half_life(path)
        read_queues(path)
    assert str(path) in str(err.value) and message in str(err.value)
    code, out = _run("simulate", "--jobs", "20", "--vcs", "vc01", "--cluster", path, "--out", tmp_path / "r")
    assert code == 2 and out.startswith("error: ") and message in out and len(out.strip().splitlines()) == 1


def test_preemptive_policy_with_borrowing_is_an_error(tmp_path) -> None:
    code, out = _run("simulate", "--jobs", "50", "--policy", "srtf", "--cluster", EXAMPLES / "queues.toml",
                     "--out", tmp_path / "r")
    assert code == 2 and out.startswith("error: --policy srtf preempts on its own") and "non-preemptive" in out


def test_cluster_show_prints_the_queues_back(tmp_path) -> None:
    code, _ = _run("cluster", "show", EXAMPLES / "queues.toml", "--out", tmp_path / "q.toml")
    assert code == 0
    again = read_queues(tmp_path / "q.toml")
    assert again == read_queues(EXAMPLES / "queues.toml") and len(again) == 8
    assert again[0].borrow_limit == 256 and again[0].lend_limit == 128


def test_borrowing_experiment_runs_and_pairs_seeds(tmp_path) -> None:
    from dlsched.experiments.dlsched.borrowing import main, queues_toml

    path = tmp_path / "c.toml"
    path.write_text(queues_toml({"a": 2, "b": 1}, 8, True))
    a, b = read_queues(path)
    assert (a.name, a.borrow_limit, a.lend_limit, b.borrow_limit, b.lend_limit) == ("a", 16, 8, 8, 4)
    doc = tmp_path / "queues.md"
    doc.write_text("# before\n<!-- borrowing-table: start -->\nold\n<!-- borrowing-table: end -->\nafter\n")
    text = main(["--seeds", "2", "--jobs", "400", "--write-docs", str(doc)])
    rows = text.splitlines()[2:]
    assert len(rows) == 2 and rows[0].startswith("| built-in 400 jobs | fifo | 2 |")
    assert all(row.count("|") == 14 and " of 2 |" in row for row in rows)
    assert doc.read_text() == ("# before\n<!-- borrowing-table: start -->\n" + text +
                               "\n<!-- borrowing-table: end -->\nafter\n")
    # the docs' table is this command's: same header, between the markers
    docs = (EXAMPLES.parent / "queues.md").read_text()
    block = docs.split("<!-- borrowing-table: start -->\n", 1)[1].split("\n<!-- borrowing-table: end -->", 1)[0]
    assert block.splitlines()[0] == text.splitlines()[0] and len(block.splitlines()) == 6


@pytest.mark.parametrize("argv,message", [
    (["--seeds", "-3"], "error: --seeds must be between 1 and 1,000"),
    (["--seeds", "1", "--jobs", "0"], "error: --jobs must be at least 1, got 0"),
    (["--seeds", "0", "--philly", "nowhere"], "error: --philly nowhere: no philly_vc_config.csv there"),
    (["--seeds", "1", "--write-docs", "missing.md"], "error: --write-docs missing.md: no such file"),
])
def test_borrowing_experiment_bad_options(capsys, argv, message) -> None:
    from dlsched.experiments.dlsched.borrowing import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.strip() == err.strip().splitlines()[0] and err.startswith(message)


@pytest.mark.parametrize("policy,example", [("fifo", "queues"), ("qssf", "queues"), ("las", "queues"),
                                            ("fairshare", "queues"), ("qssf", "queues-tree")])
def test_borrowing_keeps_the_kernel_invariants(policy, example) -> None:
    """The whole state re-checked after every pass (and every rebalance) with borrowing on, the
    queue manager's loan counters and limits at every level of the tree too."""
    from dataclasses import replace

    from dlsched.registry import make_policy
    from dlsched.run.build import build_run
    from dlsched.run.options import configs_from_options
    from dlsched.sim import Simulator

    [config], _ = configs_from_options({"jobs": 3000, "seed": 0, "policy": policy,
                                        "cluster": EXAMPLES / f"{example}.toml"})
    run = build_run(config)
    sim_config = replace(run.spec.config, check_invariants=True)
    res = Simulator(run.cluster, make_policy(policy, "consolidate", **run.spec.policy_options),
                    sim_config).run(run.inputs.jobs)
    q = res.extra["per_queue"]
    assert all(j.end_time >= j.start_time >= j.submit_time for j in res.jobs)
    assert sum(r["borrowed_starts"] for r in q.values()) > 0 and sum(r["reclaims"] for r in q.values()) > 0
    assert sum(j.preemptions for j in res.jobs) == sum(r["reclaims"] for r in q.values())


def test_tree_example_runs_and_reports_inner_queues(tmp_path) -> None:
    """docs/examples/queues-tree.toml: two inner queues under org, weights, a per-type limit, a
    one-day half-life; `cluster show` prints the tree back."""
    code, text = _run("simulate", "--jobs", "1500", "--seed", "3", "--cluster", EXAMPLES / "queues-tree.toml",
                      "--out", tmp_path / "t")
    assert code == 0, text
    s = json.loads((tmp_path / "t" / "summary.json").read_text())
    inner = s["per_inner_queue"]
    assert list(inner) == ["org", "research", "production"]
    assert inner["research"]["queues"] == ["vc01", "vc02", "vc03"] and inner["research"]["guarantee_gpus"] == 512
    assert inner["research"]["weight"] == 2.0 and inner["research"]["borrow_limit"] == 128
    assert inner["org"]["used_gpu_hours"] == pytest.approx(sum(q["used_gpu_hours"] for q in s["per_queue"].values()))
    assert s["fair_share_half_life"] == 86400.0
    assert s["per_queue"]["vc01"]["borrow_limit_by_type"] == {"V100": 128}
    code, _ = _run("cluster", "show", EXAMPLES / "queues-tree.toml", "--out", tmp_path / "q.toml")
    assert code == 0
    assert read_queues(tmp_path / "q.toml") == read_queues(EXAMPLES / "queues-tree.toml")
    from dlsched.traces.cluster_queues import HALF_LIFE_KEY, QUEUE_KEYS

    text = (EXAMPLES.parent / "cluster-file.md").read_text()
    for key in QUEUE_KEYS - {"namespaces"} | {HALF_LIFE_KEY}:  # every key is documented (namespaces: queues.md)
        assert f"| `{key}`" in text, key

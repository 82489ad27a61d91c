"""A run is a value: every `simulate` option reaches the same RunConfig through `sweep`, and
the sweep honours or rejects each option (issue 21, point 1)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.run.options import OPTIONS, configs_from_options, policy_options
from dlsched.run.params import all_params
from dlsched.sweep.engine_local import LocalEngine
from dlsched.sweep.run import run_sweep, validate
from dlsched.sweep.spec import SpecError, load_spec

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
runner = CliRunner()
# keys of a summary that describe the machine, not the run
VOLATILE = {"timings"}


def _cases(tmp_path: Path) -> list[dict]:
    """Option sets that together give every run option a value other than its default."""
    prio = tmp_path / "prio.csv"
    prio.write_text("jobname,priority\n" + "\n".join(f"sia_00000{i},{10 * i}" for i in range(1, 10)) + "\n")
    cluster = tmp_path / "cluster.toml"
    assert runner.invoke(app, ["cluster", "show", "--builtin", "--out", str(cluster)]).exit_code == 0
    return [
        {"jobs": 300, "seed": 1, "start": "0", "end": "3000000", "policy": "qssf", "lam": 0.3, "refit_every": 3600.0,
         "backfill": True, "placement": "best-fit", "check_invariants": True, "preemption_overhead": 5.0,
         "energy": "vanilla", "boot_delay": 60.0, "idle_timeout": 600.0, "max_jobs_per_gpu": 2,
         "speed_model": "time-sliced", "failure_model": "oom", "gpu": "A100", "topology": "dgx1",
         "observe_after": 100.0},
        {"trace": str(FIXTURES / "helios_log.csv"), "trace_format": "helios-log",
         "vc_config": str(FIXTURES / "vc_config.csv"), "vcs": "6214e9,103959", "skip_invalid": True,
         "policy": "qssf", "priority_file": str(prio), "compat": "helios", "energy": "ces", "buffer": 2,
         "predict_resources": True},
        # the measured bug of issue 21: a named workload with observation, and Co-scheML's model
        {"workload": "coscheml-30", "observe_after": 0.0, "policy": "coscheml",
         "interference_model": "horus-paper-curve", "profiles": "builtin", "max_jobs_per_gpu": 2, "nodes": 3,
         "gpus_per_node": 1},
        {"jobs": 200, "cluster": str(cluster), "policy": "las", "threshold": 600.0, "queues": 2,
         "time_limits": "overestimate=1.5:3,round=600"},
    ]


def _argv(case: dict) -> list[str]:
    """The command line of ``case``: run options and policy parameters by their flags (the policy
    parameters' flags generated from their classes), except ``refit_every`` by ``--param``."""
    argv = []
    for key, value in case.items():
        if key in OPTIONS or (key in policy_options() and key != "refit_every"):
            flag = (OPTIONS.get(key) or policy_options()[key]).flag
            argv += [flag] if value is True else [flag, str(value)]
        else:
            argv += ["--param", f"{key}={value}"]
    return argv


def test_every_simulate_option_gives_the_same_summary_through_sweep(tmp_path):
    cases = _cases(tmp_path)
    covered = {k for c in cases for k in c} | {"param"}  # --param: how _argv gives refit_every
    missing = set(OPTIONS) - covered - {"predictor"}  # --predictor: a trained predictor bundle, below
    assert not missing, f"options no case sets: {sorted(missing)}"
    runs = "\n".join(f"  - {json.dumps(c)}" for c in cases)
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"runs:\n{runs}\n")
    loaded = load_spec(spec)
    result = run_sweep(loaded, tmp_path / "sw", LocalEngine(1), emit=lambda line: None)
    assert result.failed == 0, list(result.table.get("error"))
    ids = [c.id for c in loaded.cells]
    for i, (case, cell) in enumerate(zip(cases, ids)):
        out = tmp_path / f"sim{i}"
        res = runner.invoke(app, ["simulate", *_argv(case), "--out", str(out)])
        assert res.exit_code == 0, res.output
        direct = json.loads((out / "summary.json").read_text())
        swept = json.loads((tmp_path / "sw" / "cells" / cell / "summary.json").read_text())
        for key in VOLATILE:
            direct.pop(key, None), swept.pop(key, None)
        assert swept == direct, case
    # the bug of issue 21: the sweep ran the 24 Co-scheML jobs with observation
    bug = json.loads((tmp_path / "sw" / "cells" / ids[2] / "summary.json").read_text())
    assert bug["jobs"] == 24 and bug["trace"].startswith("workload coscheml-30") and bug["observe_after"] == 0


def test_predictor_option_maps_to_the_workload_section():
    [config], _ = configs_from_options({"predictor": "some/dir"})
    assert config.workload.predictor == Path("some/dir") and config.workload.predicts


def test_a_sweep_rejects_what_it_would_not_honour(tmp_path):
    def spec(text: str):
        path = tmp_path / "s.yaml"
        path.write_text(textwrap.dedent(text))
        return load_spec(path)

    with pytest.raises(SpecError, match=r"line 2: .*lam: policy fifo does not read lam \(read by qssf, easy, conservative; fifo declares no parameters\)"):
        validate(spec("base: {jobs: 100}\ngrid: {lam: [0.2]}\n"))
    with pytest.raises(SpecError, match="boot_delay: --boot-delay does nothing without --energy"):
        validate(spec("grid: {boot_delay: [10.0]}\n"))
    with pytest.raises(SpecError, match="jobs: --jobs sizes and seeds the built-in workload; with --trace"):
        validate(spec(f"base: {{trace: {FIXTURES / 'helios_log.csv'}, nodes: 4}}\ngrid: {{jobs: [50]}}\n"))
    with pytest.raises(SpecError, match="unknown simulate option 'thresold'"):
        spec("grid: {thresold: [1.0]}\n")


def test_every_policy_parameter_is_a_sweep_key_and_a_flag_of_its_classes_type():
    fields = {name: kinds for name, kinds in all_params().items() if kinds}
    assert fields["qssf"] == {"lam": (float, False), "refit_every": (float, False), "priority_file": (Path, True)}
    assert fields["las"] == {"threshold": (float, False), "queues": (int, False)}
    from dlsched.registry import POLICIES
    from dlsched.sweep.options import simulate_options

    flags, sweep_keys = policy_options(), simulate_options()
    for name, kinds in fields.items():
        params = POLICIES[name].Params()
        for key, (kind, optional) in kinds.items():
            assert key not in OPTIONS, f"{name}.{key} shadows a run option"
            assert (flags[key].kind, flags[key].optional) == (kind, optional), key
            assert flags[key].default == getattr(params, key), key
            assert sweep_keys[key].policy_param and sweep_keys[key].kind is kind, key
    assert [k for k, o in OPTIONS.items() if o.section == "params"] == ["param"]  # no flag listed by hand

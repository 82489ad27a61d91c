"""Policy flags are generated from the policies' parameter classes (issue 21, point 1): a policy
registered with a parameter of its own gets a ``simulate`` flag and a sweep key, both reaching
its constructor, with no edit to the CLI; a misspelt one is one ``error:`` line (exit 2); and the
generation costs a plain run nothing (no policy module but the run's is imported)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.registry import POLICIES
from dlsched.run.options import OPTIONS, policy_options
from dlsched.run.params import all_params
from dlsched.sched.policies.fifo import FifoPolicy

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
#: where the test policy writes the knob each instance was built with (a sweep cell runs in a fork)
SEEN: list[Path] = []


@dataclass(frozen=True, slots=True)
class KnobParams:
    """A test policy's one parameter."""

    knob_turns: int = field(default=3, metadata={"help": "test-knob: turns of the knob."})

    def __post_init__(self) -> None:
        if self.knob_turns < 0:
            raise ValueError(f"--param knob_turns must be >= 0, got {self.knob_turns}")


class KnobPolicy(FifoPolicy):
    """FIFO that records the knob it was built with."""

    name = "test-knob"
    Params = KnobParams

    def __init__(self, placer, backfill: bool = False, knob_turns: int = 3) -> None:
        super().__init__(placer, backfill)
        with SEEN[0].open("a") as f:
            f.write(f"{knob_turns}\n")


@pytest.fixture
def knob(tmp_path):
    """``test-knob`` registered for one test (one registry line, as a new policy's)."""
    SEEN[:] = [tmp_path / "seen.txt"]
    POLICIES.add("test-knob", KnobPolicy)
    try:
        yield lambda: [int(x) for x in SEEN[0].read_text().split()] if SEEN[0].exists() else []
    finally:
        POLICIES.remove("test-knob")


def test_a_new_policys_parameter_is_a_flag_that_reaches_it(knob, tmp_path, monkeypatch):
    # typer reads TERMINAL_WIDTH once, when typer.rich_utils is first imported: after a test that
    # set it to 80 (test_help_80_columns) every later help is 80 wide unless set here
    monkeypatch.setattr("typer.rich_utils.MAX_WIDTH", 200)
    option = policy_options()["knob_turns"]
    assert (option.flag, option.kind, option.default, option.help) == ("--knob-turns", int, 3,
                                                                       "test-knob: turns of the knob.")
    for command in ("simulate", "compare"):  # no parameter may clash with a command's own option either
        shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert shown.exit_code == 0 and "--knob-turns" in shown.output, shown.output
        assert "test-knob: turns of the knob." in shown.output
    result = runner.invoke(app, ["simulate", "--policy", "test-knob", "--knob-turns", "7", "--jobs", "30",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert knob() == [7]
    # left out, the policy's own default holds; another policy ignores it with a note
    assert runner.invoke(app, ["simulate", "--policy", "test-knob", "--jobs", "30",
                               "--out", str(tmp_path / "r2")]).exit_code == 0
    assert knob() == [7, 3]
    other = runner.invoke(app, ["simulate", "--policy", "fifo", "--knob-turns", "2", "--jobs", "30",
                                "--out", str(tmp_path / "r3")])
    assert other.exit_code == 0 and "note: --knob-turns is read only by test-knob; fifo ignores it" in other.output
    assert knob() == [7, 3]


def test_a_new_policys_parameter_is_a_sweep_key_that_reaches_it(knob, tmp_path):
    from dlsched.sweep.engine_local import LocalEngine
    from dlsched.sweep.run import run_sweep
    from dlsched.sweep.spec import load_spec

    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {jobs: 30, policy: test-knob}\ngrid: {knob_turns: [5, 11]}\n")
    result = run_sweep(load_spec(spec), tmp_path / "sw", LocalEngine(1), emit=lambda line: None)
    assert result.failed == 0
    assert sorted(knob()) == [5, 11]


@pytest.mark.parametrize(("argv", "message"), [
    (["--knob-tunrs", "7"], "No such option: --knob-tunrs (Possible options: --knob-turns"),
    (["--param", "knob_tunrs=7"], "--param knob_tunrs: not a parameter of test-knob (test-knob declares knob_turns)"),
    (["--knob-turns", "-1"], "error: --knob-turns must be >= 0, got -1"),
    (["--knob-turns", "many"], "Invalid value for '--knob-turns': 'many' is not a valid int"),
])
def test_a_misspelt_or_bad_parameter_is_one_error_line(knob, tmp_path, argv, message):
    result = runner.invoke(app, ["simulate", "--policy", "test-knob", *argv, "--jobs", "30",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output
    assert "Traceback" not in result.output and knob() == []


def test_a_misspelt_sweep_key_is_rejected_naming_it(knob, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {jobs: 30, policy: test-knob}\ngrid: {knob_tunrs: [5]}\n")
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "sw")])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "'knob_tunrs' (did you mean 'knob_turns'?)" in result.output
    assert knob() == []


def test_every_policy_parameter_has_a_flag_of_its_classes_type_default_and_help():
    options = policy_options()
    for name, kinds in all_params().items():
        params_cls = POLICIES[name].Params if kinds else None
        for key, (kind, optional) in kinds.items():
            option = options[key]
            assert key not in OPTIONS, f"{name}.{key} shadows a run option"
            assert (option.kind, option.optional) == (kind, optional), key
            f = {x.name: x for x in dataclasses.fields(params_cls)}[key]
            assert option.default == f.default, key
            assert option.help, key
    assert set(options) == {k for kinds in all_params().values() for k in kinds}


def test_the_flags_that_were_written_by_hand_keep_their_help_and_defaults():
    """--lam, --refit-every, --priority-file and --interference-model, as the CLI had them."""
    options = policy_options()
    assert (options["lam"].kind, options["lam"].default) == (float, 0.1)
    assert options["lam"].help == "QSSF: weight of the rolling estimate P_R (1-lam on the GBDT)."
    assert (options["refit_every"].default, options["refit_every"].help) == (
        86400.0, "QSSF: refit the GBDT every this many simulated s.")
    assert (options["priority_file"].kind, options["priority_file"].optional) == (Path, True)
    assert options["priority_file"].help == "QSSF: external priorities (job id/jobname,priority)."
    assert options["interference_model"].metavar == "NAME"
    assert options["interference_model"].help.startswith("coscheml: how it predicts a pair's slowdown.")


def test_a_plain_run_imports_no_policy_module_but_its_own(tmp_path):
    """Generating the flags imports every policy: a command line that names none of them must not."""
    code = ("import sys\nfrom dlsched.cli.main import app\n"
            "try:\n    app(['simulate', '--policy', 'fifo', '--jobs', '20', '--out', sys.argv[1], '--json'],"
            " standalone_mode=False)\n"
            "finally:\n    import json\n"
            "    mods = sorted(m for m in sys.modules if m.startswith('dlsched.sched.policies.'))\n"
            "    print(json.dumps(mods), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r")], capture_output=True, text=True,
                            env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1]) == ["dlsched.sched.policies.fifo"]

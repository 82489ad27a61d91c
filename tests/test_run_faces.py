"""Each face that simulates builds the RunConfig that ``dlsched simulate`` builds for the same
options (issue 21, point 1): the reproductions and experiment harnesses describe their runs as
frozen values, compared here field for field with what the command line maps its flags onto."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import sim_cmd
from dlsched.cli.main import app
from dlsched.experiments.topology.evaluation import PAPER_POLICIES, paper_config
from dlsched.reproduce import helios_fidelity
from dlsched.reproduce.base import Context
from dlsched.run.config import RunConfig
from dlsched.run.params import policy
from dlsched.topology.graph import PRESET_GPUS

runner = CliRunner()


def cli_config(monkeypatch, argv: list[str]) -> RunConfig:
    """The RunConfig ``dlsched simulate ARGV`` maps its flags onto (stopped before any work)."""
    from dlsched.run.options import configs_from_options

    built: list[RunConfig] = []

    def capture(values, given, out_dir, policies=None):
        built.extend(configs_from_options(values, policies)[0])
        raise SystemExit(0)

    monkeypatch.setattr(sim_cmd, "_prepare_runs", capture)
    result = runner.invoke(app, ["simulate", *argv])
    assert result.exit_code == 0 and len(built) == 1, result.output
    return built[0]


@pytest.mark.parametrize("name", list(PAPER_POLICIES))
def test_topology_experiment_runs_are_the_simulate_runs(monkeypatch, name):
    order, placement, backfill = PAPER_POLICIES[name]
    argv = ["--nodes", "4", "--gpus-per-node", str(PRESET_GPUS["dgx1"]), "--topology", "dgx1", "--policy", order,
            "--placement", placement, "--speed-model", "topology"] + (["--backfill"] if backfill else [])
    built, by_flags = paper_config(name, 4, "dgx1"), cli_config(monkeypatch, argv)
    # the jobs are the experiment's own (paper profiles), every other section is the command's
    for section in ("cluster", "policy", "placement", "models", "energy", "engine", "observe"):
        assert getattr(built, section) == getattr(by_flags, section), section
    assert built.policy.backfill is backfill and built.placement.name == placement


def test_topology_experiment_rejects_an_unknown_policy_or_preset():
    with pytest.raises(ValueError, match="unknown policy 'fifo'; choose from fcfs"):
        paper_config("fifo", 4, "dgx1")
    with pytest.raises(ValueError, match="unknown topology preset 'ring'"):
        paper_config("fcfs", 4, "ring")


@pytest.mark.parametrize("name", helios_fidelity.POLICIES)
def test_helios_fidelity_runs_are_its_command(monkeypatch, tmp_path, name):
    ctx = Context(tmp_path / "shared", tmp_path / "work")
    command = helios_fidelity.HeliosFidelity.command
    command = command.replace("$REF", str(ctx.data(helios_fidelity.REF))).replace("$P", str(ctx.data("traces/philly")))
    argv = shlex.split(command.split(" --policy ")[0])[2:]  # after "dlsched simulate"
    argv += ["--policy", name]
    if name in helios_fidelity.PARAMS:
        argv += ["--priority-file", str(ctx.data(helios_fidelity.PRIORITIES))]
    built = helios_fidelity.reference_config(ctx, name)
    assert built == cli_config(monkeypatch, argv)
    assert built.engine.compat == "helios" and built.placement.name is None
    if name == "qssf":
        assert built.policy.params == policy("qssf", priority_file=ctx.data(helios_fidelity.PRIORITIES)).params
    assert Path(built.workload.trace).name == "input_cluster_log_helios_format.csv.gz"

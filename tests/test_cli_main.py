"""The ``dlsched`` entry point: commands load lazily, yet help lists all of them as before."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from dlsched.cli import main

runner = CliRunner()
FIX = Path(__file__).parent / "fixtures" / "traces"


def _eager_group():
    """The group as it was built before: every module registered on one app, in module order."""
    app = typer.Typer(add_completion=False)
    for module in main.COMMAND_MODULES:
        importlib.import_module(f"dlsched.cli.{module}").register(app)
    return typer.main.get_group(app)


def test_command_table_matches_what_the_modules_register():
    eager = _eager_group()
    assert list(eager.commands) == list(main.COMMANDS)  # same names, same order in --help
    for module in main.COMMAND_MODULES:
        app = typer.Typer()
        importlib.import_module(f"dlsched.cli.{module}").register(app)
        names = set(typer.main.get_group(app).commands)
        assert names == {n for n, mods in main.COMMANDS.items() if module in mods}, module


def test_help_lists_every_command_with_its_help():
    res = runner.invoke(main.app, ["--help"], terminal_width=200)
    assert res.exit_code == 0
    for name, command in _eager_group().commands.items():
        assert name in res.output
        assert command.get_short_help_str(200)[:40] in res.output


def test_unknown_command_still_suggests():
    res = runner.invoke(main.app, ["simulat"])
    assert res.exit_code == 2 and "simulate" in res.output


def test_group_commands_resolve_lazily():
    res = runner.invoke(main.app, ["trace", "--help"])
    assert res.exit_code == 0 and "convert" in res.output


def test_simulate_imports_only_what_it_needs(tmp_path):
    args = ["simulate", "--trace", str(FIX / "helios_log.csv"), "--vc-config", str(FIX / "vc_config.csv"),
            "--out", str(tmp_path / "run")]
    code = (
        "import json, sys\n"
        "from dlsched.cli.main import app\n"
        f"app({args!r}, standalone_mode=False)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(res.stdout.strip().splitlines()[-1]))
    assert "dlsched.cli.sim_cmd" in loaded
    other = {f"dlsched.cli.{m}" for m in main.COMMAND_MODULES if m != "sim_cmd"}
    assert not other & loaded
    heavy = ("dlsched.predictors", "dlsched.report", "dlsched.energy", "matplotlib", "sklearn", "lightgbm",
             "torch", "rich.progress")
    assert not [m for m in loaded if m.startswith(heavy)]
    assert (tmp_path / "run" / "jobs.csv").is_file()

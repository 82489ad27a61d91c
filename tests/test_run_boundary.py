"""The run configuration is library code: the packages that build runs import nothing from the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dlsched"
LIBRARY = ("run", "sweep", "reproduce")


def _cli_imports(path: Path) -> list[str]:
    """Every ``dlsched.cli`` import in ``path``, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [f"{path.relative_to(SRC)}:{node.lineno}: {n}" for n in names
                  if n == "dlsched.cli" or n.startswith("dlsched.cli.")]
    return found


def test_run_sweep_and_reproduce_never_import_the_cli():
    files = [p for package in LIBRARY for p in sorted((SRC / package).rglob("*.py"))] + [SRC / "runner.py"]
    assert len(files) > 20
    offenders = [hit for path in files for hit in _cli_imports(path)]
    assert offenders == []


def test_simulate_and_compare_share_one_option_table():
    """Both commands carry every run option, generated from the library's table."""
    import typer

    from dlsched.cli import sim_cmd
    from dlsched.run.options import OPTIONS

    app = typer.Typer()
    sim_cmd.register(app)
    group = typer.main.get_group(app)
    flags = {name: {opt for p in group.commands[name].params for opt in p.opts} for name in ("simulate", "compare")}
    wanted = {o.flag for o in OPTIONS.values()}
    assert wanted <= flags["simulate"]
    assert wanted - {"--policy"} <= flags["compare"] and "--policies" in flags["compare"]


def test_one_place_assembles_a_simulator():
    """Every command and experiment builds its runs as a RunConfig through ``build_run``: outside
    the engine itself (``sim/``), only ``runner.assemble`` constructs a ``Simulator``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name == "Simulator":
                    found.append(str(path.relative_to(SRC)))
    assert [p for p in found if not p.startswith("sim/")] == ["runner.py"], found

"""No traceback reaches a user: every command, given bad arguments, prints one `error:` line, exits 2.

The command tree is walked from ``dlsched.cli.main.COMMANDS`` at test time, so commands added
later (and their sub-commands) are checked without editing this file. For every leaf command:
an unknown option; a non-number for every numeric option; a path that can be neither read nor
written (a name under a regular file) for every path parameter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dlsched.cli.main import COMMANDS, app

NUMERIC = {"integer", "float", "integer range", "float range"}


def _leaves() -> list[tuple[tuple[str, ...], object]]:
    """(command path, click command) for every leaf command under COMMANDS."""
    root = typer.main.get_command(app)
    found = []

    def walk(path: tuple[str, ...], cmd) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name in list(subs):
                walk(path + (name,), subs[name])
        else:
            found.append((path, cmd))

    for name in COMMANDS:
        walk((name,), root.commands[name])
    return found


LEAVES = _leaves()


def _is_path(param) -> bool:
    td = getattr(param, "type_descriptor", None)  # Typer >= 0.20 describes types this way
    if td is not None:
        return bool(td.is_path)
    return getattr(getattr(param, "type", None), "name", "") == "path"


def _is_number(param) -> bool:
    td = getattr(param, "type_descriptor", None)
    if td is not None:
        return td.annotation in (int, float) and not td.is_list
    return getattr(getattr(param, "type", None), "name", "") in NUMERIC


def _required_args(cmd, bad: Path, skip=None) -> list[str]:
    """Values for the required parameters: the unusable path for paths, a harmless word else."""
    args: list[str] = []
    for p in cmd.params:
        if p is skip or not p.required:
            continue
        value = str(bad) if _is_path(p) else ("1" if _is_number(p) else "x")
        args += [value] if p.param_type_name == "argument" else [p.opts[0], value]
    return args


def _assert_clean_error(result, argv: list[str]) -> str:
    text = result.output  # stdout and stderr interleaved
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += f"\nTraceback (escaped): {result.exception!r}"
    assert "Traceback" not in text, f"{argv}: traceback\n{text}"
    assert result.exit_code == 2, f"{argv}: exit {result.exit_code}\n{text}\n{result.exception!r}"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: "), f"{argv}: no 'error:' line at the end\n{text}"
    assert sum(ln.startswith("error:") for ln in lines) == 1, f"{argv}: several error lines\n{text}"
    return lines[-1]


@pytest.fixture()
def unusable(tmp_path: Path) -> Path:
    """A path that can neither be read nor created: its folder is a regular file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    return blocker / "x.csv"


def test_the_walk_finds_every_command() -> None:
    names = {path for path, _ in LEAVES}
    assert ("simulate",) in names and ("trace", "generate") in names and ("experiment", "topo-scenario2") in names
    assert len(names) >= 19


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_unknown_option_is_one_error_line(path, cmd, unusable) -> None:
    argv = [*path, *_required_args(cmd, unusable), "--definitely-not-an-option"]
    line = _assert_clean_error(CliRunner().invoke(app, argv), argv)
    assert "--definitely-not-an-option" in line


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_non_numbers_for_numeric_options(path, cmd, unusable) -> None:
    for p in cmd.params:
        if p.param_type_name != "option" or p.is_flag or not _is_number(p):
            continue
        argv = [*path, *_required_args(cmd, unusable, skip=p), p.opts[0], "many"]
        line = _assert_clean_error(CliRunner().invoke(app, argv), argv)
        assert "many" in line or p.opts[0] in line, line


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_unusable_paths(path, cmd, unusable) -> None:
    for p in cmd.params:
        if not _is_path(p):
            continue
        value = [str(unusable)] if p.param_type_name == "argument" else [p.opts[0], str(unusable)]
        rest = _required_args(cmd, unusable, skip=p)
        argv = [*path, *rest, *value]
        line = _assert_clean_error(CliRunner().invoke(app, argv), argv)
        if "a-file" in line or p.opts[0] in line:
            continue
        # the command stopped at something else first (e.g. an input it needs but cannot mark as
        # required): then the same error comes without the unusable path too
        if p.param_type_name != "argument":
            alone = CliRunner().invoke(app, [*path, *rest])
            if alone.exit_code == 2 and line in alone.output:
                continue
        raise AssertionError(f"{argv}: the error does not name the path\n{line}")

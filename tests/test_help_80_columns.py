"""Every command's ``--help`` is readable at 80 columns: no option name, choice or bracketed text
is cut or eaten (issue 37: ``--gang-permit-ti…``, ``consolidate|first-fit|…|spr…``, ``[] tables``)."""

from __future__ import annotations

import re

import pytest
import typer
from typer._click import Context  # Typer ships its own copy of click
from typer.testing import CliRunner

from dlsched.cli.main import app

CHOICES = re.compile(r"(?<![\w/.-])([a-z0-9][\w.-]*(?:\|[a-z0-9][\w.-]*)+)")  # a|b|c in a help text


def _commands() -> list[tuple[list[str], object]]:
    """Every command and subcommand, with the words that reach it."""
    root = typer.main.get_command(app)
    out: list[tuple[list[str], object]] = []

    def walk(path: list[str], cmd) -> None:
        out.append((path, cmd))
        if hasattr(cmd, "list_commands"):
            ctx = Context(cmd, info_name=path[-1] if path else "dlsched")
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk([*path, name], sub)

    walk([], root)
    return out


COMMANDS = _commands()


def _help(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"},
                                terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def _words(text: str) -> str:
    """The help with its box drawing and line breaks gone: one space between words."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_every_command_is_covered() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"simulate", "serve", "whatif", "compare", "experiment eta", "reproduce"} <= names
    assert len(names) > 30


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "dlsched")
def test_help_at_80_columns_cuts_nothing(path) -> None:
    cmd = {tuple(p): c for p, c in COMMANDS}[tuple(path)]
    text = _help(path)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text, [line for line in text.splitlines() if "…" in line]
    lines = text.splitlines()
    words = _words(text)
    for param in cmd.params:
        if getattr(param, "param_type_name", "") == "option" and not param.hidden:
            for opt in (*param.opts, *param.secondary_opts):   # whole, on one line
                assert any(re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", line) for line in lines), opt
            if type(param.type).__name__ == "Choice":
                for choice in param.type.choices:
                    assert str(choice) in words, (param.name, choice)
            for group in CHOICES.findall(param.help or ""):
                for choice in group.split("|"):
                    assert re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", words), (param.name, choice)
            if "[[" in (param.help or ""):
                assert "[[" in text, param.name   # rich markup must not eat [[queues]]

"""The CLI run in process, as the hostile-input tests check it: no traceback, no exception escaping
the command, and bad input answered by one ``error:`` line with exit code 2."""

from __future__ import annotations

from typer.testing import CliRunner

from dlsched.cli.main import app


def run_cli(*argv: object) -> tuple[int, list[str]]:
    """(exit code, the non-blank output lines) of ``dlsched ARGV``."""
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"escaped: {result.exception!r}")
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


def one_error(code: int, lines: list[str]) -> str:
    """The one ``error:`` line, the last of the output, of a run that exited 2."""
    assert code == 2, lines
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    assert "internal error" not in errors[0]
    return errors[0]


def only_error(*argv: object) -> str:
    """The ``error:`` line of ``dlsched ARGV``, which prints nothing else."""
    code, lines = run_cli(*argv)
    line = one_error(code, lines)
    assert lines == [line], lines
    return line

"""The last line of defence: whatever escapes a command becomes one ``error:`` line, never a traceback.

Commands turn expected bad input into ``error:`` lines themselves (``common.clear_errors``);
this module catches the rest at the top of ``dlsched``: command-line mistakes found by the
parser, a missing optional extra, a path that cannot be written, running out of memory, and
finally genuine bugs (exit 1, with ``DLSCHED_TRACEBACK=1`` to see the traceback).
"""

from __future__ import annotations

import os
import sys

# top-level module -> the optional extra of pyproject.toml that installs it
EXTRAS: dict[str, str] = {
    "onnx": "graph", "onnxruntime": "graph",
    "sklearn": "ml", "lightgbm": "ml", "xgboost": "ml", "rapidfuzz": "ml", "scipy": "ml",
    "torch": "export", "transformers": "export",
}

USAGE_EXIT = 2      # bad input: option, value, file
BUG_EXIT = 1        # anything we did not foresee


def missing_extra(exc: BaseException) -> str | None:
    """The message for an optional dependency that is not installed, or None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return (f"this command needs the optional '{extra}' extra ({top} is not installed): "
            f"pip install -e '.[{extra}]' (or: pip install 'dlsched[{extra}]')")


def print_error(message: str | None) -> None:
    """Print ``error: message`` on one line of stderr (nothing when None)."""
    if message is not None:
        text = " ".join(str(message).split())  # one line, whatever the message held
        print(f"error: {text}", file=sys.stderr, flush=True)



def _kind(exc: BaseException) -> set[str]:
    # Typer ships its own copy of click, so its exception classes are matched by name
    return {cls.__name__ for cls in type(exc).__mro__}


def explain(exc: BaseException) -> tuple[str | None, int]:
    """(message, exit code) for an exception that reached the top of the command line."""
    kinds = _kind(exc)
    if "NoArgsIsHelpError" in kinds:  # the help has been printed: that is the whole answer
        return None, USAGE_EXIT
    if "Abort" in kinds:
        return "aborted", BUG_EXIT
    if "UsageError" in kinds:
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        return f"{where}{exc.format_message()}{hint}", USAGE_EXIT
    if "ClickException" in kinds:
        return exc.format_message(), getattr(exc, "exit_code", BUG_EXIT)
    if (msg := missing_extra(exc)) is not None:
        return msg, USAGE_EXIT
    if isinstance(exc, MemoryError):
        return ("out of memory: the input or the requested size is too large for this machine "
                "(reduce --jobs or the window)"), USAGE_EXIT
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", USAGE_EXIT
    return (f"internal error ({type(exc).__name__}: {exc}); this is a bug in dlsched — "
            f"run again with DLSCHED_TRACEBACK=1 to see where"), BUG_EXIT


def show_traceback() -> bool:
    """True when the user asked to see tracebacks (debugging dlsched itself)."""
    return os.environ.get("DLSCHED_TRACEBACK", "") not in ("", "0")

"""Ending ``dlsched`` without tearing down what a finished command built.

When ``dlsched simulate`` has written its files and printed its summary, the process holds
every job of the trace, the cluster state and hundreds of imported modules. A normal exit
frees them one by one and runs a last full garbage collection over all of them: about a
third of a second for the 68,503 jobs of the Philly reference window, longer than writing
the results. A command that has nothing left to do asks for :func:`skip_teardown`; the
entry point then flushes stdout and stderr and leaves with ``os._exit`` (same exit code,
same output, every file already closed). Only the program's entry point does this (the
``dlsched`` script, ``python -m dlsched.cli.main``): a caller that runs the command in its own
process (tests, ``CliRunner``) gets the ordinary ``SystemExit``.

An error exit (any code but 0) leaves the same way, always: the interpreter's teardown with
pyarrow loaded ended about 3 error exits in 100 with 134 and ``terminate called without an active
exception`` (a known pyarrow problem) instead of the documented 2.
"""

from __future__ import annotations

import contextlib
import os
import sys

_requested = False


def skip_teardown() -> None:
    """The running command is done and has closed its files: the process may end at once."""
    global _requested
    _requested = True


def take_request() -> bool:
    """Whether the command asked for :func:`skip_teardown` (and forget the request)."""
    global _requested
    asked, _requested = _requested, False
    return asked


def quick_exit(code: int) -> None:
    """Flush the standard streams and end the process with ``code``, skipping the teardown."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):   # closed or replaced: nothing to flush
            stream.flush()
    os._exit(code)


def exit_code(code: object) -> int:
    """The process exit code ``sys.exit(code)`` means (None: 0; a message: 1, printed by Python)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1

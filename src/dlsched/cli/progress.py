"""One live progress line on stderr for commands that run longer than a few seconds.

Off when stderr is not a terminal (pipes, CI logs, tests) or with ``dlsched --quiet``; the line
is erased when the work ends so that the command's own output stays as it was. ``Activity``
shows elapsed time (and a count with a rate where the work reports one) from a background
thread, so the work itself needs no changes; ``policy_line`` renders compare's per-policy counts.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

import typer


def enabled(ctx: typer.Context | None = None, stream: TextIO | None = None) -> bool:
    """True on a terminal unless ``dlsched --quiet`` was given (``ctx``: the running command's by default)."""
    if ctx is None:
        import click

        ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().params.get("quiet"):
        return False
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


class Activity:
    """``with Activity("label", on):`` keeps ``label  [count]  elapsed`` up to date until the block ends."""

    def __init__(self, label: str, on: bool, stream: TextIO | None = None, interval: float = 0.5) -> None:
        self.label = label
        self.on = on
        self.stream = stream or sys.stderr
        self.interval = interval
        self.done = 0
        self.total: int | None = None
        self.text: str | None = None    # replaces the count when set (e.g. per-policy progress)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def update(self, done: int, total: int | None = None) -> None:
        """Report ``done`` units of ``total`` (thread-safe enough: two ints)."""
        self.done, self.total = done, total

    def clear(self) -> None:
        """Erase the live line so that a normal line can be printed (the next tick redraws it)."""
        if self._thread is not None:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def render(self) -> str:
        elapsed = time.perf_counter() - self._t0
        if self.text is not None:
            body = self.text
        elif self.done:
            rate = self.done / elapsed if elapsed > 0 else 0.0
            of = f"/{self.total:,}" if self.total else ""
            body = f"{self.done:,}{of} ({rate:,.0f}/s)"
        else:
            body = "working"
        return f"{self.label}  {body}  {elapsed:,.0f} s"

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.stream.write("\r\x1b[2K" + self.render())
            self.stream.flush()

    def __enter__(self) -> Activity:
        self._t0 = time.perf_counter()
        if self.on:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def policy_line(counts: dict[str, tuple[int, int]]) -> str:
    """``fifo 12,000/20,000 | sjf done`` for compare's policies running side by side."""
    parts = []
    for name, (done, total) in counts.items():
        if total and done >= total:
            parts.append(f"{name} done")
        elif total:
            parts.append(f"{name} {done:,}/{total:,}")
        else:
            parts.append(f"{name} waiting")
    return " | ".join(parts)

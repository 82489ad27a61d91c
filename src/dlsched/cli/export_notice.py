"""A ``note:`` before a long or large zoo export, a live line while it runs, and where it was cached.

The first ``dlsched predict gpt2_large`` exports for minutes at gigabytes of memory; without a word
it looks hung. The exporter reports the module's size before tracing (``graph.export.on_export``);
exports of at least ``DLSCHED_EXPORT_NOTE_PARAMS`` parameters (default :data:`NOTE_PARAMS`) are
announced with their rough cost. Small exports stay silent, as before."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from dlsched.cli import progress

if TYPE_CHECKING:
    from dlsched.graph.export import ExportPlan

#: exports of this many parameters or more get the note (~18 s and ~1.2 GB by the export's estimate)
NOTE_PARAMS = 50_000_000
NOTE_ENV = "DLSCHED_EXPORT_NOTE_PARAMS"

T = TypeVar("T")


def note_threshold() -> int:
    """The parameter count from which an export is announced: ``$DLSCHED_EXPORT_NOTE_PARAMS`` or the default."""
    text = os.environ.get(NOTE_ENV, "").strip()
    if not text:
        return NOTE_PARAMS
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = -1
    if value < 0:
        typer.echo(f"error: {NOTE_ENV}={text!r}: expected a whole number of parameters (0 announces every export)",
                   err=True)
        raise typer.Exit(2)
    return value


def _duration(seconds: float) -> str:
    return f"~{seconds:.0f} s" if seconds < 90 else f"~{seconds / 60:.0f} min"


def _count(params: int) -> str:
    return f"{params / 1e6:,.1f} M" if params >= 1e6 else f"{params:,}"


def _size(nbytes: float, binary: bool) -> str:
    (big, big_unit), (small, small_unit) = ((2**30, "GiB"), (2**20, "MiB")) if binary else ((1e9, "GB"), (1e6, "MB"))
    return f"{nbytes / big:.1f} {big_unit}" if nbytes >= big else f"{nbytes / small:.0f} {small_unit}"


def plan_note(name: str, plan: ExportPlan, cache: Path) -> str:
    """The ``note:`` line for an export of zoo model ``name`` described by ``plan``."""
    return (f"note: exporting zoo model {name} to ONNX ({plan.module}, {_count(plan.params)} parameters, "
            f"{_size(plan.param_bytes, True)} of weights) takes {_duration(plan.seconds)} and "
            f"~{_size(plan.peak_bytes, False)} of memory on CPU, once: the graph is cached in {cache} "
            f"(DLSCHED_CACHE moves the cache)")


def exporting(name: str, cache: Path, export: Callable[[], T], *, say: Callable[[str], None] | None = None,
              live_on: bool | None = None, threshold: int | None = None) -> T:
    """Run ``export()`` (which exports zoo model ``name`` into ``cache``) with a live line on a terminal,
    the note before a big export and, after one, how long it took."""
    from dlsched.graph.export import on_export

    emit = say or (lambda text: typer.echo(text, err=True))
    limit = note_threshold() if threshold is None else threshold
    announced: list[float] = []
    with progress.Activity(f"exporting {name}", progress.enabled() if live_on is None else live_on) as live:
        live.text = "building the model"

        def listen(plan: ExportPlan) -> None:
            if plan.params >= limit and not announced:
                live.clear()
                emit(plan_note(name, plan, cache))
                announced.append(time.perf_counter())
            live.text = f"tracing to ONNX (expected {_duration(plan.seconds)})"

        t0 = time.perf_counter()
        with on_export(listen):
            result = export()
    if announced:
        emit(f"note: exported {name} in {time.perf_counter() - t0:,.0f} s; cached in {cache} (later runs read it "
             "in well under a second)")
    return result

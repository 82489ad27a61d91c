"""A ``note:`` before a long or large zoo export, a live line while it runs, and where it was cached.

The first ``dlsched predict gpt2_large`` exports for minutes at gigabytes of memory; without a word
it looks hung. The exporter reports the module's size before tracing (``graph.export.on_export``);
exports of at least ``DLSCHED_EXPORT_NOTE_PARAMS`` parameters (default :data:`NOTE_PARAMS`) are
announced with their rough cost. Small exports stay silent, as before. The words are
:mod:`dlsched.graph.export_note`'s, which ``simulate --predict-resources`` says too."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from dlsched.cli import progress
from dlsched.graph import export_note
from dlsched.graph.export_note import NOTE_ENV, NOTE_PARAMS, duration, plan_note

if TYPE_CHECKING:
    from dlsched.graph.export import ExportPlan

__all__ = ["NOTE_ENV", "NOTE_PARAMS", "exporting", "note_threshold", "plan_note"]

T = TypeVar("T")


def note_threshold() -> int:
    """:func:`dlsched.graph.export_note.note_threshold`, a bad value one ``error:`` line and exit 2."""
    try:
        return export_note.note_threshold()
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


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
            live.text = f"tracing to ONNX (expected {duration(plan.seconds)})"

        t0 = time.perf_counter()
        with on_export(listen):
            result = export()
    if announced:
        emit(f"note: exported {name} in {time.perf_counter() - t0:,.0f} s; cached in {cache} (later runs read it "
             "in well under a second)")
    return result

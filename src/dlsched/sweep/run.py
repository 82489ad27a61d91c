"""``run_sweep``: plan, skip finished cells, run the rest on an engine, write ``results.parquet``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlsched.sweep.cell import CellError, check_cell, workload_key
from dlsched.sweep.progress import Progress
from dlsched.sweep.spec import Spec, SpecError
from dlsched.sweep.store import SweepStore
from dlsched.sweep.workloads import WorkloadCache


@dataclass(slots=True)
class SweepOutcome:
    """Counts of one ``run_sweep`` call and the results table."""

    total: int
    skipped: int      # finished in an earlier run
    done: int
    failed: int
    workload_loads: int
    table: object     # pandas.DataFrame of results.parquet


def validate(spec: Spec) -> None:
    """Check every cell before running any; SpecError names the spec line of the offending key."""
    keys = {k for c in spec.cells for k in c.params if k != spec.replicate}
    unknown = [k for k in spec.baseline if k not in keys]
    if unknown:
        raise SpecError(f"{spec.path}: baseline: {', '.join(unknown)} is not an option the cells set "
                        f"(they set: {', '.join(sorted(keys)) or 'none'})")
    for cell in spec.cells:
        try:
            check_cell(cell.params)
        except CellError as exc:
            line = spec.lines.get(exc.key)
            where = f"{spec.path} line {line}" if line else str(spec.path)
            raise SpecError(f"{where}: cell {cell.label(spec.swept) or cell.label()}: {exc}") from None


class _Sink:
    """Where engines report: the store records, the progress line follows."""

    def __init__(self, store: SweepStore, progress: Progress, keys: list[str]) -> None:
        self.store, self.progress, self.keys = store, progress, keys

    def started(self, cell) -> None:
        self.store.log("start", cell.id, label=cell.label(self.keys))
        self.progress.started()

    def finished(self, cell, outcome, files=None) -> None:
        self.store.record(cell, outcome, files)
        self.progress.finished(cell.label(self.keys) or cell.id, outcome.error is None, outcome.wall_s,
                               outcome.error)

    def tick(self) -> None:
        self.progress.tick()


def run_sweep(spec: Spec, out_dir: str | Path, engine, emit: Callable[[str], None] = print,
              every_s: float = 10.0) -> SweepOutcome:
    """Run the cells of ``spec`` not yet finished in ``out_dir`` and rebuild ``results.parquet``."""
    validate(spec)
    store = SweepStore(out_dir)
    store.write_plan(spec)
    todo = [c for c in spec.cells if not store.is_done(c.id)]
    todo.sort(key=lambda c: workload_key(c.params))  # cells of one workload together: it is loaded once
    skipped = len(spec.cells) - len(todo)
    progress = Progress(len(spec.cells), skipped, emit, every_s)
    if spec.duplicates:
        emit(f"sweep: {spec.duplicates} cells listed more than once run once")
    emit(f"sweep: {len(spec.cells)} cells, {skipped} finished earlier, {len(todo)} to run on {engine.name}")
    cache = WorkloadCache(todo)
    try:
        if todo:
            engine.run(todo, cache, store, _Sink(store, progress, spec.swept))
    except BaseException:
        store.write_results(spec)  # what finished so far, also when interrupted
        raise
    table = store.write_results(spec)
    return SweepOutcome(len(spec.cells), skipped, progress.done, progress.failed, cache.loads, table)

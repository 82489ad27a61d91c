"""Run cells in local processes: one fresh fork per cell, at most ``workers`` at a time.

Forking from the coordinator, which holds the loaded workload, gives every cell the jobs
copy-on-write without pickling them, a clean process (its memory is the cell's alone) and
isolation: a cell that crashes its process is recorded as failed and the sweep goes on. Forks
are made from the main thread only (no helper threads exist at that moment).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import socket
import sys
from collections import deque
from multiprocessing.connection import wait

from dlsched.sweep.cell import Outcome, run_cell
from dlsched.sweep.workloads import WorkloadCache


def _child(cell_id: str, params: dict, workload, out_dir, conn) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle (it terminates us)
    try:
        outcome = run_cell(cell_id, params, workload, out_dir)
        conn.send(outcome)
    finally:
        conn.close()


class LocalEngine:
    """Local process pool (fork); falls back to running cells one by one in-process without fork."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        self.workers = workers

    def run(self, cells, workloads: WorkloadCache, store, sink) -> None:
        if "fork" not in mp.get_all_start_methods():  # pragma: no cover - not on Linux
            for cell in cells:
                sink.started(cell)
                try:
                    workload = workloads.get(cell)
                except Exception as exc:  # noqa: BLE001
                    sink.finished(cell, Outcome(cell.id, None, f"loading the workload: {exc}", 0.0, 0.0,
                                                socket.gethostname()))
                    continue
                sink.finished(cell, run_cell(cell.id, cell.params, workload, store.prepare(cell.id)))
            return
        ctx = mp.get_context("fork")
        pending = deque(cells)
        running: dict = {}
        try:
            self._loop(ctx, pending, running, workloads, store, sink)
        finally:  # interrupted (Ctrl-C) or failed: stop the cells' processes we started, by handle
            for _, process in running.values():
                if process.is_alive():
                    process.terminate()
                process.join()

    def _loop(self, ctx, pending: deque, running: dict, workloads: WorkloadCache, store, sink) -> None:
        while pending or running:
            while pending and len(running) < self.workers:
                cell = pending.popleft()
                sink.started(cell)
                try:
                    workload = workloads.get(cell)
                except Exception as exc:  # noqa: BLE001 -- every cell of a bad workload fails, with the reason
                    sink.finished(cell, Outcome(cell.id, None, f"loading the workload: {exc}", 0.0, 0.0,
                                                socket.gethostname()))
                    continue
                out_dir = store.prepare(cell.id)
                receiver, sender = ctx.Pipe(duplex=False)
                sys.stdout.flush()
                sys.stderr.flush()
                process = ctx.Process(target=_child, args=(cell.id, cell.params, workload, out_dir, sender))
                process.start()
                sender.close()
                running[receiver] = (cell, process)
            for receiver in wait(list(running), timeout=1.0):
                cell, process = running.pop(receiver)
                try:
                    outcome = receiver.recv()
                except EOFError:
                    process.join()
                    outcome = Outcome(cell.id, None, f"the cell's process died (exit code {process.exitcode})",
                                      0.0, 0.0, socket.gethostname())
                receiver.close()
                process.join()
                sink.finished(cell, outcome)
            sink.tick()

"""Run cells on a dask.distributed cluster (``--scheduler tcp://HOST:PORT``).

Each workload is pickled once by the coordinator and scattered with ``broadcast=True``: every
worker receives it once, and the cells that use it only name the scattered future, so a trace
crosses the network once per worker, not once per cell. A cell unpickles its own fresh copy of
the jobs on the worker (simulation changes job objects), runs in a temporary folder and sends
its files back, so workers need not share a filesystem with the coordinator.

The simulator keeps process-wide state while a policy runs (the truth guard), so cells on one
worker process run one at a time (a lock); start workers with ``--nthreads 1`` and several
processes (``--nworkers N``) for parallelism.
"""

from __future__ import annotations

import pickle
import socket
import tempfile
import threading
import uuid
from pathlib import Path

from dlsched.sweep.cell import Outcome, run_cell, workload_key
from dlsched.sweep.workloads import WorkloadCache

_ONE_CELL_AT_A_TIME = threading.Lock()


def remote_cell(cell_id: str, params: dict, payload: bytes) -> tuple[Outcome, dict[str, bytes]]:
    """Runs on a Dask worker: a fresh copy of the workload, the cell, its files as bytes."""
    with _ONE_CELL_AT_A_TIME, tempfile.TemporaryDirectory(prefix="dlsched-cell-") as tmp:
        try:
            workload = pickle.loads(payload)
        except Exception as exc:  # noqa: BLE001 -- e.g. a worker running another dlsched version
            return Outcome(cell_id, None, f"unpickling the workload on the worker: {exc}", 0.0, 0.0,
                           socket.gethostname()), {}
        outcome = run_cell(cell_id, params, workload, Path(tmp))
        outcome.host = f"{outcome.host}/{_worker_name()}"
        files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    return outcome, files


def _worker_name() -> str:
    """The Dask worker running this cell (for the event log), or '?' outside a worker."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return "?"


class DaskEngine:
    """Submits every cell to a running dask.distributed scheduler."""

    name = "dask"

    def __init__(self, address: str, connect_timeout_s: float = 20.0) -> None:
        self.address = address
        self.connect_timeout_s = connect_timeout_s
        self.scattered = 0  # workloads shipped (each once per worker)
        self.workers: dict = {}

    def _client(self):
        try:
            from distributed import Client
        except ImportError:
            raise RuntimeError("--scheduler needs dask.distributed: pip install 'dask[distributed]' "
                               "(or the 'sweep' extra)") from None
        try:
            return Client(self.address, timeout=self.connect_timeout_s, set_as_default=True)
        except (OSError, TimeoutError) as exc:
            raise RuntimeError(f"--scheduler {self.address}: cannot connect: {exc}") from None

    def run(self, cells, workloads: WorkloadCache, store, sink) -> None:
        from distributed import as_completed

        client = self._client()
        try:
            self.workers = client.scheduler_info().get("workers", {})
            if not self.workers:
                client.wait_for_workers(1, timeout=self.connect_timeout_s)
                self.workers = client.scheduler_info().get("workers", {})
            token = uuid.uuid4().hex[:8]
            payloads: dict[str, object] = {}
            futures = {}
            for cell in cells:
                key = workload_key(cell.params)
                if key not in payloads:
                    try:
                        data = workloads.get(cell).to_bytes()
                    except Exception as exc:  # noqa: BLE001
                        sink.started(cell)
                        sink.finished(cell, Outcome(cell.id, None, f"loading the workload: {exc}", 0.0, 0.0,
                                                    socket.gethostname()))
                        continue
                    payloads[key] = client.scatter(data, broadcast=True, hash=False)
                    workloads.drop(key)  # shipped: the coordinator no longer needs it
                    self.scattered += 1
                future = client.submit(remote_cell, cell.id, cell.params, payloads[key], pure=False,
                                       key=f"dlsched-cell-{cell.id}-{token}")
                futures[future] = cell
                sink.started(cell)
            for future in as_completed(list(futures)):
                cell = futures.pop(future)
                try:
                    outcome, files = future.result()
                except Exception as exc:  # noqa: BLE001 -- e.g. the worker died
                    outcome, files = Outcome(cell.id, None, f"on the Dask cluster: {type(exc).__name__}: {exc}",
                                             0.0, 0.0, "?"), {}
                store.prepare(cell.id)
                sink.finished(cell, outcome, files)
                sink.tick()
        finally:
            client.close()

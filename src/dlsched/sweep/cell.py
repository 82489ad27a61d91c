"""One cell: its RunConfig, its input (loaded once and shared by the cells that need it), running it.

A cell's options become a :class:`~dlsched.run.config.RunConfig` through the same mapping as
``dlsched simulate``'s flags (:func:`dlsched.run.options.configs_from_options`) and run through
the same :mod:`dlsched.run.build`. Cells whose configs have the same input key share one loaded
input -- loaded once by the coordinator, forked into local processes or shipped once to each
Dask worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from dlsched.run.build import Inputs
from dlsched.run.config import OptionError, RunConfig
from dlsched.sweep.memory import PeakMemory

Workload = Inputs  # what a sweep loads once per input key and shares


class CellError(ValueError):
    """A cell option that cannot work; ``key`` names the option (the spec error points at its line)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def config_of(params: dict) -> RunConfig:
    """The cell's RunConfig; CellError when an option is wrong or would be ignored."""
    from dlsched.run.options import configs_from_options
    from dlsched.run.params import declared, readers

    try:
        [config], unread = configs_from_options(params)
    except OptionError as exc:
        raise CellError(exc.key, str(exc)) from None
    if unread:
        key = unread[0]
        raise CellError(key, f"policy {config.policy.name} does not read {key} (read by "
                             f"{', '.join(readers(key)) or 'no policy'}; {declared([config.policy.name])}); set it "
                             "only in cells of those policies")
    return config


def workload_key(params: dict) -> str:
    """Cells with the same key load the same jobs and cluster."""
    from dlsched.run.build import inputs_key

    return inputs_key(config_of(params))


def load_workload(params: dict) -> Inputs:
    """Load the trace (or named or built-in workload) and size the cluster as ``simulate`` does."""
    from dlsched.run.build import load_inputs

    return load_inputs(config_of(params))


def check_cell(params: dict) -> None:
    """Reject what needs no input loaded to see is wrong (unknown names, missing files, options
    this run would ignore) with a CellError naming the option."""
    from dlsched.run.build import check, ignored

    config = config_of(params)
    try:
        check([config])
    except OptionError as exc:
        raise CellError(exc.key, str(exc)) from None
    for key, message in ignored(config):
        raise CellError(key, message)


def run_spec(params: dict, workload: Inputs):
    """The cell's (cluster, RunSpec), built as ``dlsched simulate`` builds them."""
    from dlsched.run.build import run_cluster
    from dlsched.run.build import run_spec as spec_of

    config = config_of(params)
    return run_cluster(config, workload), spec_of(config, workload)


@dataclass(slots=True)
class Outcome:
    """What running a cell produced: the summary (or the error), wall seconds, peak memory."""

    cell_id: str
    summary: dict | None
    error: str | None
    wall_s: float
    peak_rss_mib: float
    host: str


def run_cell(cell_id: str, params: dict, workload: Inputs, out_dir: Path) -> Outcome:
    """Simulate one cell into ``out_dir``; an exception becomes the outcome's error, never escapes."""
    import socket

    from dlsched.runner import run_one

    t0 = time.perf_counter()
    with PeakMemory() as peak:
        try:
            cluster, spec = run_spec(params, workload)
            summary, error = run_one(workload.jobs, cluster, spec, out_dir), None
        except Exception as exc:  # noqa: BLE001 -- a failing cell is recorded, the sweep goes on
            summary, error = None, f"{type(exc).__name__}: {exc}"
    return Outcome(cell_id, summary, error, time.perf_counter() - t0, peak.mib, socket.gethostname())

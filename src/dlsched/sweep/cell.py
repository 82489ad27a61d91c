"""One cell: its workload (what is loaded once and shared), its RunSpec, and running it.

A cell's options split in two. The *workload* options (trace, window, cluster size, built-in
workload size and seed, resource prediction) decide the jobs and the cluster; cells that share
them share one loaded workload -- loaded once by the coordinator, forked into local processes or
shipped once to each Dask worker. The other options become the cell's :class:`RunSpec`, built the
way ``dlsched simulate`` builds it.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

from dlsched.sweep.memory import PeakMemory
from dlsched.sweep.options import simulate_options

WORKLOAD_KEYS = ("trace", "trace_format", "vc_config", "nodes", "gpus_per_node", "start", "end", "vcs",
                 "skip_invalid", "jobs", "seed", "topology", "predict_resources", "gpu")


def resolved(params: dict) -> dict:
    """Every simulate option of the cell (callback parameter name -> value), defaults filled in."""
    options = simulate_options()
    values = {o.param: o.default for o in options.values()}
    values.update({options[k].param: v for k, v in params.items()})
    return values


def workload_key(params: dict) -> str:
    """Cells with the same key load the same jobs and cluster."""
    options = simulate_options()
    values = resolved(params)
    chosen = {k: values[options[k].param] for k in WORKLOAD_KEYS if k in options}
    if not chosen.get("predict_resources"):
        chosen.pop("gpu", None)  # the GPU type only changes the loaded jobs through predictions
    return hashlib.sha1(json.dumps(chosen, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass(slots=True)
class Workload:
    """Loaded jobs and cluster plus what the RunSpec needs from the trace."""

    jobs: list
    cluster: object
    origin: object
    name: str
    skipped: dict

    def to_bytes(self) -> bytes:
        """The form shipped to Dask workers; unpickling gives each cell fresh job objects."""
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


def load_workload(params: dict) -> Workload:
    """Load the trace (or built-in workload) and size the cluster as ``simulate`` does."""
    from dlsched.cli.common import load_jobs_and_cluster, predict_resources

    v = resolved(params)
    tr, jobs, cluster, name = load_jobs_and_cluster(
        v["trace"], v["trace_format"], v["vc_config"], v["nodes"], v["gpus_per_node"], v["start"], v["end"],
        v["vcs"], v["skip_invalid"], v["jobs"], v["seed"], quiet=True, topology=v["topology"])
    if v["predict"]:
        predict_resources(jobs, v["gpu"])
    return Workload(jobs, cluster, tr.origin, name, dict(tr.report.skipped))


class CellError(ValueError):
    """A cell option that cannot work; ``key`` names the option (the spec error points at its line)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def check_cell(params: dict) -> None:
    """Reject what needs no trace to see is wrong (unknown names, missing files) with a CellError."""
    from dlsched.cli.sim_cmd import _check_priority_file, _config
    from dlsched.registry import ENERGY_CONTROLLERS, FAILURE_MODELS, SPEED_MODELS, make_placer, make_policy

    v = resolved(params)
    for key in ("trace", "vc_config", "priority_file"):
        if v[key] is not None and not Path(v[key]).is_file():
            raise CellError(key, f"file not found: {v[key]}")
    checks = [
        ("placement", lambda: make_placer(v["placement"])),
        ("policy", lambda: make_policy(v["policy"], v["placement"])),
        ("priority_file", lambda: _check_priority_file(v["priority_file"], [v["policy"]])),
        ("max_jobs_per_gpu", lambda: _config(v["compat"], v["check_invariants"], v["preemption_overhead"],
                                             v["max_jobs_per_gpu"])),
    ]
    for key, table in (("speed_model", SPEED_MODELS), ("failure_model", FAILURE_MODELS),
                       ("energy", ENERGY_CONTROLLERS)):
        if v[key] is not None and v[key] not in table:
            raise CellError(key, f"unknown {v[key]!r}; choose from {', '.join(table)}")
    for key, check in checks:
        try:
            check()
        except (ValueError, KeyError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            raise CellError("compat" if "compat" in str(message) else key, str(message)) from None


def run_spec(params: dict, workload: Workload):
    """The cell's (cluster, RunSpec), built as ``dlsched simulate`` builds them."""
    from dlsched.cli.sim_cmd import _config, _energy_options, policy_options
    from dlsched.runner import RunSpec

    v = resolved(params)
    cluster = workload.cluster
    if v["max_jobs_per_gpu"] > 1 or v["failure_model"] != "none":  # memory matters: the GPUs are --gpu
        from dlsched.core.cluster import gpu_type

        cluster = cluster.with_gpu_type(gpu_type(v["gpu"]))
    spec = RunSpec(v["policy"], v["placement"], v["backfill"],
                   _config(v["compat"], v["check_invariants"], v["preemption_overhead"], v["max_jobs_per_gpu"]),
                   policy_options=policy_options(v["policy"], v["priority_file"], v["lam"], v["refit_every"],
                                                 v["compat"], workload.origin),
                   meta={"trace": workload.name, "skipped": workload.skipped},
                   energy=v["energy"], energy_options=_energy_options(v["boot_delay"], v["idle_timeout"], v["buffer"]),
                   origin=workload.origin, speed_model=v["speed_model"], failure_model=v["failure_model"])
    return cluster, spec


@dataclass(slots=True)
class Outcome:
    """What running a cell produced: the summary (or the error), wall seconds, peak memory."""

    cell_id: str
    summary: dict | None
    error: str | None
    wall_s: float
    peak_rss_mib: float
    host: str


def run_cell(cell_id: str, params: dict, workload: Workload, out_dir: Path) -> Outcome:
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

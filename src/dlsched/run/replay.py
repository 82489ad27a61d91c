"""``dlsched replay``: a live service's event log re-simulated as an ordinary run.

The log (``dlsched serve --record``) is the run's input -- :class:`~dlsched.run.config.WorkloadConfig`
``replay_log`` -- and its ``config`` line gives the defaults of the rest: the recorded policy,
placement, backfill and GPU sharing. :func:`replay_config` is the one place those become a
:class:`~dlsched.run.config.RunConfig`; :func:`replay` builds it with :func:`~dlsched.run.build.build_run`
like every other face, so a replay and ``simulate`` of the same config cannot differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from dlsched.run.config import ModelsConfig, PlacementConfig, RunConfig, WorkloadConfig


def log_inputs(path: Path):
    """The log's jobs and cluster as run inputs, and what it recorded (``config`` and starts).
    The jobs left out (withdrawn, pending, still running) are counted in ``skipped``."""
    from dlsched.run.build import Inputs
    from dlsched.service.replay import load_log

    rec = load_log(path)
    gpu = str(rec.config.get("default_gpu") or "V100")
    return Inputs(rec.jobs, rec.cluster, None, str(path), gpu, dict(rec.left_out)), rec


def replay_config(log: Path, recorded: dict, policy: str | None = None, placement: str | None = None,
                  backfill: bool | None = None, params: dict[str, object] | None = None) -> RunConfig:
    """The run a replay simulates: the recorded policy, placement, backfill and jobs per GPU
    unless overridden (another ``policy`` starts from its own placement); no speed model, as the
    log's run times are already the observed ones. ``params``: the policy's parameters."""
    from dlsched.run.params import policy as policy_config
    from dlsched.service.log import recorded_params

    same = policy is None
    name = policy or str(recorded.get("policy") or "fifo")
    if placement is None and same:
        placement = str(recorded.get("placement") or "") or None
    if same:   # the recorded policy runs with the recorded parameters; ``params`` overrides them
        params = {**recorded_params(recorded), **(params or {})}
    chosen = policy_config(name, bool(recorded.get("backfill")) if backfill is None else backfill, **(params or {}))
    return RunConfig(workload=WorkloadConfig(replay_log=Path(log)), policy=chosen,
                     placement=PlacementConfig(placement, int(recorded.get("max_jobs_per_gpu") or 1)),
                     models=ModelsConfig(speed="none"))


def replay(path: str | Path, out_dir: str | Path, policy: str | None = None, placement: str | None = None,
           backfill: bool | None = None, params: dict[str, object] | None = None) -> dict:
    """Run the log's arrivals through the simulator; returns the run's summary (plus replay
    facts). Writes the run directory plus ``decisions.jsonl`` (the simulator's starts) and
    ``recorded_decisions.jsonl`` (the service's), in the same shape."""
    from dlsched.run.build import build_run
    from dlsched.service.replay import StartLog

    inputs, rec = log_inputs(Path(path))
    run = build_run(replay_config(Path(path), rec.config, policy, placement, backfill, params), inputs=inputs)
    run.spec.meta.update({"replay_of": str(path), "recorded_policy": rec.config.get("policy"),
                          "left_out": rec.left_out})
    log = StartLog()
    summary = run.simulate(out_dir, observers=(log,))
    out = Path(out_dir)
    with open(out / "decisions.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s) + "\n" for s in log.ordered())
    with open(out / "recorded_decisions.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(s) + "\n" for s in rec.starts)
    return summary

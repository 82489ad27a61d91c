"""The job record: trace facts, predictions handed to policies, and runtime state.

Policies must not read the true duration unless they declare themselves oracles; the
scheduling view enforces that (see ``dlsched.sim.view``). The engine uses ``duration``.
"""

from __future__ import annotations

from enum import IntEnum


class JobState(IntEnum):
    """Life cycle of a job inside one simulation or the live service."""

    CREATED = 0
    PENDING = 1
    RUNNING = 2
    FINISHED = 3


class Job:
    """One job. ``__slots__`` keeps a million of them small and attribute access fast.

    Trace facts: ``job_id`` (as in the input), ``user``, ``name``, ``vc``, ``gpus`` (may
    span nodes), ``cpus``, ``submit_time`` (seconds from the trace origin), ``duration``
    (true run time in seconds; hidden from non-oracle policies), ``status`` (final status in
    the trace). Optional model/profile fields feed the predictors: ``model_name``,
    ``batch_size``, ``onnx_ref``, ``gpu_util`` (measured, 0-100), ``gpu_mem_mib`` (measured).

    Predictions (filled by predictors, read by policies): ``pred_duration``,
    ``pred_gpu_util``, ``pred_gpu_mem_mib``, ``priority`` (external or computed ordering key).
    """

    __slots__ = (
        "index", "job_id", "user", "name", "vc", "gpus", "cpus", "submit_time", "duration",
        "status", "model_name", "batch_size", "onnx_ref", "gpu_util", "gpu_mem_mib",
        "pred_duration", "pred_gpu_util", "pred_gpu_mem_mib", "priority",
        # runtime state (owned by the engine)
        "state", "start_time", "end_time", "remaining", "run_since", "preemptions",
        "queue_delay", "wait_since", "placement", "speed", "epoch", "enq_seq", "run_seq", "vc_state",
    )

    def __init__(
        self,
        job_id: str,
        vc: str,
        gpus: int,
        submit_time: float,
        duration: float,
        *,
        user: str = "",
        name: str = "",
        cpus: int = 0,
        status: str = "",
        model_name: str = "",
        batch_size: int = 0,
        onnx_ref: str = "",
        gpu_util: float = float("nan"),
        gpu_mem_mib: float = float("nan"),
        index: int = -1,
    ) -> None:
        self.index = index
        self.job_id = job_id
        self.user = user
        self.name = name
        self.vc = vc
        self.gpus = gpus
        self.cpus = cpus
        self.submit_time = submit_time
        self.duration = duration
        self.status = status
        self.model_name = model_name
        self.batch_size = batch_size
        self.onnx_ref = onnx_ref
        self.gpu_util = gpu_util
        self.gpu_mem_mib = gpu_mem_mib
        self.pred_duration = float("nan")
        self.pred_gpu_util = float("nan")
        self.pred_gpu_mem_mib = float("nan")
        self.priority = float("nan")
        self.reset()

    def reset(self) -> None:
        """Clear runtime state so the same job list can be simulated again."""
        self.state = JobState.CREATED
        self.start_time = -1.0
        self.end_time = -1.0
        self.remaining = float(self.duration)
        self.run_since = -1.0
        self.preemptions = 0
        self.queue_delay = 0.0
        self.wait_since = -1.0
        self.placement = None
        self.speed = 1.0
        self.epoch = 0      # bumped whenever a scheduled finish event becomes stale
        self.enq_seq = 0    # order of (re-)entry into the pending queue
        self.run_seq = 0    # order of the last start
        self.vc_state = None  # the engine's VcState of this job's VC while it is simulated

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (f"Job({self.job_id!r}, vc={self.vc!r}, gpus={self.gpus}, submit={self.submit_time}, "
                f"state={self.state.name})")

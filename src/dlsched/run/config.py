"""A run as a value: every choice that decides what one simulation does, typed and frozen.

``simulate``, ``compare``, ``sweep`` and ``reproduce`` all describe their runs with a
:class:`RunConfig` and hand it to :func:`dlsched.run.build.build_run`; none of them assembles a
run itself. The sections follow the parts of a run: the input (:class:`WorkloadConfig`), the
machines (:class:`ClusterConfig`), the decision makers (:class:`PolicyConfig`,
:class:`PlacementConfig`), the simulated truth (:class:`ModelsConfig`), power
(:class:`EnergyConfig`), the engine (:class:`EngineConfig`) and prediction correction
(:class:`ObserveConfig`). Each section checks its own values when built; a bad value raises
:class:`OptionError` naming the command-line option a user types for it (``--boot-delay``), never
an internal parameter.

A live service is described the same way: :class:`ServiceConfig` (``dlsched serve``) holds the
same :class:`PolicyConfig` and :class:`PlacementConfig`, beside its own predictions
(:class:`PredictionConfig`) and clocks (:class:`ServiceTimings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

#: a GPU holding more jobs than this is not a sharing scenario any model here describes
MAX_JOBS_PER_GPU = 64
#: the largest preemption overhead accepted (one simulated day of redone work)
MAX_PREEMPTION_OVERHEAD_S = 86_400.0


class OptionError(ValueError):
    """A value that cannot work; ``key`` is the option's name in a sweep spec (``boot_delay``),
    the message names the flag (``--boot-delay``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def flag(key: str) -> str:
    """The command-line spelling of option ``key``."""
    return "--" + key.replace("_", "-")


def _at_least(key: str, value: float | None, low: float, unit: str = "") -> None:
    if value is not None and not (value >= low and not math.isinf(value)):
        raise OptionError(key, f"{flag(key)} must be a finite number >= {low:g}{unit}, got {value}")


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """The jobs: a trace file, a named GPU-sharing workload, a live service's event log
    (``dlsched replay``), or the built-in generator."""

    trace: Path | None = None
    trace_format: str = "auto"
    workload: str | None = None        # a GPU-sharing workload by name (docs/sharing.md)
    jobs: int = 20000                  # built-in workload size
    seed: int = 0                      # built-in / named workload seed
    start: str | None = None           # window start (seconds or wall clock)
    end: str | None = None
    vcs: str | None = None             # comma-separated VCs to keep
    skip_invalid: bool = False
    predict_resources: bool = False
    predictor: Path | None = None      # a trained resource predictor (implies predict_resources)
    gpu: str | None = None             # GPU type (None: V100, or the workload's testbed GPU)
    replay_log: Path | None = None     # a live service's event log (dlsched serve --record): its jobs and nodes
    time_limits: str | None = None     # draw user-style time limits: overestimate=F|LO:HI,round=S,share=P
    # -- no flag: set by experiment harnesses (the GPU-sharing reproductions, docs/architecture.md) --
    workload_jobs: int | None = None   # keep the first N jobs of the named workload (philly-profiled)
    perfect_predictions: bool = False  # the named workload's predictions are its measured truth

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise OptionError("jobs", f"--jobs must be >= 1, got {self.jobs}")
        if self.seed < 0:
            raise OptionError("seed", f"--seed must be >= 0, got {self.seed}")
        if self.replay_log is not None and (self.trace is not None or self.workload is not None):
            raise OptionError("replay_log", "a replayed event log is the run's input: give no --trace or --workload")
        if self.workload is None and (self.workload_jobs is not None or self.perfect_predictions):
            raise OptionError("workload", "workload_jobs and perfect_predictions are for a named --workload")
        if self.workload_jobs is not None and self.workload_jobs < 1:
            raise OptionError("workload_jobs", f"workload_jobs must be >= 1, got {self.workload_jobs}")
        if self.perfect_predictions and self.predicts:
            raise OptionError("predict_resources", "perfect predictions replace --predict-resources: give one")
        if self.time_limits is not None:
            from dlsched.traces.time_limits import parse_time_limits

            try:
                parse_time_limits(self.time_limits)
            except ValueError as exc:
                raise OptionError("time_limits", str(exc)) from None
        if self.workload is not None:
            if self.trace is not None:
                raise OptionError("workload", "give --trace or --workload, not both")
            if self.predictor is not None:
                raise OptionError("predictor", "--predictor is not used with --workload (its jobs get the shipped "
                                               "predictor's predictions with --predict-resources)")

    @property
    def predicts(self) -> bool:
        """Whether jobs get resource predictions (``--predictor`` implies it)."""
        return self.predict_resources or self.predictor is not None


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The machines: a cluster file, a VC table, or one pool; GPUs per node; node topology.

    ``pool`` (no flag; the sharing reproductions) is one pool of that many nodes built from a named
    workload's own machines -- its GPUs per node and GPU type, as Horus's simulated cluster -- where
    jobs wider than the pool are left out and counted (``Inputs.filtered``), not an error. ``nodes``
    instead sizes a pool of ``gpus_per_node``-GPU nodes and keeps every job."""

    vc_config: Path | None = None
    cluster_file: Path | None = None
    nodes: int | None = None
    gpus_per_node: int = 8
    topology: str | None = None
    pool: int | None = None

    def __post_init__(self) -> None:
        from dlsched.traces.cluster_file import MAX_GPUS_PER_NODE, MAX_NODES

        if self.nodes is not None and self.nodes < 1:
            raise OptionError("nodes", f"--nodes must be >= 1, got {self.nodes}")
        if self.nodes is not None and self.nodes > MAX_NODES:   # before a cluster of them is built
            raise OptionError("nodes", f"--nodes must be at most {MAX_NODES:,} (the limit, as for a cluster "
                                       f"file), got {self.nodes:,}")
        if self.pool is not None:
            if not 1 <= self.pool <= MAX_NODES:
                raise OptionError("pool", f"pool must be 1 to {MAX_NODES:,} nodes, got {self.pool:,}")
            if self.nodes is not None or self.vc_config is not None or self.cluster_file is not None:
                raise OptionError("pool", "a pool of the workload's nodes replaces --nodes, --vc-config and --cluster")
        if not 1 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise OptionError("gpus_per_node", f"--gpus-per-node must be 1 to {MAX_GPUS_PER_NODE:,}, "
                                               f"got {self.gpus_per_node:,}")


@dataclass(frozen=True, slots=True)
class NoParams:
    """The parameters of a policy that declares none."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The queue policy by registry name, with the parameter dataclass it declares (``Params``).

    ``objects`` (no flag, no sweep key) are constructor keywords a harness passes as they are,
    over what the parameters map to: objects that are no option value, such as an interference
    model already fitted on a truth's pairs (``model=``, the sharing reproductions). A name there
    the constructor does not take fails when the run is assembled."""

    name: str = "fifo"
    params: object = field(default_factory=NoParams)
    backfill: bool = False
    objects: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True, slots=True)
class PlacementConfig:
    """Placement by registry name or weighted mix (None: the policy's own), and GPU sharing."""

    name: str | None = None
    max_jobs_per_gpu: int = 1

    def __post_init__(self) -> None:
        if self.max_jobs_per_gpu < 1:
            raise OptionError("max_jobs_per_gpu", f"--max-jobs-per-gpu must be >= 1, got {self.max_jobs_per_gpu}")
        if self.max_jobs_per_gpu > MAX_JOBS_PER_GPU:
            raise OptionError("max_jobs_per_gpu", f"--max-jobs-per-gpu must be at most {MAX_JOBS_PER_GPU} (jobs one "
                                                  f"GPU may hold), got {self.max_jobs_per_gpu:,}")


@dataclass(frozen=True, slots=True)
class ModelsConfig:
    """The simulated truth: speed and failure models and the profile table they (and sharing
    workloads, and Co-scheML's interference model) read. ``profiles`` None is the default source
    (the built-in Gavel-derived table; Co-scheML's own default); a truth resolver by name or path
    plugs in here."""

    speed: str | None = None           # None: the placement's / cluster's default
    failure: str = "none"
    profiles: str | None = None        # a truth: builtin | builtin-raw | lucid | a profiles folder | a .json table

    def __post_init__(self) -> None:
        if self.profiles is not None and self.profiles not in ("builtin", "builtin-raw", "lucid"):
            from pathlib import Path

            p = Path(self.profiles)
            if not (p.is_dir() or (p.suffix == ".json" and p.is_file())):
                raise OptionError("profiles", f"--profiles {self.profiles!r}: not a truth name (builtin, builtin-raw, "
                                              "lucid), a profiles folder or an existing .json table")


@dataclass(frozen=True, slots=True)
class EnergyConfig:
    """Energy saving: None, ``ces`` or ``vanilla``, with the controllers' knobs (seconds, nodes)."""

    mode: str | None = None
    boot_delay: float = 300.0
    idle_timeout: float = 1800.0
    buffer: int | None = None

    def __post_init__(self) -> None:
        _at_least("boot_delay", self.boot_delay, 0, " seconds")
        _at_least("idle_timeout", self.idle_timeout, 0, " seconds")
        if self.buffer is not None and self.buffer < 0:
            raise OptionError("buffer", f"--buffer must be >= 0 nodes, got {self.buffer}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Engine knobs: reference-compatibility mode, invariant checks, preemption overhead."""

    compat: str = "none"
    check_invariants: bool = False
    preemption_overhead: float | None = None   # None: Helios's 7/30/60 s by GPUs

    def __post_init__(self) -> None:
        from dlsched.sim.config import COMPAT_MODES

        if self.compat not in COMPAT_MODES:
            raise OptionError("compat", f"unknown compat mode {self.compat!r}; choose from {', '.join(COMPAT_MODES)}")
        _at_least("preemption_overhead", self.preemption_overhead, 0, " seconds")
        if self.preemption_overhead is not None and self.preemption_overhead > MAX_PREEMPTION_OVERHEAD_S:
            raise OptionError("preemption_overhead", f"--preemption-overhead must be at most "
                                                     f"{MAX_PREEMPTION_OVERHEAD_S:,.0f} seconds, "
                                                     f"got {self.preemption_overhead:g}")


@dataclass(frozen=True, slots=True)
class ObserveConfig:
    """After a job has run ``after`` seconds, its observed utilisation and memory replace its
    predictions (None: never)."""

    after: float | None = None

    def __post_init__(self) -> None:
        if self.after is not None and not (self.after >= 0 and not math.isinf(self.after)):
            raise OptionError("observe_after", f"--observe-after must be >= 0 seconds, got {self.after}")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One simulation, described completely."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)

    def __post_init__(self) -> None:
        if self.workload.workload is not None and self.cluster.cluster_file is not None:
            raise OptionError("cluster_file", "--cluster is for --trace or the built-in workload, not --workload")
        if self.cluster.pool is not None and self.workload.workload is None:
            raise OptionError("pool", "a pool of the workload's nodes needs a named --workload")


# -- the live service -------------------------------------------------------------------------
#: the longest interval, timeout or TTL a service option accepts (a week; a thread cannot wait longer
#: than the platform's clock allows, and nothing here means to wait that long)
MAX_SERVICE_SECONDS = 7 * 86_400.0


def check_seconds(key: str, value: float, low: float, high: float = MAX_SERVICE_SECONDS,
                  above: bool = False) -> None:
    """``value`` is a finite number of seconds in [low, high] (``(low, high]`` with ``above``), else
    OptionError naming the flag: ``nan`` passes every comparison a range check makes, ``inf``
    passes a lower bound, and either would reach a timer thread or a clock as it is."""
    fits = math.isfinite(value) and (value > low if above else value >= low) and value <= high
    if not fits:
        bound = f"> {low:g}" if above else f">= {low:g}"
        raise OptionError(key, f"{flag(key)} must be a finite number of seconds {bound} and at most {high:,.0f}, "
                               f"got {value}")


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    """How a live pod gets its predictions: from its model annotation (``--predict-resources``),
    for the nodes' default GPU type, and when agent readings replace them (``--observe-after``)."""

    predict_resources: bool = False
    gpu: str = "V100"
    model_dir: Path | None = None
    observe_after: float = 60.0

    def __post_init__(self) -> None:
        check_seconds("observe_after", self.observe_after, 0)


@dataclass(frozen=True, slots=True)
class ServiceTimings:
    """The service's clocks: ETA refreshes, the TTL of a pod seen only in filter calls, a gang's
    permit and arrival timeouts, and an eviction's grace period (None: the policy's ``grace_s``)."""

    unseen_pod_ttl: float = 30.0
    eta_interval: float = 5.0
    eta_threshold: float = 60.0
    gang_permit_timeout: float = 8.0
    gang_arrival_timeout: float = 120.0
    grace_seconds: int | None = None

    def __post_init__(self) -> None:
        check_seconds("unseen_pod_ttl", self.unseen_pod_ttl, 0.5)
        check_seconds("eta_interval", self.eta_interval, 0)
        check_seconds("eta_threshold", self.eta_threshold, 0)
        check_seconds("gang_permit_timeout", self.gang_permit_timeout, 0.1, 3600.0)
        check_seconds("gang_arrival_timeout", self.gang_arrival_timeout, 0.1)
        if self.grace_seconds is not None and not 0 <= self.grace_seconds <= 86_400:
            raise OptionError("grace_seconds", f"--grace-seconds must be 0 to 86400, got {self.grace_seconds}")


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """One live service (``dlsched serve``), described like a run: its policy part is the same
    :class:`PolicyConfig` and :class:`PlacementConfig` a simulation has (the policy with its
    ``Params``, the placement, GPU sharing), so a policy tuned in the simulator is deployed with
    the same values. How to reach the cluster (kubeconfig, tokens) is not part of it: that is no
    choice about scheduling, and secrets have no place in a description that is shown."""

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    predictions: PredictionConfig = field(default_factory=PredictionConfig)
    timings: ServiceTimings = field(default_factory=ServiceTimings)
    scheduler_name: str = "default-scheduler"
    vc_map: str = ""
    default_vc: str = "default"
    queues_configmap: str = "dlsched/dlsched-queues"
    nudge: bool = True
    record: Path | None = None
    mode: str = "extender"   # or "scheduler": dlsched binds the pods named for it itself (docs/service.md)

    def describe(self) -> dict:
        """The configuration as plain JSON values (what start-up prints, ``GET /api/v1/state``
        returns and the event log's config line keeps): every policy parameter with its value,
        defaults included; a non-finite number as its text (strict JSON has none)."""
        import dataclasses

        def plain(value: object) -> object:
            if isinstance(value, Path):
                return str(value)
            if isinstance(value, float) and not math.isfinite(value):
                return str(value)
            return value

        params = self.policy.params
        p, t = self.predictions, self.timings
        return {
            "policy": self.policy.name,
            "params": {f.name: plain(getattr(params, f.name)) for f in dataclasses.fields(params)},
            "backfill": self.policy.backfill,
            "placement": self.placement.name,
            "max_jobs_per_gpu": self.placement.max_jobs_per_gpu,
            "predict_resources": p.predict_resources, "gpu": p.gpu,
            "model_dir": plain(p.model_dir), "observe_after": p.observe_after,
            "unseen_pod_ttl": t.unseen_pod_ttl, "eta_interval": t.eta_interval, "eta_threshold": t.eta_threshold,
            "gang_permit_timeout": t.gang_permit_timeout, "gang_arrival_timeout": t.gang_arrival_timeout,
            "grace_seconds": t.grace_seconds,
            "scheduler_name": self.scheduler_name, "vc_map": self.vc_map, "default_vc": self.default_vc,
            "queues_configmap": self.queues_configmap, "nudge": self.nudge, "record": plain(self.record),
            "mode": self.mode,
        }

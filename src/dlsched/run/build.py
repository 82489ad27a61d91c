"""``build_run(config)``: a :class:`RunConfig` -> the loaded jobs, the cluster and the engine's RunSpec.

Every command that simulates builds its runs here: ``simulate`` and ``compare`` (through the
option mapping in :mod:`dlsched.run.options`), ``sweep`` cells, and the reproductions. Loading
(:func:`load_inputs`) is apart from describing (:func:`run_spec`) so that runs that share an input
(a ``compare``, a sweep's cells) load it once.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.truth import duration as true_duration
from dlsched.run.config import OptionError, RunConfig, flag
from dlsched.run.inputs import Say, quiet
from dlsched.run.params import PolicyContext, constructor_options, field_kinds

Explain = Callable[[BaseException], "str | None"]


@dataclass(slots=True)
class Inputs:
    """A run's loaded input: the jobs, the cluster, and what the summary says about them."""

    jobs: list
    cluster: object
    origin: object
    name: str                      # what was loaded, for the summary's "trace"
    gpu: str                       # the GPU type of the run (--gpu, V100, or the workload's)
    skipped: dict = field(default_factory=dict)
    filtered: dict = field(default_factory=dict)
    zero_duration: int = 0         # jobs whose duration is 0 (they finish as they start)

    def to_bytes(self) -> bytes:
        """The form shipped to Dask workers; unpickling gives each cell fresh job objects."""
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(slots=True)
class Run:
    """A built run: simulate it with :meth:`simulate` (writes the run directory)."""

    config: RunConfig
    inputs: Inputs
    cluster: object
    spec: object                   # dlsched.runner.RunSpec
    notes: list[str] = field(default_factory=list)

    def simulate(self, out_dir: str | Path, progress: Callable[[int, int], None] | None = None,
                 observers: tuple = ()) -> dict:
        """Simulate and write the run directory (as ``dlsched simulate``); returns the summary.
        ``observers``: the caller's own kernel observers, each with ``summary(metrics)``."""
        from dlsched.runner import run_one

        return run_one(self.inputs.jobs, self.cluster, self.spec, out_dir, progress=progress, observers=observers)

    def policy(self):
        """A policy object of this run, for a harness whose observers need it before the
        simulator exists; hand it to :meth:`engine`."""
        from dlsched.runner import make_run_policy

        return make_run_policy(self.spec)

    def engine(self, observers: tuple = (), policy=None):
        """The assembled simulator (:class:`dlsched.runner.Engine`), for a harness that reads the
        result in memory instead of a run directory; ``engine(...).simulator.run(run.inputs.jobs)``.
        ``policy``: one made by :meth:`policy` (None: a new one)."""
        from dlsched.runner import assemble

        return assemble(self.inputs.jobs, self.cluster, self.spec, observers, policy)


def _names(table, key: str, value: str | None) -> None:
    if value is not None and value not in table:
        raise OptionError(key, f"unknown --{key.replace('_', '-')} {value!r}; choose from {', '.join(table)}")


def _check_queues(configs: list[RunConfig]) -> None:
    """The cluster file's queues parse (errors name file, line and key), and queues that borrow
    run with a non-preemptive policy on exclusive GPUs."""
    from dlsched.kernel.quotas import borrowing_possible
    from dlsched.registry import POLICIES
    from dlsched.traces.cluster_queues import read_half_life, read_queues

    path = configs[0].cluster.cluster_file
    read_half_life(path)
    if not borrowing_possible(read_queues(path)):
        return
    for config in configs:
        name = config.policy.name
        if name in POLICIES and getattr(POLICIES[name], "preemptive", False):
            raise OptionError("policy", f"--policy {name} preempts on its own; the queues of --cluster {path} "
                                        "borrow, which needs a non-preemptive ordering policy")
        if name in POLICIES and getattr(POLICIES[name], "reserves", False):
            raise OptionError("policy", f"--policy {name} holds reservations on its VC's own GPUs; the queues of "
                                        f"--cluster {path} borrow and reclaim GPUs across VCs, which its "
                                        "reservations do not see: use queues that do not borrow")
    if configs[0].placement.max_jobs_per_gpu > 1:
        raise OptionError("max_jobs_per_gpu", f"the queues of --cluster {path} borrow, which needs exclusive GPUs "
                                              "(--max-jobs-per-gpu 1)")


def check(configs: list[RunConfig]) -> None:
    """What needs no input loaded to see is wrong: unknown names, missing files, options that
    exclude each other. Raises :class:`OptionError` naming the option."""
    from dlsched.registry import ENERGY_CONTROLLERS, FAILURE_MODELS, POLICIES, SPEED_MODELS, make_placer

    first = configs[0]
    _names(SPEED_MODELS, "speed_model", first.models.speed)
    _names(FAILURE_MODELS, "failure_model", first.models.failure)
    _names(ENERGY_CONTROLLERS, "energy", first.energy.mode)
    if first.workload.workload is not None:
        from dlsched.run.workload import workload_names

        _names(workload_names(), "workload", first.workload.workload)
    for key, path in (("trace", first.workload.trace), ("replay_log", first.workload.replay_log),
                      ("vc_config", first.cluster.vc_config),
                      ("cluster", first.cluster.cluster_file)):
        if path is not None and not Path(path).exists():
            raise OptionError(key, f"--{key.replace('_', '-')} {path}: no such file")
    if first.cluster.cluster_file is not None:
        _check_queues(configs)
    if first.placement.name is not None:
        try:
            make_placer(first.placement.name)
        except ValueError as exc:
            raise OptionError("placement", f"--placement: {exc}") from None
    seen = set()
    for config in configs:
        name = config.policy.name
        if name not in POLICIES:
            raise OptionError("policy", f"--policy: unknown policy {name!r}; choose from {', '.join(POLICIES)}")
        if name in seen:
            raise OptionError("policy", f"policy {name} is listed twice: each policy runs once")
        seen.add(name)
        for key, (kind, _) in field_kinds(type(config.policy.params)).items():
            value = getattr(config.policy.params, key)
            if kind is Path and value is not None and not Path(value).is_file():
                raise OptionError(key, f"{flag(key)} {value}: no such file")
    profiles = first.models.profiles
    if (profiles not in (None, "builtin") and first.workload.workload is None and first.models.speed != "colocation"
            and not any(getattr(POLICIES[c.policy.name], "reads_profiles", False) for c in configs)):
        raise OptionError("profiles", "--profiles is for --workload, --speed-model colocation and the policies "
                                      "that read profiles (coscheml's interference model)")


def inputs_key(config: RunConfig) -> str:
    """Runs with the same key load the same jobs and cluster (a sweep loads each once)."""
    w, c = config.workload, config.cluster
    parts = [repr(w), repr(c)]
    if w.workload is not None:
        parts.append(repr(config.models.profiles))  # a named workload's job types come from the profiles
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]


def load_inputs(config: RunConfig, say: Say = quiet, explain: Explain | None = None) -> Inputs:
    """Load the trace, the named workload or the built-in workload, size the cluster, and
    predict resources when asked; report lines go through ``say`` (``explain``: the reason to
    report for a model that could not be resolved, e.g. a missing optional extra)."""
    w, c = config.workload, config.cluster
    if w.replay_log is not None:
        from dlsched.run.replay import log_inputs

        return log_inputs(w.replay_log)[0]
    if w.workload is not None:
        from dlsched.run.workload import load_workload

        tr, jobs, cluster, name, gpu, left_out = load_workload(
            w.workload, w.seed, config.models.profiles or "builtin", w.gpu, c.nodes, c.gpus_per_node, c.vc_config,
            c.topology, w.predicts, say, jobs=w.workload_jobs, pool=c.pool, perfect=w.perfect_predictions)
    else:
        from dlsched.run.inputs import load_jobs_and_cluster

        gpu = w.gpu or "V100"
        tr, jobs, cluster, name = load_jobs_and_cluster(
            w.trace, w.trace_format, c.vc_config, c.nodes, c.gpus_per_node, w.start, w.end, w.vcs, w.skip_invalid,
            w.jobs, w.seed, say, topology=c.topology, cluster_file=c.cluster_file)
        if w.predicts:
            from dlsched.run.resources import predict_resources

            predict_resources(jobs, gpu, w.predictor, say, *([explain] if explain is not None else []))
        left_out = {}
    if w.time_limits is not None:
        from dlsched.traces.time_limits import apply_time_limits, note, parse_time_limits

        spec = parse_time_limits(w.time_limits)
        say(note(apply_time_limits(jobs, spec, w.seed), spec), "dim")
    zero = sum(1 for j in jobs if true_duration(j) == 0)
    return Inputs(jobs, cluster, tr.origin, name, gpu, dict(tr.report.skipped), {**tr.report.filtered, **left_out},
                  zero)


def _sim_config(config: RunConfig):
    from dlsched.sim.config import SimConfig, helios_checkpoint_overhead

    overhead = config.engine.preemption_overhead
    cost = helios_checkpoint_overhead if overhead is None else (lambda job, s=float(overhead): s)
    return SimConfig(compat=config.engine.compat, check_invariants=config.engine.check_invariants,
                     preemption_overhead=cost, max_jobs_per_gpu=config.placement.max_jobs_per_gpu)


def run_cluster(config: RunConfig, inputs: Inputs):
    """The cluster the run simulates: with GPU sharing or an OOM model the GPUs' memory matters,
    so they are of the run's GPU type (a cluster file or a replayed log names its own)."""
    cluster = inputs.cluster
    if config.cluster.cluster_file is None and config.workload.replay_log is None and (
            config.placement.max_jobs_per_gpu > 1
                                                or config.models.failure != "none"):
        from dlsched.core.cluster import gpu_type

        cluster = cluster.with_gpu_type(gpu_type(inputs.gpu))
    return cluster


def run_queues(config: RunConfig, cluster) -> tuple:
    """The cluster file's queues (quotas that lend and borrow) of the VCs this run simulates."""
    if config.cluster.cluster_file is None:
        return ()
    from dlsched.traces.cluster_queues import read_queues

    specs = read_queues(config.cluster.cluster_file)
    inner = {q.parent for q in specs}  # cohorts: kept for the VCs under them this run simulates
    return tuple(q for q in specs if q.name in cluster.vcs or q.name in inner)


def run_spec(config: RunConfig, inputs: Inputs):
    """The engine's :class:`~dlsched.runner.RunSpec` for ``config`` on ``inputs``."""
    from dlsched.runner import RunSpec

    cluster = run_cluster(config, inputs)
    e = config.energy
    energy_options: dict = {"boot_delay": e.boot_delay, "idle_timeout": e.idle_timeout}
    if cluster.nodes:  # a cluster file's node power (800 W unless it says otherwise)
        energy_options["idle_power_w"] = sum(n.idle_watts for n in cluster.nodes) / len(cluster.nodes)
    if e.buffer is not None:
        energy_options["buffer"] = e.buffer
    context = PolicyContext(config.engine.compat, inputs.origin, config.models.profiles)
    speed = config.models.speed
    sim_config = _sim_config(config)
    sim_config.queues = run_queues(config, cluster)
    if sim_config.queues:
        from dlsched.traces.cluster_queues import read_half_life

        sim_config.queue_half_life = read_half_life(config.cluster.cluster_file)
    return RunSpec(
        config.policy.name, config.placement.name, config.policy.backfill, sim_config,
        policy_options={**constructor_options(config.policy.name, config.policy.params, context),
                        **dict(config.policy.objects)},
        meta={"trace": inputs.name, "skipped": dict(inputs.skipped),
              "cluster": {"vcs": list(cluster.vcs), "nodes": len(cluster.nodes), "gpus": cluster.total_gpus},
              "filtered": dict(inputs.filtered)},
        energy=e.mode, energy_options=energy_options, origin=inputs.origin,
        speed_model=speed, failure_model=config.models.failure, observe_after=config.observe.after,
        speed_options={"profiles": config.models.profiles or "builtin"} if speed == "colocation" else {})


def notes(config: RunConfig, inputs: Inputs) -> list[str]:
    """What the user should know about how this run treats its input and options."""
    out = []
    if config.cluster.cluster_file is not None:
        from dlsched.traces.cluster_queues import read_queues

        specs = read_queues(config.cluster.cluster_file)
        inner = {q.parent for q in specs}
        left_out = [q.name for q in specs if q.name not in inputs.cluster.vcs and q.name not in inner]
        if left_out:
            out.append(f"queues {', '.join(left_out)} of {config.cluster.cluster_file} are of VCs this run does "
                       "not simulate: they neither lend nor borrow")
    if inputs.zero_duration:
        out.append(f"{inputs.zero_duration:,} of {len(inputs.jobs):,} jobs have a duration of 0 s: they finish "
                   "as they start (JCT = queue delay) and count in every average")
    if config.placement.max_jobs_per_gpu > 1 and config.models.speed is None:
        from dlsched.registry import default_speed_model, make_policy

        placer = make_policy(config.policy.name, config.placement.name).placer
        if default_speed_model(placer, inputs.cluster) == "none":
            out.append(f"--max-jobs-per-gpu {config.placement.max_jobs_per_gpu} without --speed-model: co-located "
                       "jobs run at full speed, as if sharing were free (give --speed-model time-sliced or "
                       "colocation for slowdowns)")
    return out


def ignored(config: RunConfig, given: set[str] | None = None) -> list[tuple[str, str]]:
    """(option key, message) for each option set in ``config`` that this run never reads. An
    option is "set" when its key is in ``given``, or (``given`` None) when it differs from its
    default. Policy parameters are checked by :func:`dlsched.run.options.configs_from_options`."""
    from dlsched.run import config as C

    def is_set(key: str, value: object, default: object) -> bool:
        return key in given if given is not None else value != default

    w, e = config.workload, config.energy
    out: list[tuple[str, str]] = []
    defaults_e, defaults_w = C.EnergyConfig(), C.WorkloadConfig()
    owner = {"idle_timeout": "vanilla", "buffer": "ces"}
    for key in ("boot_delay", "idle_timeout", "buffer"):
        if not is_set(key, getattr(e, key), getattr(defaults_e, key)):
            continue
        if e.mode is None:
            out.append((key, f"{C.flag(key)} does nothing without --energy ces|vanilla"))
        elif key in owner and owner[key] != e.mode:
            out.append((key, f"{C.flag(key)} is read only by --energy {owner[key]}, not {e.mode}"))
    if w.trace is not None:
        for key in ("jobs", "seed"):
            if is_set(key, getattr(w, key), getattr(defaults_w, key)):
                out.append((key, f"{C.flag(key)} sizes and seeds the built-in workload; with --trace it does nothing"))
    elif w.workload is not None and is_set("jobs", w.jobs, defaults_w.jobs):
        out.append(("jobs", "--jobs sizes the built-in workload; --workload brings its own jobs"))
    reads_gpu = (w.predicts or w.workload is not None
                 or (config.cluster.cluster_file is None
                     and (config.placement.max_jobs_per_gpu > 1 or config.models.failure != "none")))
    if w.gpu is not None and is_set("gpu", w.gpu, None) and not reads_gpu:
        out.append(("gpu", ("--gpu is read only with --predict-resources, --workload, or GPU memory that matters "
                            "(--max-jobs-per-gpu > 1, --failure-model oom, without --cluster); this run ignores it")))
    return out


def build_comparison(configs: list[RunConfig], say: Say = quiet, inputs: Inputs | None = None,
                     explain: Explain | None = None):
    """Runs of several policies on one input (``compare``): (inputs, cluster, base RunSpec whose
    ``policy_options`` maps each policy to its constructor options), for
    :func:`dlsched.runner.compare_policies`."""
    check(configs)
    if inputs is None:
        inputs = load_inputs(configs[0], say, explain)
    specs = [run_spec(c, inputs) for c in configs]
    base = specs[0]
    base.policy = ""
    base.policy_options = {c.policy.name: s.policy_options for c, s in zip(configs, specs)}
    return inputs, run_cluster(configs[0], inputs), base


def build_run(config: RunConfig, say: Say = quiet, inputs: Inputs | None = None,
              explain: Explain | None = None) -> Run:
    """Check ``config``, load its input (unless given ``inputs`` loaded for the same key) and
    describe the run."""
    check([config])
    if inputs is None:
        inputs = load_inputs(config, say, explain)
    return Run(config, inputs, run_cluster(config, inputs), run_spec(config, inputs), notes(config, inputs))

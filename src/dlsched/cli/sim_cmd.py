"""``dlsched simulate``, ``compare`` and ``demo``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from dlsched.cli.common import (
    clear_errors,
    console,
    load_jobs_and_cluster,
    out,
    predict_resources,
    progress_bar,
)
from dlsched.cli.notes import given
from dlsched.cli.timing import Phases

TRACE_FORMATS = "auto|helios|helios-log|philly-pollux|pai|dlsched"

# Options shared by `simulate` and `compare` (defined once, used by both).
TRACE = typer.Option(None, help="Trace file; the built-in workload when omitted.")
FORMAT = typer.Option("auto", help=TRACE_FORMATS)
VC_CONFIG = typer.Option(None, help="VC sizes (vc,node num): a shortcut for --cluster.")
CLUSTER = typer.Option(None, "--cluster", help="The whole cluster in one TOML/YAML file (node groups per VC, GPU "
                                               "type, CPUs, memory, topology, power); see `dlsched cluster show`.")
NODES = typer.Option(None, help="One shared pool of N nodes instead of VCs.")
GPUS_PER_NODE = typer.Option(8, help="GPUs per node.")
START = typer.Option(None, help="Window start (wall clock or seconds).")
END = typer.Option(None, help="Window end, inclusive.")
VCS = typer.Option(None, help="Only these VCs (comma separated).")
PLACEMENT = typer.Option(None, help="consolidate|first-fit|best-fit|spread|topo-aware|topo-aware-p|horus-cost|obp|... "
                         "(see `dlsched policies`); default: the policy's own (e.g. horus-cost for horus), else consolidate.")
TOPOLOGY = typer.Option(None, help="Node topology preset: pcie|dgx1|nvswitch|minsky.")
BACKFILL = typer.Option(False, help="Let later jobs start when the head does not fit.")
COMPAT = typer.Option("none", help="none|helios: reproduce the Helios simulator's quirks.")
PRIORITY_FILE = typer.Option(None, help="QSSF: external priorities (job id/jobname,priority).")
LAM = typer.Option(0.1, help="QSSF: weight of the rolling estimate P_R (1-lam on the GBDT).")
REFIT_EVERY = typer.Option(86400.0, help="QSSF: refit the GBDT every this many simulated s.")
ENERGY = typer.Option(None, help="Energy saving: ces (Helios CES) or vanilla (idle timeout).")
BOOT_DELAY = typer.Option(300.0, help="Energy: seconds a woken node needs before taking jobs.")
IDLE_TIMEOUT = typer.Option(1800.0, help="Energy (vanilla): power off nodes idle this long.")
BUFFER = typer.Option(None, help="Energy (ces): spare powered nodes (default 5% of nodes).")
PREDICT = typer.Option(False, "--predict-resources",
                       help="Predict each job's GPU utilisation and memory from its model graph.")
PREDICTOR = typer.Option(None, "--predictor",
                         help="With --predict-resources: a predictor saved by `dlsched predictor train` "
                              "(default: the shipped one). Implies --predict-resources.")
GPU = typer.Option(None, help="GPU type: for --predict-resources, and the cluster's GPU memory with "
                               "--max-jobs-per-gpu > 1 or --failure-model oom (default: V100, or the "
                               "--workload's testbed GPU).")
WORKLOAD = typer.Option(None, help="A GPU-sharing workload as input (instead of --trace): horus-wlarge|"
                                   "horus-wsmall|coscheml-15|coscheml-30|coscheml-60|philly-profiled, with its "
                                   "cluster and GPU type (docs/sharing.md).")
PROFILES = typer.Option("builtin", help="Profile table for --workload job types, --speed-model colocation and "
                                        "coscheml's interference model: builtin (Gavel-derived), a profiles folder "
                                        "(Lucid + Gavel) or a .json.")
INTERFERENCE_MODEL = typer.Option(
    None, "--interference-model", metavar="NAME",
    help="coscheml: how it predicts a pair's slowdown. Default pair-forest: Co-scheML's random forest on "
         "both jobs' profiles, fitted on --profiles when given, else on ../shared/profiles (Lucid + Gavel) "
         "when present, else on the built-in Gavel-derived table. horus-paper-curve: the Horus paper's "
         "utilisation curve (no data); horus-curve|lookup|constant-1|constant-2: fitted on the same profiles.")
SKIP_INVALID = typer.Option(False, help="Skip invalid rows (counted by reason).")
OVERHEAD = typer.Option(None, help="Seconds a preempted job redoes (default: 7/30/60 s for 1/<=8/>8 GPUs, as Helios).")
SPEED_MODEL = typer.Option(None, help="Ground-truth speed model: none|time-sliced|topology|colocation (topology: "
                                       "placement and bus interference; colocation: measured pair slowdowns, "
                                       "see --profiles). Default: topology with a topology "
                                       "placement (topo-aware, topo-aware-p) or --topology, else none.")
FAILURE_MODEL = typer.Option("none", help="Ground-truth failure model: none|oom (out of memory when a GPU's "
                                          "jobs truly need more than it has; the job is resubmitted).")
MAX_JOBS_PER_GPU = typer.Option(1, help="Jobs one GPU may hold (1 = exclusive; >1 lets placers share GPUs).")
OBSERVE_AFTER = typer.Option(None, "--observe-after", metavar="SECONDS",
                             help="After a job has run this long, its observed GPU utilisation and memory "
                                  "replace its predictions for later decisions (default: never).")
JOBS = typer.Option(20000, help="Jobs of the built-in workload.")
AS_JSON = typer.Option(False, "--json", help="Print the summary as JSON on stdout instead of tables "
                                             "(keys: docs/outputs.md).")
SEED = typer.Option(0, help="Seed of the built-in workload.")


def _config(compat: str, invariants: bool, overhead: float | None = None, max_jobs_per_gpu: int = 1):
    """Engine options: Helios checkpoint overheads (7/30/60 s by GPUs) unless a fixed one is given."""
    from dlsched.sim.config import SimConfig, helios_checkpoint_overhead

    if max_jobs_per_gpu < 1:
        raise ValueError(f"--max-jobs-per-gpu must be >= 1, got {max_jobs_per_gpu}")
    cost = helios_checkpoint_overhead if overhead is None else (lambda job, s=float(overhead): s)
    return SimConfig(compat=compat, check_invariants=invariants, preemption_overhead=cost,
                     max_jobs_per_gpu=max_jobs_per_gpu)


def _check_before_work(out_dir: Path, trace: Path | None, jobs: int) -> None:
    """The run directory can be written and the built-in workload fits in memory, before loading anything."""
    from dlsched.cli.checks import check_job_count, check_out_dir

    check_out_dir(out_dir)
    if trace is None:
        check_job_count(jobs, "simulate")


def _print_unused(ctx: typer.Context, policies: list[str], placement: str, energy: str | None) -> None:
    """A note for each given option that this run never reads."""
    from rich.text import Text

    from dlsched.cli.notes import unused_options

    for note in unused_options(ctx, policies, placement, energy):
        console.print(Text(f"note: {note}"), soft_wrap=True, highlight=False)


def _check_priority_file(priority_file: Path | None, names: list[str]) -> None:
    """--priority-file only makes sense for policies that read priorities (QSSF)."""
    if priority_file is None:
        return
    from dlsched.registry import POLICIES

    for name in names:
        if name in POLICIES and not getattr(POLICIES[name], "takes_priority_file", False):
            raise ValueError(f"--priority-file is for policies that read priorities (e.g. qssf), not {name}")


def register(app: typer.Typer) -> None:
    @app.command()
    def policies() -> None:
        """List the scheduling policies and placements (combine any of each)."""
        from rich.table import Table

        from dlsched.registry import FAILURE_MODELS, PLACERS, POLICIES, SPEED_MODELS

        table = Table(title="policies (--policy)")
        table.add_column("name")
        table.add_column("oracle")
        table.add_column("preemptive")
        table.add_column("what it does")
        for name, cls in POLICIES.items():
            doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
            table.add_row(name, str(getattr(cls, "oracle", False)), str(getattr(cls, "preemptive", False)), doc)
        out.print(table)
        out.print("placements (--placement; combine as NAME:WEIGHT,NAME:WEIGHT): " + ", ".join(PLACERS))
        out.print("speed models (--speed-model): " + ", ".join(SPEED_MODELS))
        out.print("failure models (--failure-model): " + ", ".join(FAILURE_MODELS))

    @app.command()
    def simulate(
        ctx: typer.Context,
        trace: Optional[Path] = TRACE,
        trace_format: str = FORMAT,
        vc_config: Optional[Path] = VC_CONFIG,
        cluster_file: Optional[Path] = CLUSTER,
        nodes: Optional[int] = NODES,
        gpus_per_node: int = GPUS_PER_NODE,
        start: Optional[str] = START,
        end: Optional[str] = END,
        vcs: Optional[str] = VCS,
        policy: str = typer.Option("fifo", help="Scheduling policy: fifo|sjf|srtf|qssf."),
        placement: Optional[str] = PLACEMENT,
        topology: Optional[str] = TOPOLOGY,
        backfill: bool = BACKFILL,
        compat: str = COMPAT,
        priority_file: Optional[Path] = PRIORITY_FILE,
        lam: float = LAM,
        refit_every: float = REFIT_EVERY,
        energy: Optional[str] = ENERGY,
        boot_delay: float = BOOT_DELAY,
        idle_timeout: float = IDLE_TIMEOUT,
        buffer: Optional[int] = BUFFER,
        predict: bool = PREDICT,
        predictor_dir: Optional[Path] = PREDICTOR,
        gpu: Optional[str] = GPU,
        skip_invalid: bool = SKIP_INVALID,
        check_invariants: bool = typer.Option(False, help="Verify cluster state after every pass (slow)."),
        preemption_overhead: Optional[float] = OVERHEAD,
        jobs: int = JOBS,
        seed: int = SEED,
        speed_model: Optional[str] = SPEED_MODEL,
        failure_model: str = FAILURE_MODEL,
        max_jobs_per_gpu: int = MAX_JOBS_PER_GPU,
        observe_after: Optional[float] = OBSERVE_AFTER,
        workload: Optional[str] = WORKLOAD,
        profiles: str = PROFILES,
        interference_model: Optional[str] = INTERFERENCE_MODEL,
        out_dir: Path = typer.Option(Path("runs/simulate"), "--out", help="Run directory."),
        timings: bool = typer.Option(False, "--timings",
                                     help="Print where the wall time went (start-up, load, simulate, write) "
                                          "and add it to summary.json as 'timings'."),
        as_json: bool = AS_JSON,
    ) -> None:
        """Simulate one policy; writes DIR/jobs.csv, DIR/summary.json and DIR/timeline.csv."""
        from dlsched.cli.exiting import skip_teardown
        from dlsched.runner import run_one
        from dlsched.sim.results import timed_writes
        from dlsched.traces.pipeline import gc_paused

        phases = Phases()
        phases.lap("start_up")  # interpreter, command line, simulator modules
        # no cyclic GC while the command loads, simulates and writes: the jobs and the state live
        # to the end and make no cycles, yet every oldest-generation pass would walk them all
        # (the first one after loading alone took 0.13 s on the Philly window)
        with clear_errors(), gc_paused():
            _check_before_work(out_dir, trace, jobs)
            _check_priority_file(priority_file, [policy])
            job_list, cluster, spec = _prepare(
                [policy], trace, trace_format, vc_config, nodes, gpus_per_node, start, end, vcs, skip_invalid, jobs,
                seed, topology, predict, gpu, placement, backfill, compat, check_invariants, preemption_overhead,
                priority_file, lam, refit_every, energy, boot_delay, idle_timeout, buffer,
                speed_model, failure_model, max_jobs_per_gpu, observe_after, workload, profiles, cluster_file,
                predictor_dir, interference_model, given(ctx, "profiles"))
            _print_unused(ctx, [policy], placement, energy)
            spec.policy_options = spec.policy_options[policy]
            phases.lap("load")
            t0 = time.perf_counter()
            with timed_writes() as writes, progress_bar(f"{policy}/{placement or 'default'}") as bar:
                summary = run_one(job_list, cluster, spec, out_dir, progress=bar)
            wall = time.perf_counter() - t0
            phases.lap("simulate", minus=sum(writes))
            phases.add("write", sum(writes))
        if as_json:
            print(json.dumps(summary, indent=2, default=float))
        else:
            _print_summaries({policy: summary})
            _print_ground_truth(summary)
        if "energy" in summary and not as_json:
            e = summary["energy"]
            out.print(f"energy ({energy}): {e['avg_powered_off_nodes']:.1f} nodes off on average, "
                      f"{e['wakeups']} wake-ups ({e['daily_wakeups']:.2f}/day, {e['nodes_per_wakeup']:.1f} nodes each), "
                      f"{e['jobs_waiting_for_power']} jobs waited for a node to boot")
        console.print(f"{len(job_list)} jobs simulated in {wall:.2f} s; results in [bold]{out_dir}[/]")
        if timings:
            phases.lap("write")  # the summary printed above is part of handing the results over
            _add_timings(out_dir / "summary.json", phases.as_dict())
            console.print(f"timings: {phases.line()}", highlight=False, soft_wrap=True)
        skip_teardown()  # all written and printed: the process may end without freeing the jobs

    @app.command()
    def compare(
        ctx: typer.Context,
        trace: Optional[Path] = TRACE,
        trace_format: str = FORMAT,
        vc_config: Optional[Path] = VC_CONFIG,
        cluster_file: Optional[Path] = CLUSTER,
        nodes: Optional[int] = NODES,
        gpus_per_node: int = GPUS_PER_NODE,
        start: Optional[str] = START,
        end: Optional[str] = END,
        vcs: Optional[str] = VCS,
        policies: str = typer.Option("fifo,sjf,srtf", help="Comma-separated policies; ratios are to the first."),
        placement: Optional[str] = PLACEMENT,
        topology: Optional[str] = TOPOLOGY,
        backfill: bool = BACKFILL,
        compat: str = COMPAT,
        priority_file: Optional[Path] = PRIORITY_FILE,
        lam: float = LAM,
        refit_every: float = REFIT_EVERY,
        energy: Optional[str] = ENERGY,
        boot_delay: float = BOOT_DELAY,
        idle_timeout: float = IDLE_TIMEOUT,
        buffer: Optional[int] = BUFFER,
        predict: bool = PREDICT,
        predictor_dir: Optional[Path] = PREDICTOR,
        gpu: Optional[str] = GPU,
        skip_invalid: bool = SKIP_INVALID,
        processes: Optional[int] = typer.Option(None, help="Parallel processes (default: one per core)."),
        preemption_overhead: Optional[float] = OVERHEAD,
        jobs: int = JOBS,
        seed: int = SEED,
        speed_model: Optional[str] = SPEED_MODEL,
        failure_model: str = FAILURE_MODEL,
        max_jobs_per_gpu: int = MAX_JOBS_PER_GPU,
        observe_after: Optional[float] = OBSERVE_AFTER,
        workload: Optional[str] = WORKLOAD,
        profiles: str = PROFILES,
        interference_model: Optional[str] = INTERFERENCE_MODEL,
        out_dir: Path = typer.Option(Path("runs/compare"), "--out"),
        as_json: bool = AS_JSON,
    ) -> None:
        """Run several policies on the same input; writes DIR/<policy>/ and DIR/summary.csv."""
        names = [p.strip() for p in policies.split(",") if p.strip()]
        with clear_errors():
            _check_before_work(out_dir, trace, jobs)
            _check_priority_file(priority_file, names)
            job_list, cluster, base = _prepare(
                names, trace, trace_format, vc_config, nodes, gpus_per_node, start, end, vcs, skip_invalid, jobs,
                seed, topology, predict, gpu, placement, backfill, compat, False, preemption_overhead,
                priority_file, lam, refit_every, energy, boot_delay, idle_timeout, buffer,
                speed_model, failure_model, max_jobs_per_gpu, observe_after, workload, profiles, cluster_file,
                predictor_dir, interference_model, given(ctx, "profiles"))
            _print_unused(ctx, names, placement, energy)
            t0 = time.perf_counter()
            _compare_live(ctx, job_list, cluster, names, out_dir, base, processes)
            wall = time.perf_counter() - t0
        from dlsched.runner import load_summary

        summaries = {n: load_summary(out_dir / n) for n in names}
        if as_json:
            print(json.dumps(summaries, indent=2, default=float))
        else:
            _print_summaries(summaries)
        console.print(f"{len(names)} policies x {len(job_list)} jobs in {wall:.2f} s; "
                      f"table in [bold]{out_dir / 'summary.csv'}[/]")

    @app.command()
    def demo(
        ctx: typer.Context,
        out_dir: Path = typer.Option(Path("runs/demo"), "--out"),
        cluster_file: Optional[Path] = CLUSTER,
        jobs: int = typer.Option(20000, help="Jobs of the built-in workload."),
        seed: int = typer.Option(0),
        sharing: bool = typer.Option(True, "--sharing/--no-sharing",
                                     help="Also show GPU sharing on the built-in profile set (a few seconds)."),
        as_json: bool = AS_JSON,
    ) -> None:
        """The main job: compare the baselines on the built-in workload and write the HTML report;
        then a short GPU-sharing comparison (FIFO without sharing, Horus, Co-scheML, OBP) on the
        built-in Gavel-derived profile set."""
        from dlsched.runner import RunSpec, load_summary

        names = demo_policies()
        with clear_errors():
            _check_before_work(out_dir, None, jobs)
            tr, job_list, cluster, name = load_jobs_and_cluster(None, "auto", None, None, 8, None, None, None,
                                                                False, jobs, seed, cluster_file=cluster_file)
            console.print(f"{name} on {len(cluster.nodes)} nodes / {cluster.total_gpus} GPUs in "
                          f"{len(cluster.vcs)} VCs; policies: {', '.join(names)}")
            base = RunSpec(meta={"trace": name, **run_scope(tr, cluster)},
                           policy_options={n: policy_options(n, None, 0.1, 86400.0, "none", tr.origin) for n in names})
            _compare_live(ctx, job_list, cluster, names, out_dir, base, None)
            summaries = {n: load_summary(out_dir / n) for n in names}
            if not as_json:
                _print_summaries(summaries)
            from dlsched.report import build_report

            report = build_report(out_dir)
            shared = demo_sharing() if sharing else None
        if as_json:
            doc = {"policies": summaries, "report": str(report)}
            if shared is not None:
                doc["sharing"] = shared
            print(json.dumps(doc, indent=2, default=float))
        else:
            out.print(f"report: {report}")
            if shared is not None:
                _print_demo_sharing(shared)


def _prepare(names: list[str], trace, trace_format, vc_config, nodes, gpus_per_node, start, end, vcs,
             skip_invalid, jobs, seed, topology, predict, gpu, placement, backfill, compat, check_invariants,
             overhead, priority_file, lam, refit_every, energy, boot_delay, idle_timeout, buffer,
             speed_model=None, failure_model="none", max_jobs_per_gpu=1, observe_after=None, workload=None,
             profiles="builtin", cluster_file=None, predictor_dir=None, interference_model=None,
             profiles_given=False):
    """Load the input, size the cluster, optionally predict resources, and describe the run(s).

    Returns (jobs, cluster, RunSpec) with ``policy_options`` keyed by policy name. coscheml gets
    ``interference_model`` (None: its default) fitted on ``profiles`` when ``profiles_given``."""
    from dlsched.registry import FAILURE_MODELS, SPEED_MODELS, make_placer
    from dlsched.runner import RunSpec

    if speed_model is not None and speed_model not in SPEED_MODELS:
        raise ValueError(f"unknown --speed-model {speed_model!r}; choose from {', '.join(SPEED_MODELS)}")
    if failure_model not in FAILURE_MODELS:
        raise ValueError(f"unknown --failure-model {failure_model!r}; choose from {', '.join(FAILURE_MODELS)}")
    if observe_after is not None and not observe_after >= 0:
        raise ValueError(f"--observe-after must be >= 0 seconds, got {observe_after}")
    if placement is not None:
        make_placer(placement)  # fail fast on an unknown placement, before loading anything
    config = _config(compat, check_invariants, overhead, max_jobs_per_gpu)
    if interference_model is not None:
        from dlsched.sched.pairing.coscheml import MODELS

        if interference_model not in MODELS:
            raise ValueError(f"unknown --interference-model {interference_model!r}; choose from {', '.join(MODELS)}")
    if profiles != "builtin" and workload is None and speed_model != "colocation" and "coscheml" not in names:
        raise ValueError("--profiles is for --workload, --speed-model colocation and coscheml's interference model")
    if workload is not None:
        if trace is not None:
            raise ValueError("give --trace or --workload, not both")
        if predictor_dir is not None:
            raise ValueError("--predictor is not used with --workload (its jobs get the shipped predictor's "
                             "predictions with --predict-resources)")
        if cluster_file is not None:
            raise ValueError("--cluster is for --trace or the built-in workload, not --workload")
        from dlsched.cli.workload_input import load_workload

        tr, job_list, cluster, name, gpu = load_workload(workload, seed, profiles, gpu, nodes, gpus_per_node,
                                                         vc_config, topology, predict)
    else:
        gpu = gpu or "V100"
        tr, job_list, cluster, name = load_jobs_and_cluster(
            trace, trace_format, vc_config, nodes, gpus_per_node, start, end, vcs, skip_invalid, jobs, seed,
            topology=topology, cluster_file=cluster_file)
        if predict or predictor_dir is not None:
            predict_resources(job_list, gpu, predictor_dir)
    if cluster_file is None and (max_jobs_per_gpu > 1 or failure_model != "none"):
        # memory matters: the cluster's GPUs are --gpu (a cluster file names its own)
        from dlsched.core.cluster import gpu_type

        cluster = cluster.with_gpu_type(gpu_type(gpu))
    spec = RunSpec(names[0] if len(names) == 1 else "", placement, backfill, config,
                   policy_options={n: policy_options(n, priority_file, lam, refit_every, compat, tr.origin)
                                   for n in names},
                   meta={"trace": name, "skipped": dict(tr.report.skipped), **run_scope(tr, cluster)},
                   energy=energy, energy_options=_energy_options(boot_delay, idle_timeout, buffer, cluster),
                   origin=tr.origin,
                   speed_model=speed_model, failure_model=failure_model, observe_after=observe_after,
                   speed_options={"profiles": profiles} if speed_model == "colocation" else {})
    if "coscheml" in names:  # its interference model: a name, fitted in the run's process
        spec.policy_options["coscheml"].update(model=interference_model,
                                               profiles=profiles if profiles_given else None)
    return job_list, cluster, spec


def _compare_live(ctx: typer.Context, job_list, cluster, names: list[str], out_dir: Path, base, processes) -> None:
    """compare_policies with a live line of every policy's jobs done (on a terminal) and a line per finish."""
    from dlsched.cli import progress
    from dlsched.runner import compare_policies

    with progress.Activity(f"{len(names)} policies", progress.enabled(ctx)) as live:
        def show(counts: dict[str, tuple[int, int]]) -> None:
            live.text = progress.policy_line(counts)

        compare_policies(job_list, cluster, names, out_dir, base, processes,
                         on_done=lambda n, s: (live.clear(), console.print(f"[dim]{n} done[/]")),
                         progress=show if live.on else None)


def run_scope(tr, cluster) -> dict:
    """What a run's cluster-wide figures are over (VCs, nodes, GPUs) and what the input filters left out."""
    return {"cluster": {"vcs": list(cluster.vcs), "nodes": len(cluster.nodes), "gpus": cluster.total_gpus},
            "filtered": dict(tr.report.filtered)}


def _add_timings(path: Path, seconds: dict[str, float]) -> None:
    """Add ``timings`` (seconds per phase) to a written summary.json, keeping the rest as it was."""
    summary = json.loads(path.read_text())
    summary["timings"] = seconds
    path.write_text(json.dumps(summary, indent=2, default=float))


def _energy_options(boot_delay: float, idle_timeout: float, buffer: int | None, cluster=None) -> dict:
    opts = {"boot_delay": boot_delay, "idle_timeout": idle_timeout}
    if cluster is not None and cluster.nodes:  # a cluster file's node power (800 W unless it says otherwise)
        opts["idle_power_w"] = sum(n.idle_watts for n in cluster.nodes) / len(cluster.nodes)
    if buffer is not None:
        opts["buffer"] = buffer
    return opts


def policy_options(name: str, priority_file: Path | None, lam: float, refit_every: float, compat: str,
                   origin) -> dict:
    """Options of one policy from the CLI flags: the policy class says which it takes."""
    from dlsched.registry import POLICIES

    build = getattr(POLICIES.get(name), "options_from_cli", None)
    if build is None:
        return {}
    return build(priority_file=priority_file, lam=lam, refit_every=refit_every, compat=compat, origin=origin)


DEMO_SHARING_WORKLOAD = "coscheml-30"
DEMO_SHARING_SEEDS = (0, 1, 2)
DEMO_SHARING_RUNS = (("FIFO, no sharing", "fifo", 1), ("Horus", "horus", 2), ("Co-scheML", "coscheml", 2),
                     ("OBP", "obp", 2))
# Co-scheML's default forest, fitted on the built-in table too: the demo needs no ../shared
DEMO_SHARING_OPTIONS = {"coscheml": (("profiles", "builtin"),)}


def demo_sharing() -> dict:
    """`dlsched demo`'s sharing section: the ``coscheml-30`` workload (24 jobs, one every 30 s, on
    3 x 1 Titan Xp) with the built-in Gavel-derived truth (measured pairs, OOM failover), the
    shipped predictors, seeds 0-2: mean makespan, average JCT (from submission) and delivered
    GPU utilisation of each policy. Co-scheML scores pairs with its default model, the random
    forest, fitted on the built-in table (whether ``../shared`` is there or not)."""
    from dlsched.experiments.sharing_run import PolicyRun, mean_std, over_seeds

    specs = [PolicyRun(label, policy, cap, DEMO_SHARING_OPTIONS.get(policy, ()))
             for label, policy, cap in DEMO_SHARING_RUNS]
    runs = over_seeds(DEMO_SHARING_WORKLOAD, specs, list(DEMO_SHARING_SEEDS))
    rows = {label: {key: mean_std(results, key)[0]
                    for key in ("makespan", "avg_jct", "delivered_gpu_utilization", "busy_gpu_utilization")}
            for label, results in runs.items()}
    return {"workload": DEMO_SHARING_WORKLOAD, "seeds": list(DEMO_SHARING_SEEDS), "policies": rows}


def _print_demo_sharing(shared: dict) -> None:
    from rich.table import Table

    seeds = shared["seeds"]
    table = Table(title=f"GPU sharing: {shared['workload']} (24 jobs, 3 x 1 Titan Xp), built-in Gavel-derived truth, "
                        f"2 jobs per GPU, mean of seeds {seeds[0]}-{seeds[-1]}")
    for col in ("policy", "makespan (s)", "avg JCT (s)", "delivered util", "busy GPUs"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for label, row in shared["policies"].items():
        table.add_row(label, f"{row['makespan']:.0f}", f"{row['avg_jct']:.0f}",
                      f"{row['delivered_gpu_utilization']:.1%}", f"{row['busy_gpu_utilization']:.1%}")
    out.print(table)
    out.print("same workload and truth as `dlsched experiment colocation-oracle`; more in docs/sharing-policies.md")


def demo_policies() -> list[str]:
    from dlsched.registry import POLICIES

    preferred = ["fifo", "sjf", "srtf", "qssf"]
    return [p for p in preferred if p in POLICIES]


def _print_ground_truth(summary: dict) -> None:
    """What the speed and failure models did, and what plug-ins postponed."""
    if "avg_slowdown" in summary:
        out.print(f"speed model {summary['speed_model']}: slowdown {summary['avg_slowdown']:.3f} on average "
                  f"(p95 {summary['p95_slowdown']:.3f}, max {summary['max_slowdown']:.3f}); "
                  f"{summary['jobs_slowed_over_5pct']:,} jobs slowed by more than 5 %")
    if "failure_model" in summary:
        out.print(f"failure model {summary['failure_model']}: {summary['failures']:,} failures, "
                  f"{summary['jobs_failed_at_least_once']:,} jobs failed at least once and were resubmitted")
    if "delivered_gpu_utilization" in summary:
        out.print(f"delivered GPU utilisation {summary['delivered_gpu_utilization']:.1%} of all GPU time "
                  f"({summary['delivered_per_busy_gpu']:.1%} of busy GPU time; busy-GPU share "
                  f"{summary['gpu_utilization']:.1%})")
    if "predictions_corrected" in summary:
        out.print(f"observation replaced the predictions of {summary['predictions_corrected']:,} jobs after "
                  f"{summary['observe_after']:g} s of running")
    if summary.get("postponements"):
        out.print(f"{summary['postponements']:,} placements postponed by a plug-in (e.g. TOPO-AWARE-P's utility floor)")


def _print_summaries(summaries: dict[str, dict]) -> None:
    from rich.table import Table

    table = Table(title="summary (seconds)")
    cols = ["jobs", "avg_jct", "median_jct", "p99_jct", "avg_queue_delay", "queued_jobs", "makespan",
            "gpu_utilization", "preemptions"]
    table.add_column("policy")
    for c in cols:
        table.add_column(c, justify="right")
    first = next(iter(summaries.values()))
    for name, s in summaries.items():
        cells = []
        for c in cols:
            v = s.get(c)
            if isinstance(v, float):
                cells.append(f"{v:.3f}" if c == "gpu_utilization" else f"{v:,.1f}")
            else:
                cells.append(f"{v:,}" if isinstance(v, int) else str(v))
        table.add_row(name, *cells)
    out.print(table)
    if len(summaries) > 1 and first.get("avg_jct"):
        ratios = ", ".join(f"{n}: JCT x{s['avg_jct'] / first['avg_jct']:.3f}" for n, s in summaries.items())
        out.print(f"ratios to {next(iter(summaries))}: {ratios}")

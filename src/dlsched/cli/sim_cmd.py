"""``dlsched simulate``, ``compare`` and ``demo``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.text import Text

from dlsched.cli.common import clear_errors, console, out, progress_bar, say
from dlsched.cli.run_options import own_option, run_command
from dlsched.cli.timing import Phases
from dlsched.metrics.strict_json import dumps as strict_dumps

CLUSTER = typer.Option(None, "--cluster", help="The whole cluster in one TOML/YAML file (node groups per VC, GPU "
                                               "type, CPUs, memory, topology, power); see `dlsched cluster show`.")
AS_JSON = typer.Option(False, "--json", help="Print the summary as JSON on stdout instead of tables "
                                             "(keys: docs/outputs.md).")


def _out_dir(text: str, option: str = "--out") -> Path:
    """The run directory from ``--out`` (an empty one would silently mean the current folder)."""
    if not text.strip():
        raise ValueError(f"{option} is empty: name the run directory (e.g. {option} runs/mine)")
    return Path(text)


def _params_text(policy: str) -> str:
    """``name=default`` of each parameter policy ``policy`` declares."""
    import dataclasses

    from dlsched.run.params import params_class

    cls = params_class(policy)
    return ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(cls))


def _check_before_work(out_dir: Path, trace: Path | None, jobs: int) -> None:
    """The run directory can be written and the built-in workload fits in memory, before loading anything."""
    from dlsched.cli.checks import check_job_count, check_out_dir

    check_out_dir(out_dir)
    if trace is None:
        check_job_count(jobs, "simulate")


def _prepare_runs(values: dict, given: set[str], out_dir: Path, policies: list[str] | None = None):
    """The one mapping from flags to runs: build the RunConfig(s), check them, load the input once
    (:func:`~dlsched.run.build.build_run`, or ``build_comparison`` for ``policies``), and print what
    is ignored and what the user should know. Returns (configs, inputs, cluster, RunSpec)."""
    from dlsched.cli.notes import unused_options
    from dlsched.run.build import build_comparison, build_run, notes
    from dlsched.run.options import configs_from_options
    from dlsched.run.params import parse_assignments

    configs, unread = configs_from_options(values, policies)
    first = configs[0]
    _check_before_work(out_dir, first.workload.trace or first.workload.workload, first.workload.jobs)
    from dlsched.cli import progress
    from dlsched.cli.errors import missing_extra

    # --predict-resources can spend seconds to minutes (predictor load, zoo exports) before its first line
    with progress.Activity("--predict-resources: loading jobs, predicting",
                           first.workload.predicts and progress.enabled()) as live:
        def say_live(text: str, style: str = "") -> None:
            live.clear()
            say(text, style)

        if policies is None:
            run = build_run(first, say_live, explain=missing_extra)
            inputs, cluster, spec, told = run.inputs, run.cluster, run.spec, run.notes
        else:
            inputs, cluster, spec = build_comparison(configs, say_live, explain=missing_extra)
            told = notes(first, inputs)
    via_param = set(parse_assignments(values.get("param") or ()))
    for line in unused_options(configs, given, unread, via_param) + told:
        console.print(Text(f"note: {line}"), soft_wrap=True, highlight=False)
    return configs, inputs, cluster, spec


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
        table.add_column("parameters (--NAME or --param NAME=VALUE)")
        for name, cls in POLICIES.items():
            doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
            table.add_row(name, str(getattr(cls, "oracle", False)), str(getattr(cls, "preemptive", False)), doc,
                          _params_text(name))
        out.print(table)
        out.print("placements (--placement; combine as NAME:WEIGHT,NAME:WEIGHT): " + ", ".join(PLACERS))
        out.print("speed models (--speed-model): " + ", ".join(SPEED_MODELS))
        out.print("failure models (--failure-model): " + ", ".join(FAILURE_MODELS))

    @run_command(app, "simulate", [
        own_option("out_dir", str, typer.Option("runs/simulate", "--out", help="Run directory.")),
        own_option("timings", bool, typer.Option(False, "--timings",
                                                 help="Print where the wall time went (start-up, load, simulate, "
                                                      "write) and add it to summary.json as 'timings'.")),
        own_option("as_json", bool, AS_JSON)])
    def simulate(ctx: typer.Context, values: dict, given: set[str], out_dir: str, timings: bool, as_json: bool) -> None:
        """Simulate one policy; writes DIR/jobs.csv, DIR/summary.json and DIR/timeline.csv."""
        import gc

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
            run_dir = _out_dir(out_dir)
            [config], inputs, cluster, spec = _prepare_runs(values, given, run_dir)
            job_list = inputs.jobs
            phases.lap("load")
            t0 = time.perf_counter()
            label = f"{config.policy.name}/{config.placement.name or 'default'}"
            with timed_writes() as writes, progress_bar(label) as bar:
                summary = run_one(job_list, cluster, spec, run_dir, progress=bar)
            wall = time.perf_counter() - t0
            phases.lap("simulate", minus=sum(writes))
            phases.add("write", sum(writes))
            # what lives now lives to the end of the command and makes no cycles: frozen, it is
            # not walked by the first collection after the pause (47 ms on the Philly window)
            gc.freeze()
        try:
            if as_json:
                print(strict_dumps(summary))
            else:
                _print_summaries({config.policy.name: summary})
                _print_ground_truth(summary)
                from dlsched.cli.queue_table import print_queues

                print_queues(out, summary)
            if "energy" in summary and not as_json:
                e = summary["energy"]
                out.print(f"energy ({config.energy.mode}): {e['avg_powered_off_nodes']:.1f} nodes off on average, "
                          f"{e['wakeups']} wake-ups ({e['daily_wakeups']:.2f}/day, {e['nodes_per_wakeup']:.1f} nodes each), "
                          f"{e['jobs_waiting_for_power']} jobs waited for a node to boot")
            if summary.get("non_finite"):
                say(f"warning: summary.json holds null for values that were not finite numbers: "
                    f"{', '.join(summary['non_finite'])}")
            console.print(f"{len(job_list)} jobs simulated in {wall:.2f} s; results in [bold]{run_dir}[/]")
            if timings:
                phases.lap("write")  # the summary printed above is part of handing the results over
                _add_timings(run_dir / "summary.json", phases.as_dict())
                console.print(f"timings: {phases.line()}", highlight=False, soft_wrap=True)
        finally:
            gc.unfreeze()  # a caller in this process (a test) gets its heap back as it was
        skip_teardown()  # all written and printed: the process may end without freeing the jobs

    @run_command(app, "compare", [
        own_option("policies", str, typer.Option("fifo,sjf,srtf",
                                                 help="Comma-separated policies; ratios are to the first.")),
        own_option("processes", int | None, typer.Option(None, help="Parallel processes (default: one per core).")),
        own_option("out_dir", str, typer.Option("runs/compare", "--out", help="Run directory.")),
        own_option("as_json", bool, AS_JSON)], skip=("policy",))
    def compare(ctx: typer.Context, values: dict, given: set[str], policies: str, processes: int | None,
                out_dir: str, as_json: bool) -> None:
        """Run several policies on the same input; writes DIR/<policy>/ and DIR/summary.csv."""
        names = [p.strip() for p in policies.split(",") if p.strip()]
        with clear_errors():
            run_dir = _out_dir(out_dir)
            if not names:
                raise ValueError(f"--policies {policies!r}: name at least one policy")
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"--policies {policies}: {', '.join(twice)} listed twice (each policy runs once "
                                 "into DIR/<policy>/)")
            _, inputs, cluster, base = _prepare_runs(values, given, run_dir, names)
            t0 = time.perf_counter()
            _compare_live(ctx, inputs.jobs, cluster, names, run_dir, base, processes)
            wall = time.perf_counter() - t0
        from dlsched.runner import load_summary

        summaries = {n: load_summary(run_dir / n) for n in names}
        if as_json:
            print(strict_dumps(summaries))
        else:
            _print_summaries(summaries)
        console.print(f"{len(names)} policies x {len(inputs.jobs)} jobs in {wall:.2f} s; "
                      f"table in [bold]{run_dir / 'summary.csv'}[/]")

    @app.command()
    def demo(
        ctx: typer.Context,
        out_text: str = typer.Option("runs/demo", "--out", help="Run directory."),
        cluster_file: Path | None = CLUSTER,
        jobs: int = typer.Option(20000, help="Jobs of the built-in workload."),
        seed: int = typer.Option(0),
        sharing: bool = typer.Option(True, "--sharing/--no-sharing",
                                     help="Also show GPU sharing on the built-in profile set (a few seconds)."),
        as_json: bool = AS_JSON,
    ) -> None:
        """The main job: compare the baselines on the built-in workload and write the HTML report;
        then a short GPU-sharing comparison (FIFO without sharing, Horus, Co-scheML, OBP) on the
        built-in Gavel-derived profile set."""
        from dlsched.run.build import build_comparison
        from dlsched.run.options import configs_from_options
        from dlsched.runner import load_summary

        names = demo_policies()
        with clear_errors():
            out_dir = _out_dir(out_text)
            _check_before_work(out_dir, None, jobs)
            configs, _ = configs_from_options({"jobs": jobs, "seed": seed, "cluster": cluster_file}, names)
            inputs, cluster, base = build_comparison(configs, say)
            console.print(f"{inputs.name} on {len(cluster.nodes)} nodes / {cluster.total_gpus} GPUs in "
                          f"{len(cluster.vcs)} VCs; policies: {', '.join(names)}")
            _compare_live(ctx, inputs.jobs, cluster, names, out_dir, base, None)
            summaries = {n: load_summary(out_dir / n) for n in names}
            if not as_json:
                _print_summaries(summaries)
            shared = demo_sharing() if sharing else None
            _write_demo_sharing(out_dir, shared)
            from dlsched.report import build_report

            report = build_report(out_dir)
        if as_json:
            doc = {"policies": summaries, "report": str(report)}
            if shared is not None:
                doc["sharing"] = shared
            print(strict_dumps(doc))
        else:
            out.print(f"report: {report}")
            if shared is not None:
                _print_demo_sharing(shared)


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


def _add_timings(path: Path, seconds: dict[str, float]) -> None:
    """Add ``timings`` (seconds per phase) to a written summary.json, keeping the rest as it was."""
    summary = json.loads(path.read_text())
    summary["timings"] = seconds
    path.write_text(strict_dumps(summary))


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
    from dlsched.experiments.sharing.run import PolicyRun, mean_std, over_seeds

    specs = [PolicyRun(label, policy, cap, DEMO_SHARING_OPTIONS.get(policy, ()))
             for label, policy, cap in DEMO_SHARING_RUNS]
    runs = over_seeds(DEMO_SHARING_WORKLOAD, specs, list(DEMO_SHARING_SEEDS))
    rows = {label: {key: mean_std(results, key)[0]
                    for key in ("makespan", "avg_jct", "delivered_gpu_utilization", "busy_gpu_utilization")}
            for label, results in runs.items()}
    return {"workload": DEMO_SHARING_WORKLOAD, "seeds": list(DEMO_SHARING_SEEDS), "policies": rows}


def _write_demo_sharing(out_dir: Path, shared: dict | None) -> None:
    """``DIR/sharing.json`` beside the demo's other results (the report shows it); with
    ``--no-sharing`` an older one is removed, so the report never shows numbers of another run."""
    from dlsched.report.sections_demo import DEMO_SHARING_FILE

    path = out_dir / DEMO_SHARING_FILE
    if shared is not None:
        path.write_text(strict_dumps(shared) + "\n", encoding="utf-8")
    elif path.is_file():
        path.unlink()
        say(f"note: --no-sharing: removed the earlier {path} so that the report shows no stale sharing table")


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

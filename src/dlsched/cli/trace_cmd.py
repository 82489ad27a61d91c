"""``dlsched trace stats|convert|generate``: inspect, convert and synthesise traces."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from dlsched.cli.checks import check_job_count, check_out_dir, check_out_file
from dlsched.cli.common import clear_errors, console, out, time_arg

FORMATS_HELP = "auto|helios|helios-log|philly-pollux|pai|dlsched"

trace_app = typer.Typer(help="Inspect, convert and generate traces.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``trace`` sub-app to the main app."""
    app.add_typer(trace_app, name="trace")


def _load(path: Path, trace_format: str, start, end, vc_config, vcs, skip_invalid, include_cpu_jobs,
          quiet: bool = False):
    """Load with the shared filters; print the load report (counts by reason) to stderr."""
    from dlsched.traces import load_trace, load_vc_config

    cluster = load_vc_config(vc_config) if vc_config else None
    keep = [v.strip() for v in vcs.split(",")] if vcs else (list(cluster) if cluster else None)
    trace = load_trace(path, trace_format, start=time_arg(start), end=time_arg(end), vcs=keep,
                       skip_invalid=skip_invalid, include_cpu_jobs=include_cpu_jobs)
    if not quiet:
        for line in trace.report.lines():
            console.print(line, style="dim", highlight=False, markup=False, soft_wrap=True)
    return trace, cluster


_FORMAT = typer.Option("auto", "--trace-format", "-f", help=FORMATS_HELP)
_START = typer.Option(None, help="Window start, inclusive (wall clock, or seconds for relative traces).")
_END = typer.Option(None, help="Window end, inclusive.")
_VC_CONFIG = typer.Option(None, help="VC sizes (vc,node num): keep only these VCs; adds offered load.")
_VCS = typer.Option(None, help="Keep only these VCs (comma separated).")
_SKIP = typer.Option(False, help="Skip invalid rows (counted by reason) instead of stopping.")
_CPU = typer.Option(False, help="Keep CPU-only jobs.")
_PATH = typer.Argument(..., help="Trace file or directory (PAI).")
_OUT = typer.Argument(..., help="Canonical output: .csv, .csv.gz or .parquet.")
_JSON = typer.Option(False, "--json", help="Print the statistics as JSON.")
_PLOT = typer.Option(None, help="Write PNG figures into this directory.")
_SHARED = typer.Option(None, help="--workload philly-profiled: the shared data folder (default ../shared).")


@trace_app.command()
def stats(
    path: Path = _PATH,
    trace_format: str = _FORMAT,
    as_json: bool = typer.Option(False, "--json", help="Print the statistics as JSON."),
    plot: Path | None = _PLOT,
    start: str | None = _START, end: str | None = _END, vc_config: Path | None = _VC_CONFIG,
    vcs: str | None = _VCS, skip_invalid: bool = _SKIP, include_cpu_jobs: bool = _CPU,
) -> None:
    """Helios-style characterisation: durations, GPU mix, arrivals, VCs, statuses."""
    from dlsched.traces.stats import trace_stats

    with clear_errors():
        if plot is not None:
            check_out_dir(plot, "--plot")
        trace, cluster = _load(path, trace_format, start, end, vc_config, vcs, skip_invalid, include_cpu_jobs)
        result = trace_stats(trace, cluster)
        if as_json:
            print(json.dumps(result, indent=2))
        else:
            _print_stats(result)
        if plot is not None:
            from dlsched.traces.plots import plot_stats

            for file in plot_stats(result, plot):
                console.print(f"wrote {file}", highlight=False, markup=False, soft_wrap=True)


@trace_app.command()
def convert(
    path: Path = _PATH,
    output: Path = _OUT,
    trace_format: str = _FORMAT,
    start: str | None = _START, end: str | None = _END, vc_config: Path | None = _VC_CONFIG,
    vcs: str | None = _VCS, skip_invalid: bool = _SKIP, include_cpu_jobs: bool = _CPU,
) -> None:
    """Convert any supported trace to the canonical format (prints the load report)."""
    from dlsched.traces import write_canonical

    with clear_errors():
        check_out_file(output, "OUTPUT")
        trace, _ = _load(path, trace_format, start, end, vc_config, vcs, skip_invalid, include_cpu_jobs)
        write_canonical(trace, output)
        console.print(f"wrote {len(trace)} jobs to {output}", highlight=False, markup=False, soft_wrap=True)


@trace_app.command()
def generate(
    ctx: typer.Context,
    output: Path = _OUT,
    jobs: int = typer.Option(20000, help="Number of jobs."),
    seed: int = typer.Option(0, help="Random seed (same seed, same trace)."),
    days: float | None = typer.Option(None, help="Arrival span; default: offered load --load."),
    load: float = typer.Option(0.8, help="Offered GPU load on the default cluster when --days is unset."),
    workload: str | None = typer.Option(
        None, help="A GPU-sharing workload instead: horus-wlarge|horus-wsmall|coscheml-15|coscheml-30|"
                   "coscheml-60|philly-profiled (seeded; jobs carry model type and true utilisation/memory)."),
    gpu: str | None = typer.Option(None, help="--workload: GPU type (default: the paper's testbed GPU)."),
    profiles: str = typer.Option("builtin", help="--workload: job types from 'builtin' (Gavel-derived), a "
                                                 "profiles folder (Lucid + Gavel) or a .json table."),
    shared: Path | None = _SHARED,
    limit: int | None = typer.Option(None, "--limit", help="--workload philly-profiled: keep the first N jobs."),
) -> None:
    """Write the built-in synthetic workload (calibrated to Helios), or a GPU-sharing workload
    (--workload), in the canonical format."""
    from dlsched.traces import write_canonical

    with clear_errors():
        check_out_file(output, "OUTPUT")
        if seed < 0:
            raise ValueError(f"--seed must be >= 0, got {seed}")
        if workload is None:
            check_job_count(jobs, "generate")
            _check_span(days, load)
        from dlsched.cli import progress

        cluster_path = None
        with progress.Activity(f"trace generate: {workload or f'{jobs:,} jobs'}", progress.enabled(ctx)):
            if workload is None:
                from dlsched.traces.synthetic import generate as synth

                trace = synth(jobs=jobs, seed=seed, days=days, load=load)
                hint = ""
            else:
                trace, hint = _sharing_workload(workload, seed, gpu, profiles, shared, limit)
            write_canonical(trace, output)
            if workload is None:
                cluster_path = _write_cluster_beside(trace, output, load)
        beside = (f" and its cluster to {cluster_path} (dlsched simulate --trace {output} --cluster {cluster_path})"
                  if cluster_path else "")
        console.print(f"wrote {len(trace)} jobs to {output} ({trace.report.source}){beside}",
                      highlight=False, markup=False, soft_wrap=True)
        if hint:
            console.print(hint, highlight=False, markup=False, soft_wrap=True)


MAX_DAYS = 3650.0
"""--days bound: ten years of arrivals (the longest public traces span months)."""
LOAD_RANGE = (0.01, 10.0)
"""--load bounds: below 1 % the span grows without end; above 10x the cluster never drains."""


def _check_span(days: float | None, load: float) -> None:
    """Domain checks of trace generate's arrival options, before any work (NaN fails them too)."""
    if days is not None and not 0 < days <= MAX_DAYS:
        raise ValueError(f"--days must be > 0 and at most {MAX_DAYS:,.0f} (ten years), got {days:g}")
    lo, hi = LOAD_RANGE
    if not lo <= load <= hi:
        raise ValueError(f"--load must be between {lo:g} and {hi:g} (offered GPU load, 1 = the cluster "
                         f"exactly busy), got {load:g}")


def _sharing_workload(name: str, seed: int, gpu: str | None, profiles: str, shared: Path | None,
                      limit: int | None):
    """A workload of :mod:`dlsched.workloads` and a line saying how to simulate it."""
    from dlsched.models.truth import resolve_truth
    from dlsched.workloads import make_workload

    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    try:
        truth = resolve_truth(profiles)
    except ValueError as exc:
        raise ValueError(f"--profiles: {exc}") from None
    wl = make_workload(name, seed=seed, table=truth.table_for(seed), gpu=gpu, shared=shared, jobs=limit)
    for note in wl.notes:
        console.print(note, style="dim", highlight=False, markup=False, soft_wrap=True)
    size = (f"--nodes {wl.vc_nodes['default']} --gpus-per-node {wl.gpus_per_node}" if list(wl.vc_nodes) == ["default"]
            else "--vc-config <philly_vc_config.csv>")
    return wl.trace, (f"made for {size} --gpu {wl.gpu}; e.g. dlsched simulate --trace FILE {size} --gpu {wl.gpu} "
                      f"--max-jobs-per-gpu 2 --predict-resources --speed-model colocation --failure-model oom")


def cluster_path_for(output: Path) -> Path:
    """Where ``trace generate`` puts the cluster of OUTPUT: beside it, NAME.cluster.toml."""
    name = output.name
    for suffix in (".csv.gz", ".csv", ".parquet"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return output.with_name(name + ".cluster.toml")


def _write_cluster_beside(trace, output: Path, load: float) -> Path:
    from dlsched.core.cluster import ClusterSpec
    from dlsched.traces.cluster_file import cluster_to_toml
    from dlsched.traces.synthetic import default_cluster

    path = cluster_path_for(output)
    cluster = ClusterSpec.from_vc_sizes(default_cluster(trace, load))
    path.write_text(cluster_to_toml(cluster, f"the cluster {output.name} was generated for"))
    return path


def _print_stats(s: dict) -> None:
    d, g = s["duration"], s["gpus"]
    pct = d.get("percentiles", {})
    head = Table(title=f"{s['name']}: {s['jobs']:,} jobs", show_header=False)
    head.add_column(style="bold")
    head.add_column(justify="right")
    rows = [("GPU jobs / CPU jobs", f"{s['gpu_jobs']:,} / {s['cpu_jobs']:,}"),
            ("origin", str(s["origin"])), ("span (days)", f"{s['span_days']:.2f}"),
            ("GPU hours", f"{s['gpu_time_gpu_hours']:,.0f}"), ("mean / max GPUs", f"{g['mean']:.2f} / {g['max']}"),
            ("single-GPU jobs", f"{g['single_gpu_share']:.1%}"),
            (">=8-GPU jobs (share of GPU time)", f"{g['ge8_share']:.1%} ({g['ge8_gpu_time_share']:.1%})"),
            ("median / mean duration (s)", f"{pct.get('p50', 0):,.0f} / {d['mean']:,.0f}"),
            ("jobs under 1000 s", f"{d.get('under_1000s', 0):.1%}"),
            ("users (top 5% share of GPU time)",
             f"{s['users']['count']:,} ({s['users'].get('top5pct_gpu_time_share', 0):.1%})")]
    if "offered_load" in s:
        rows.append(("offered GPU load", f"{s['offered_load']:.1%} of {s['cluster_gpus']:,} GPUs"))
    for k, v in rows:
        head.add_row(k, v)
    out.print(head)

    t = Table(title="duration percentiles (s)")
    for k in pct:
        t.add_column(k, justify="right")
    t.add_row(*(f"{v:,.0f}" for v in pct.values()))
    out.print(t)
    _shares("duration groups (Helios Table 4)", "group", s["groups"])
    _shares("GPUs per job", "GPUs", g["mix"])
    _shares("final status", "status", s["status"])
    vcs = dict(list(s["vcs"].items())[:15])
    t = Table(title=f"VCs ({len(s['vcs'])}, top 15 by jobs)")
    for col in ("VC", "jobs", "GPU hours", "GPU time", "mean GPUs", "median dur (s)"):
        t.add_column(col, justify="left" if col == "VC" else "right")
    for vc, v in vcs.items():
        t.add_row(vc, f"{v['jobs']:,}", f"{v['gpu_hours']:,.0f}", f"{v['gpu_time_share']:.1%}",
                  f"{v['mean_gpus']:.2f}", f"{v['median_duration']:,.0f}")
    out.print(t)
    hours = s["arrivals"]["per_hour"]
    peak = max(hours) or 1
    t = Table(title="arrivals per hour of day" + ("" if s["arrivals"]["wall_clock"] else " (relative)"))
    t.add_column("hour", justify="right")
    t.add_column("jobs", justify="right")
    t.add_column("")
    for h, n in enumerate(hours):
        t.add_row(f"{h:02d}", f"{n:,}", "█" * round(30 * n / peak))
    out.print(t)


def _shares(title: str, key: str, data: dict) -> None:
    t = Table(title=title)
    for col in (key, "jobs", "share", "GPU time"):
        t.add_column(col, justify="left" if col == key else "right")
    for name, v in data.items():
        t.add_row(str(name) or "(none)", f"{v['jobs']:,}", f"{v['share']:.1%}", f"{v['gpu_time_share']:.1%}")
    out.print(t)

"""``dlsched experiment eta``: how accurate is "when will my job start?" in the simulator.

Runs each policy over the built-in workload (default) or a trace with a VC table, samples the
forward-simulation ETA of every waiting job at ``--samples`` evenly spaced times, and prints the
accuracy table (median absolute error, share within 10 % / 1 h, by job size) beside a naive
estimate (:mod:`dlsched.experiments.dlsched.eta`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out
from dlsched.metrics.strict_json import dumps as strict_dumps

MAX_JOBS = 200_000
POLICIES_SUPPORTED = ("fifo", "qssf")


def _policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError("--policies: give at least one policy (fifo, qssf)")
    bad = [n for n in names if n not in POLICIES_SUPPORTED]
    if bad:
        raise ValueError(f"--policies {','.join(bad)}: the ETA experiment runs {', '.join(POLICIES_SUPPORTED)} "
                         "(queue-order policies with duration predictions)")
    return names


def _load(trace: Path | None, vc_config: Path | None, start: str | None, end: str | None, jobs: int, seed: int):
    """(jobs, cluster, description) of the run's input."""
    from dlsched.core.cluster import ClusterSpec

    if not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"--jobs must be between 1 and {MAX_JOBS}, got {jobs}")
    if trace is None:
        if vc_config is not None or start is not None or end is not None:
            raise ValueError("--vc-config, --start and --end go with --trace (the built-in workload brings its cluster)")
        from dlsched.traces import synthetic

        tr = synthetic.generate(jobs=jobs, seed=seed)
        vc_nodes = synthetic.default_cluster(tr)
        name = f"built-in workload ({jobs} jobs, seed {seed})"
    else:
        if vc_config is None:
            raise ValueError(f"--trace {trace}: give --vc-config FILE (the VC sizes to simulate on)")
        for opt, path in (("--trace", trace), ("--vc-config", vc_config)):
            if not path.is_file():
                raise FileNotFoundError(f"{opt} {path}: no such file")
        from dlsched.traces.api import load_trace
        from dlsched.traces.vc import load_vc_config

        vc_nodes = load_vc_config(vc_config)
        tr = load_trace(trace, start=start, end=end, vcs=list(vc_nodes))
        name = str(trace)
        if len(tr.jobs) > MAX_JOBS:
            raise ValueError(f"--trace {trace}: {len(tr.jobs)} jobs in the window, more than {MAX_JOBS}; "
                             "narrow it with --start/--end")
    if not tr.jobs:
        raise ValueError(f"{name}: no jobs in the window")
    return tr, ClusterSpec.from_vc_sizes(vc_nodes, 8), name


def _fmt(v, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{100 * v:.0f} %" if pct else f"{v:.2f}"


def print_table(result: dict) -> None:
    from rich.table import Table

    table = Table(title=f"ETA accuracy: {result['policy']} on {result['input']}")
    for head in ("method", "jobs", "group", "estimates", "median wait (h)", "median |error| (h)", "within 10 %",
                 "within 1 h", "never"):
        table.add_column(head, justify="left" if head in ("method", "group") else "right")
    for r in result["rows"]:
        table.add_row(r["method"], str(r["jobs"]), r["group"], str(r["estimates"]), _fmt(r["median_wait_h"]),
                      _fmt(r["median_abs_error_h"]),
                      _fmt(r["within_10pct"], True), _fmt(r["within_1h"], True), str(r["never"]))
    out.print(table)
    console.print(f"{result['jobs']} jobs, {result['refreshes']} ETA refreshes of {result['samples']} sample times "
                  f"({result['mean_refresh_ms']:.1f} ms each on average; {result['samples_skipped']} sample times "
                  f"fell in the same quiet spell as a later one), predictions: {result['predictions']}"
                  + (f" x {result['calibration_factor']:.2f} (calibration)" if result['calibration_factor'] else "")
                  + "; "
                  f"{result['seconds']:.1f} s in all")


def markdown_table(result: dict) -> str:
    """The accuracy table as Markdown (what docs/eta.md shows)."""
    lines = [f"**{result['policy']}** on {result['input']}: {result['refreshes']} refreshes, "
             f"{result['mean_refresh_ms']:.0f} ms each on average"
             + (f", calibration factor {result['calibration_factor']:.2f}" if result.get("calibration_factor") else ""),
             "",
             ("| method | group | jobs | estimates | median wait (h) | median abs. error (h) | within 10 % "
              "| within 1 h | never |"),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        lines.append(f"| {r['method']} | {r['group']} | {r['jobs']} | {r['estimates']} | {_fmt(r['median_wait_h'])} | "
                     f"{_fmt(r['median_abs_error_h'])} | {_fmt(r['within_10pct'], True)} | "
                     f"{_fmt(r['within_1h'], True)} | {r['never']} |")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    from dlsched.cli.topology_cmd import _group

    experiment = _group(app, "experiment", "Reproduce paper experiments.")

    @experiment.command("eta")
    def eta(
        ctx: typer.Context,
        trace: Annotated[Path | None, typer.Option("--trace", help="a trace file (default: the built-in workload)")] = None,
        vc_config: Annotated[Path | None, typer.Option("--vc-config", help="VC sizes for --trace")] = None,
        start: Annotated[str | None, typer.Option("--start", help="first submit time kept (with --trace)")] = None,
        end: Annotated[str | None, typer.Option("--end", help="last submit time kept (with --trace)")] = None,
        jobs: Annotated[int, typer.Option("--jobs", help="jobs of the built-in workload")] = 5000,
        seed: Annotated[int, typer.Option("--seed", help="built-in workload seed")] = 0,
        policies: Annotated[str, typer.Option("--policies", help="comma-separated: fifo, qssf")] = "fifo,qssf",
        samples: Annotated[int, typer.Option("--samples", help="ETA refreshes per run, evenly spaced")] = 50,
        overrun: Annotated[float, typer.Option("--overrun", help="a running job past its prediction runs this "
                                               "times its elapsed time more")] = 0.5,
        calibrate: Annotated[bool, typer.Option("--calibrate/--no-calibrate", help="scale predictions by the run "
                                                "time of finished jobs over their predictions")] = True,
        as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown tables (as in docs/eta.md)")] = False,
    ) -> None:
        """ETA accuracy: forward-simulation start-time estimates vs the actual starts, beside a naive estimate."""
        from dlsched.cli import progress
        from dlsched.cli.checks import check_seed
        from dlsched.experiments.dlsched.eta import run_accuracy, sample_times

        results = []
        with clear_errors():
            names = _policies(policies)
            if not (math.isfinite(overrun) and overrun >= 0):
                raise ValueError(f"--overrun must be a finite number >= 0, got {overrun}")
            check_seed(seed)
            tr, cluster, name = _load(trace, vc_config, start, end, jobs, seed)
            sample_times(tr.jobs, samples)  # checks --samples before any work
            for policy in names:
                for job in tr.jobs:  # each policy starts from the trace's own (absent) predictions
                    job.pred_duration = job.priority = math.nan
                with progress.Activity(f"experiment eta: {policy} on {len(tr.jobs):,} jobs",
                                       progress.enabled(ctx)) as act:
                    result = run_accuracy(tr.jobs, cluster, policy, samples, origin=tr.origin,
                                          progress=act.update, overrun=overrun, calibrate=calibrate)
                result["input"] = name
                results.append(result)
                if markdown:
                    print(markdown_table(result))
                elif not as_json:
                    print_table(result)
        if as_json:
            print(strict_dumps(results))

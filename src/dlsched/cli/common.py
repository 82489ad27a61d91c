"""Pieces shared by the CLI commands: error reporting, trace + cluster loading, progress."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

import typer
from rich.console import Console
from rich.text import Text

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 160)


@contextlib.contextmanager
def clear_errors() -> Iterator[None]:
    """Turn expected failures (bad input, impossible requests) into a message and exit code 2."""
    try:
        yield
    except (ValueError, FileNotFoundError, PermissionError, RuntimeError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        # soft_wrap: one unbroken line (easy to grep); Text: no markup parsing of '[' in messages
        console.print(Text.assemble(("error: ", "bold red"), str(msg)), soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None


def load_jobs_and_cluster(trace: Path | None, trace_format: str, vc_config: Path | None, nodes: int | None,
                          gpus_per_node: int, start: str | None, end: str | None, vcs: str | None,
                          skip_invalid: bool, synthetic_jobs: int = 20000, seed: int = 0, quiet: bool = False,
                          topology: str | None = None):
    """Load a trace (or the built-in workload) and size the cluster. Prints the load report."""
    from dlsched.runner import cluster_for, keep_cluster_vcs
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    vc_nodes = load_vc_config(vc_config) if vc_config else None
    if trace is None:
        from dlsched.traces import synthetic

        tr = synthetic.generate(jobs=synthetic_jobs, seed=seed)
        if vc_nodes is None and nodes is None:
            vc_nodes = synthetic.default_cluster(tr)
        name = f"built-in synthetic workload ({synthetic_jobs} jobs, seed {seed})"
    else:
        vc_filter = [v.strip() for v in vcs.split(",")] if vcs else (list(vc_nodes) if vc_nodes else None)
        tr = load_trace(trace, trace_format, start=time_arg(start), end=time_arg(end), vcs=vc_filter,
                        skip_invalid=skip_invalid)
        name = str(trace)
        if not quiet:
            for line in tr.report.lines():
                console.print(Text(line, style="dim"), soft_wrap=True, highlight=False)
    jobs = tr.jobs
    if not jobs:
        raise ValueError(f"{name}: no jobs left to simulate (check --start/--end/--vcs)")
    cluster = cluster_for(jobs, vc_nodes, nodes, gpus_per_node, topology)
    jobs, left = keep_cluster_vcs(jobs, cluster)
    if left and not quiet:
        console.print(f"[yellow]left out {sum(left.values())} jobs of VCs missing from the cluster: "
                      f"{dict(sorted(left.items()))}[/]")
    return tr, jobs, cluster, name


def time_arg(value: str | None):
    """A window bound from the command line: seconds if it parses as a number, else wall-clock text."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool = True):
    """A rich progress bar fed by the engine's ``progress(done, total)`` callback."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def predict_resources(jobs, gpu: str) -> None:
    """Fill each job's predicted GPU utilisation and memory from its model reference (graph
    features + the default predictor), and say how many jobs got predictions and why the others
    did not (a missing optional extra is an error: nothing could be predicted)."""
    import importlib.util

    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    with_ref = [j for j in jobs if j.onnx_ref or j.model_name]
    if with_ref and importlib.util.find_spec("onnx") is None:
        raise ValueError("--predict-resources needs the optional 'graph' extra (onnx is not installed): "
                         "pip install -e '.[graph]'")
    pred = load_default()
    if pred is None:
        raise ValueError("--predict-resources: no trained resource predictor is installed "
                         "(train one with `dlsched predictor train`)")
    if note := pred.gpu_note(gpu):
        console.print(Text(f"note: {note}"), soft_wrap=True)
    reasons: dict[str, str] = {}

    def resolve(ref: str):
        try:
            return graph_resolver(ref)
        except Exception as exc:  # noqa: BLE001 - counted and reported below, the run goes on
            from dlsched.cli.errors import missing_extra

            reasons[ref] = missing_extra(exc) or f"{type(exc).__name__}: {exc}"
            raise

    filled = fill_job_predictions(with_ref, pred, resolve, gpu=gpu)
    missing = sorted({j.onnx_ref or j.model_name for j in with_ref if j.pred_gpu_util != j.pred_gpu_util})
    console.print(Text(f"predicted GPU utilisation and memory for {filled} of {len(jobs)} jobs "
                       f"({len(jobs) - len(with_ref)} have no model reference"
                       + (f"; unresolved models: {', '.join(missing[:8])}" if missing else "") + ")"),
                  soft_wrap=True)
    why = sorted(set(reasons.values()))
    if why:
        console.print(Text(f"note: models not resolved because: {'; '.join(why[:3])}"
                           + (f" (+{len(why) - 3} more reasons)" if len(why) > 3 else "")), soft_wrap=True)

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


def _announce_zoo_exports(jobs) -> None:
    """Say how many zoo models must be exported to ONNX first (CPU, minutes) and where they go,
    or that they are skipped because PyTorch is missing."""
    import importlib.util

    try:
        from dlsched.graph.zoo import cache_dir, entry_path, zoo_name_for
    except ImportError:  # onnx missing: the resolver will report the jobs as unresolved
        return
    todo = set()
    for ref in {j.model_name for j in jobs if not j.onnx_ref and j.model_name}:
        try:
            name = zoo_name_for(ref)
        except KeyError:
            continue
        if not entry_path(name).is_file():
            todo.add(name)
    if not todo:
        return
    if importlib.util.find_spec("torch") is None:
        console.print(Text(f"note: {len(todo)} zoo models are not cached and exporting them needs PyTorch "
                           f"(pip install 'dlsched[export]'): their jobs keep no prediction"), soft_wrap=True)
        return
    console.print(Text(f"exporting {len(todo)} zoo models to ONNX on CPU (random weights, nothing downloaded; "
                       f"~5-60 s each) into {cache_dir()}: {', '.join(sorted(todo))}"), soft_wrap=True)


def predict_resources(jobs, gpu: str, predictor_dir: Path | None = None) -> None:
    """Fill each job's predicted GPU utilisation and memory from its model reference (graph
    features + the predictor in ``predictor_dir``, else the default one), say how many jobs got
    predictions, and how many of them would not fit one GPU of type ``gpu``."""
    from dlsched.predictors.resources import gpu_memory
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    with_ref = [j for j in jobs if j.onnx_ref or j.model_name]
    _announce_zoo_exports(with_ref)
    if predictor_dir is not None:
        from dlsched.predictors.resources.bundle import Predictor
        from dlsched.predictors.resources.persist import PredictorFormatError

        try:
            pred = Predictor.load(predictor_dir)
        except (PredictorFormatError, OSError, KeyError) as exc:
            raise ValueError(f"--predictor {predictor_dir}: cannot load ({exc})") from None
    else:
        pred = load_default()
    if pred is not None and (note := pred.gpu_note(gpu)):
        console.print(Text(f"note: {note}"), soft_wrap=True)
    filled = fill_job_predictions(with_ref, pred, graph_resolver, gpu=gpu)
    missing = sorted({j.onnx_ref or j.model_name for j in with_ref if j.pred_gpu_util != j.pred_gpu_util})
    console.print(Text(f"predicted GPU utilisation and memory for {filled} of {len(jobs)} jobs "
                       f"({len(jobs) - len(with_ref)} have no model reference"
                       + (f"; unresolved models: {', '.join(missing[:8])}" if missing else "") + ")"),
                  soft_wrap=True)
    cap = gpu_memory.usable_mib(gpu)
    too_big = [j for j in with_ref if cap is not None and j.pred_gpu_mem_mib > cap]
    if too_big:
        worst = max(too_big, key=lambda j: j.pred_gpu_mem_mib)
        console.print(Text(f"note: {len(too_big)} jobs are predicted not to fit one {gpu}; e.g. "
                           f"{worst.onnx_ref or worst.model_name} (batch {worst.batch_size or 'default'}): "
                           + gpu_memory.fit_note(worst.pred_gpu_mem_mib, gpu)), soft_wrap=True)

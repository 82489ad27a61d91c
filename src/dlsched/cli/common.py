"""Pieces shared by the CLI commands: error reporting, trace + cluster loading, progress."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Iterator

import typer
from rich.console import Console
from rich.text import Text

from dlsched.cli.tables import FittingConsole

console = Console(stderr=True)
out = FittingConsole(width=None if sys.stdout.isatty() else 160)  # tables fitted: no number is ever cut


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
                          topology: str | None = None, cluster_file: Path | None = None):
    """Load a trace (or the built-in workload) and size the cluster. Prints the load report.

    The cluster is what is simulated: with ``--vcs`` and a VC table, only the named VCs' nodes
    (so cluster-wide figures are over them); a VC named in ``--vcs`` without jobs is an error, a
    VC of the table without jobs is a printed note (its idle nodes count in the utilisation)."""
    from dlsched.runner import cluster_for, keep_cluster_vcs
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    if nodes is not None and nodes < 1:
        raise ValueError(f"--nodes must be >= 1, got {nodes}")
    if gpus_per_node < 1:
        raise ValueError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")
    wanted = [v.strip() for v in vcs.split(",") if v.strip()] if vcs else None
    vc_nodes = load_vc_config(vc_config) if vc_config else None
    described = None  # the ClusterSpec of --cluster FILE
    if cluster_file is not None:
        from dlsched.traces.cluster_file import read_cluster_file

        if vc_config is not None or nodes is not None or topology is not None:
            raise ValueError(f"--cluster {cluster_file} describes the whole cluster: leave out "
                             "--vc-config, --nodes and --topology")
        described = read_cluster_file(cluster_file)
        vc_nodes = {vc: len(members.node_ids) for vc, members in described.vcs.items()}
        if wanted:
            vc_nodes = _only_vcs(vc_nodes, wanted, f"the cluster file {cluster_file}")
            described = _sub_cluster(described, list(vc_nodes))
    elif vc_nodes is not None and wanted:
        vc_nodes = _only_vcs(vc_nodes, wanted, f"the VC config {vc_config}")
    if trace is None:
        from dlsched.traces import synthetic

        tr = synthetic.generate(jobs=synthetic_jobs, seed=seed)
        if vc_nodes is None and nodes is None:
            vc_nodes = synthetic.default_cluster(tr)
            if wanted:
                vc_nodes = _only_vcs(vc_nodes, wanted, "the built-in cluster")
        name = f"built-in synthetic workload ({synthetic_jobs} jobs, seed {seed})"
        _filter_builtin(tr, time_arg(start), time_arg(end), wanted)
        report_lines = tr.report.lines()[1:] if tr.report.filtered else []
    else:
        vc_filter = wanted or (list(vc_nodes) if vc_nodes else None)
        tr = load_trace(trace, trace_format, start=time_arg(start), end=time_arg(end), vcs=vc_filter,
                        skip_invalid=skip_invalid, vcs_reason="VC not in --vcs" if wanted else "VC not in config")
        name = str(trace)
        report_lines = tr.report.lines()
    if not quiet:
        for line in report_lines:
            console.print(Text(line, style="dim"), soft_wrap=True, highlight=False)
    jobs = tr.jobs
    if not jobs:
        raise ValueError(_nothing_left(name, tr.report))
    if wanted:
        present = {j.vc for j in jobs}
        ghost = [v for v in wanted if v not in present]
        if ghost:
            raise ValueError(f"--vcs {','.join(ghost)}: no jobs of {'this VC' if len(ghost) == 1 else 'these VCs'} "
                             f"in {name}" + (" within --start/--end" if start or end else "")
                             + f" (VCs with jobs: {', '.join(sorted(present)[:12])})")
    cluster = described if described is not None else cluster_for(jobs, vc_nodes, nodes, gpus_per_node, topology)
    jobs, left = keep_cluster_vcs(jobs, cluster)
    if left and not quiet:
        console.print(f"[yellow]left out {sum(left.values())} jobs of VCs missing from the cluster: "
                      f"{dict(sorted(left.items()))}[/]")
    idle_vcs = sorted(set(cluster.vcs) - {j.vc for j in jobs})
    if idle_vcs and not quiet:
        sizes = ", ".join(f"{v} ({len(cluster.vcs[v].node_ids)} nodes)" for v in idle_vcs[:8])
        console.print(Text(f"note: VCs with no jobs to simulate: {sizes}"
                           + (f" and {len(idle_vcs) - 8} more" if len(idle_vcs) > 8 else "")
                           + "; their nodes stay in the cluster and count in gpu_utilization (drop them "
                             "with --vcs)"), soft_wrap=True, highlight=False)
    return tr, jobs, cluster, name


def _sub_cluster(cluster, vcs: list[str]):
    """The part of ``cluster`` that belongs to ``vcs``."""
    from dlsched.core.cluster import ClusterSpec

    keep = set(vcs)
    return ClusterSpec([n for n in cluster.nodes if n.vc in keep], {v: cluster.vcs[v] for v in vcs})


def _only_vcs(vc_nodes: dict[str, int], wanted: list[str], where: str) -> dict[str, int]:
    """The VC table restricted to ``--vcs`` (an unknown name is an error, not a silent zero)."""
    unknown = [v for v in wanted if v not in vc_nodes]
    if unknown:
        raise ValueError(f"--vcs {','.join(unknown)}: not in {where} (it has {', '.join(list(vc_nodes)[:12])}"
                         + (", ..." if len(vc_nodes) > 12 else "") + ")")
    return {v: vc_nodes[v] for v in wanted}


def _filter_builtin(tr, start, end, wanted: list[str] | None) -> None:
    """Apply --start/--end (seconds) and --vcs to the built-in workload, counting what is left out."""
    for value, option in ((start, "--start"), (end, "--end")):
        if isinstance(value, str):
            raise ValueError(f"{option} {value!r}: the built-in workload has relative times; give seconds")
    if start is not None and end is not None and start > end:
        raise ValueError(f"--start {start:g} is after --end {end:g}: the window holds no time")
    if start is None and end is None and not wanted:
        return
    keep_vcs = set(wanted) if wanted else None
    kept = []
    for job in tr.jobs:
        if keep_vcs is not None and job.vc not in keep_vcs:
            tr.report.filtered["VC not in --vcs"] += 1
        elif start is not None and job.submit_time < start:
            tr.report.filtered["outside window (before start)"] += 1
        elif end is not None and job.submit_time > end:
            tr.report.filtered["outside window (after end)"] += 1
        else:
            kept.append(job)
    tr.jobs = kept


def _nothing_left(name: str, report) -> str:
    """Why no job is left: an empty input, or the filters (with their counts)."""
    if not report.rows_read:
        return f"{name}: the trace holds no job rows (only a header?)"
    why = "; ".join(f"{n} {reason}" for reason, n in sorted(report.filtered.items()))
    skipped = sum(report.skipped.values())
    return (f"{name}: no jobs left to simulate: all {report.rows_read} rows were left out"
            + (f" ({why})" if why else "") + (f"; {skipped} invalid rows skipped" if skipped else ""))


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


def _announce_zoo_exports(jobs) -> dict[str, str]:
    """Say how many zoo models must be exported to ONNX first (CPU, minutes) and where they go,
    or that they are skipped because PyTorch is missing. Returns model reference -> zoo name of
    the exports to come, so that each can report its progress."""
    import importlib.util

    try:
        from dlsched.graph.zoo import cache_dir, entry_path, zoo_name_for
    except ImportError:  # onnx missing: the resolver will report the jobs as unresolved
        return {}
    todo: set[str] = set()
    by_ref: dict[str, str] = {}
    for ref in {j.model_name for j in jobs if not j.onnx_ref and j.model_name}:
        try:
            name = zoo_name_for(ref)
        except KeyError:
            continue
        if not entry_path(name).is_file():
            todo.add(name)
            by_ref[ref] = name
    if not todo:
        return {}
    if importlib.util.find_spec("torch") is None:
        console.print(Text(f"note: {len(todo)} zoo models are not cached and exporting them needs PyTorch "
                           f"(pip install 'dlsched[export]'): their jobs keep no prediction"), soft_wrap=True)
        return {}
    console.print(Text(f"exporting {len(todo)} zoo models to ONNX on CPU (random weights, nothing downloaded; "
                       f"~5-60 s each) into {cache_dir()}: {', '.join(sorted(todo))}"), soft_wrap=True)
    return by_ref


def with_export_progress(resolver, exports: dict[str, str], say=None):
    """``resolver`` that prints ``exported k/N: NAME (T s)`` after each zoo export it triggers
    (``exports``: model reference -> zoo name still to export), so a long first run shows progress."""
    say = say or (lambda line: console.print(Text(line, style="dim"), soft_wrap=True))
    total = len(set(exports.values()))
    done: set[str] = set()

    def resolve(ref: str):
        name = exports.get(ref)
        t0 = time.perf_counter()
        result = resolver(ref)
        if name is not None and name not in done:
            done.add(name)
            say(f"exported {len(done)}/{total}: {name} ({time.perf_counter() - t0:.0f} s)")
        return result

    return resolve


def predict_resources(jobs, gpu: str, predictor_dir: Path | None = None) -> None:
    """Fill each job's predicted GPU utilisation and memory from its model reference (graph
    features + the predictor in ``predictor_dir``, else the default one), say how many jobs got
    predictions and why the others did not (a missing optional extra is an error: nothing could be
    predicted), and how many of them would not fit one GPU of type ``gpu``."""
    import importlib.util

    from dlsched.predictors.resources import gpu_memory

    with_ref = [j for j in jobs if j.onnx_ref or j.model_name]
    if with_ref and importlib.util.find_spec("onnx") is None:
        raise ValueError("--predict-resources needs the optional 'graph' extra (onnx is not installed): "
                         "pip install -e '.[graph]'")
    from dlsched.cli import progress

    exports = _announce_zoo_exports(with_ref)
    with progress.Activity(f"--predict-resources: {len(with_ref):,} jobs", progress.enabled()) as live:
        filled, reasons = _predict(with_ref, exports, gpu, predictor_dir, live)
    missing = sorted({j.onnx_ref or j.model_name for j in with_ref if j.pred_gpu_util != j.pred_gpu_util})
    console.print(Text(f"predicted GPU utilisation and memory for {filled} of {len(jobs)} jobs "
                       f"({len(jobs) - len(with_ref)} have no model reference"
                       + (f"; unresolved models: {', '.join(missing[:8])}" if missing else "") + ")"),
                  soft_wrap=True)
    why = sorted(set(reasons.values()))
    if why:
        console.print(Text(f"note: models not resolved because: {'; '.join(why[:3])}"
                           + (f" (+{len(why) - 3} more reasons)" if len(why) > 3 else "")), soft_wrap=True)
    cap = gpu_memory.usable_mib(gpu)
    too_big = [j for j in with_ref if cap is not None and j.pred_gpu_mem_mib > cap]
    if too_big:
        worst = max(too_big, key=lambda j: j.pred_gpu_mem_mib)
        console.print(Text(f"note: {len(too_big)} jobs are predicted not to fit one {gpu}; e.g. "
                           f"{worst.onnx_ref or worst.model_name} (batch {worst.batch_size or 'default'}): "
                           + gpu_memory.fit_note(worst.pred_gpu_mem_mib, gpu)), soft_wrap=True)


def _predict(with_ref, exports: dict[str, str], gpu: str, predictor_dir: Path | None, live):
    """predict_resources's slow part (loading the predictor, zoo exports, graph features) under its
    live progress line ``live``, cleared before each printed line. Returns (filled, reasons)."""
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    if predictor_dir is not None:
        from dlsched.predictors.resources.bundle import Predictor
        from dlsched.predictors.resources.persist import PredictorFormatError

        try:
            pred = Predictor.load(predictor_dir)
        except (PredictorFormatError, OSError, KeyError) as exc:
            raise ValueError(f"--predictor {predictor_dir}: cannot load ({exc})") from None
    else:
        pred = load_default()
    if pred is None:
        raise ValueError("--predict-resources: no trained resource predictor is installed "
                         "(train one with `dlsched predictor train`)")
    if note := pred.gpu_note(gpu):
        live.clear()
        console.print(Text(f"note: {note}"), soft_wrap=True)
    reasons: dict[str, str] = {}

    def say(line: str) -> None:
        live.clear()
        console.print(Text(line, style="dim"), soft_wrap=True)

    resolver = with_export_progress(graph_resolver, exports, say)

    def resolve(ref: str):
        try:
            return resolver(ref)
        except Exception as exc:  # noqa: BLE001 - counted and reported below, the run goes on
            from dlsched.cli.errors import missing_extra

            reasons[ref] = missing_extra(exc) or f"{type(exc).__name__}: {exc}"
            raise

    return fill_job_predictions(with_ref, pred, resolve, gpu=gpu), reasons

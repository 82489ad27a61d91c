"""Resource predictions for a run's jobs (``--predict-resources``, ``--predictor``).

Fills each job's predicted GPU utilisation and memory from its model graph, saying (through
``say``) how many jobs got predictions, why the others did not, and which would not fit a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dlsched.run.inputs import Say, quiet


def announce_zoo_exports(jobs, say: Say = quiet) -> dict[str, str]:
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
        say(f"note: {len(todo)} zoo models are not cached and exporting them needs PyTorch "
            f"(pip install 'dlsched[export]'): their jobs keep no prediction")
        return {}
    say(f"exporting {len(todo)} zoo models to ONNX on CPU (random weights, nothing downloaded; "
        f"~5-60 s each) into {cache_dir()}: {', '.join(sorted(todo))}")
    return by_ref


def with_export_progress(resolver, exports: dict[str, str], say: Say = quiet):
    """``resolver`` that prints ``exported k/N: NAME (T s)`` after each zoo export it triggers
    (``exports``: model reference -> zoo name still to export), so a long first run shows progress;
    before an export of ``DLSCHED_EXPORT_NOTE_PARAMS`` parameters or more it says what it exports,
    its rough time and memory and where it is cached, as ``predict`` does (issue 37).
    A bad ``DLSCHED_EXPORT_NOTE_PARAMS`` is a ValueError naming it, before any export."""
    total = len(set(exports.values()))
    done: set[str] = set()
    if not exports:
        return resolver
    from dlsched.graph.export import on_export
    from dlsched.graph.export_note import note_threshold, plan_note
    from dlsched.graph.zoo.cache import entry_path

    limit = note_threshold()

    def resolve(ref: str):
        name = exports.get(ref)
        if name is None or name in done:
            return resolver(ref)

        def listen(plan) -> None:
            if plan.params >= limit:
                say(plan_note(name, plan, entry_path(name)))

        t0 = time.perf_counter()
        with on_export(listen):
            result = resolver(ref)
        done.add(name)
        say(f"exported {len(done)}/{total}: {name} ({time.perf_counter() - t0:.0f} s)")
        return result

    return resolve


def export_first(jobs, say: Say = quiet) -> None:
    """Export the zoo models of ``jobs`` that are not cached yet, each with its progress line (and the
    note before a big one), for a predictor that resolves models without a word (the workloads'
    :func:`~dlsched.workloads.attach_predictions`). A model that fails to export is named in a
    note: its jobs then get what the predictor gives unresolved models."""
    exports = announce_zoo_exports(jobs, say)
    if not exports:
        return
    from dlsched.graph.zoo import model_path

    failed: list[str] = []

    def export(ref: str):
        try:
            return model_path(exports[ref])
        except Exception as exc:  # noqa: BLE001 - reported, and the predictor treats the model as unresolved
            failed.append(f"{exports[ref]} ({type(exc).__name__}: {exc})")
            return None

    resolve = with_export_progress(export, exports, say)
    for ref in sorted(exports, key=lambda r: exports[r]):
        resolve(ref)
    if failed:
        say(f"note: could not export {'; '.join(failed[:3])}" + (f" (+{len(failed) - 3} more)" if len(failed) > 3
                                                                 else ""))


def predict_resources(jobs, gpu: str, predictor_dir: Path | None = None, say: Say = quiet,
                      explain: Callable[[BaseException], str | None] = lambda exc: None) -> None:
    """Fill each job's predicted GPU utilisation and memory from its model reference (graph
    features + the predictor in ``predictor_dir``, else the default one), say how many jobs got
    predictions and why the others did not (a missing optional extra is an error: nothing could be
    predicted), and how many of them would not fit one GPU of type ``gpu``. ``explain`` turns a
    resolver's exception into the reason to report (the CLI names a missing optional extra)."""
    import importlib.util

    from dlsched.predictors.resources import gpu_memory
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    with_ref = [j for j in jobs if j.onnx_ref or j.model_name]
    if with_ref and importlib.util.find_spec("onnx") is None:
        raise ValueError("--predict-resources needs the optional 'graph' extra (onnx is not installed): "
                         "pip install -e '.[graph]'")
    exports = announce_zoo_exports(with_ref, say)
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
        say(f"note: {note}")
    reasons: dict[str, str] = {}

    resolver = with_export_progress(graph_resolver, exports, say)

    def resolve(ref: str):
        try:
            return resolver(ref)
        except Exception as exc:  # counted and reported below, the run goes on
            reasons[ref] = explain(exc) or f"{type(exc).__name__}: {exc}"
            raise

    filled = fill_job_predictions(with_ref, pred, resolve, gpu=gpu)
    missing = sorted({j.onnx_ref or j.model_name for j in with_ref if j.pred_gpu_util != j.pred_gpu_util})
    say(f"predicted GPU utilisation and memory for {filled} of {len(jobs)} jobs "
        f"({len(jobs) - len(with_ref)} have no model reference"
        + (f"; unresolved models: {', '.join(missing[:8])}" if missing else "") + ")")
    why = sorted(set(reasons.values()))
    if why:
        say(f"note: models not resolved because: {'; '.join(why[:3])}"
            + (f" (+{len(why) - 3} more reasons)" if len(why) > 3 else ""))
    cap = gpu_memory.usable_mib(gpu)
    too_big = [j for j in with_ref if cap is not None and j.pred_gpu_mem_mib > cap]
    if too_big:
        worst = max(too_big, key=lambda j: j.pred_gpu_mem_mib)
        say(f"note: {len(too_big)} jobs are predicted not to fit one {gpu}; e.g. "
            f"{worst.onnx_ref or worst.model_name} (batch {worst.batch_size or 'default'}): "
            + gpu_memory.fit_note(worst.pred_gpu_mem_mib, gpu))

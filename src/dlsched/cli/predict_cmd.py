"""``dlsched predict MODEL.onnx``: graph features plus predicted GPU utilisation and memory.

Graph analysis comes from :mod:`dlsched.graph`; the regressors from
``dlsched.predictors.resources.default.load_default()``.  Without a trained predictor the command still
prints the graph figures, estimates memory with Horus Eq. 2 and says that utilisation needs
``dlsched predictor train``."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import typer

FALLBACK_BAND = 2.0  # Horus Eq. 2 is uncalibrated: report [est/2, est*2]
TRAIN_HINT = "utilisation needs a trained predictor: run `dlsched predictor train`"


def _load_predictor(path: Path | None = None) -> tuple[Any | None, str | None]:
    """The predictor saved in ``path`` (a bad one is an ``error:``), else the shipped default,
    or (None, reason) when it cannot be had."""
    if path is not None:
        from dlsched.predictors.resources.bundle import Predictor
        from dlsched.predictors.resources.persist import PredictorFormatError

        try:
            return Predictor.load(path), None
        except (PredictorFormatError, OSError, KeyError, ValueError) as exc:
            typer.echo(f"error: --predictor {path}: cannot load ({exc})", err=True)
            raise typer.Exit(2) from None
    try:
        from dlsched.predictors.resources.default import load_default
    except Exception as exc:  # noqa: BLE001 - ImportError or a broken predictors package
        return None, f"dlsched.predictors unavailable ({type(exc).__name__}: {exc})"
    try:
        pred = load_default()
    except Exception as exc:  # noqa: BLE001 - missing model file, etc.
        return None, f"no trained predictor ({type(exc).__name__}: {exc})"
    if pred is None:
        return None, "no trained predictor"
    return pred, None


def _ask(fn: Any, feats: dict[str, float], gpu: str, what: str, notes: list[str],
         **kw: Any) -> dict[str, Any] | None:
    """Call a predictor method; None (with a note) when it has no answer or fails."""
    try:
        triple = fn(feats, gpu, **kw)
    except Exception as exc:  # noqa: BLE001 - e.g. unknown GPU type
        notes.append(f"{what} predictor failed: {type(exc).__name__}: {exc}")
        return None
    if triple is None:
        notes.append(f"the predictor has no {what} model for {gpu}")
        return None
    mean, lo, hi = (float(v) for v in triple)
    return {"mean": mean, "lo": lo, "hi": hi, "source": "predictor"}


def _model_file(model: Path) -> Path:
    """``model`` itself, or the cached ONNX file of the zoo model it names (exported on first use)."""
    if model.exists() or model.suffix.lower() == ".onnx":
        return model
    from dlsched.graph.zoo import ZOO_NAMES, model_path
    from dlsched.graph.zoo.cache import entry_path

    name = str(model)
    if name not in ZOO_NAMES:
        raise ValueError(f"{model}: no such file, and not a zoo model name (zoo: {', '.join(sorted(ZOO_NAMES)[:12])}, ...)")
    cached = entry_path(name)
    if cached.is_file():
        return cached
    from dlsched.cli.export_notice import exporting

    return exporting(name, cached, lambda: model_path(name))   # first use: a note and progress if it is big


def _human(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def _saved_bytes(feats: dict[str, float], meta: Any) -> float:
    """Bytes autograd keeps under the job's precision and attention mode (as the memory model
    counts them)."""
    amp = "_amp" if meta.amp else ""
    saved = feats["saved_bytes" + amp]
    if meta.attention != "eager":
        saved += feats.get("saved_attn_rows_bytes", 0.0) - feats.get("saved_attn_bytes" + amp, 0.0)
    return saved


def _check_seq(model: Path, analysis: Any, seq: int | None, meta: Any) -> None:
    """Refuse a ``--seq`` the model cannot run (beyond its learnt position table) or that no GPU
    holds even at batch 1, naming --seq (a large batch would otherwise take the blame)."""
    from dlsched.graph.positions import max_positions
    from dlsched.predictors.resources import gpu_memory

    if seq is None or not analysis.has_seq:
        return
    rows = max_positions(model) if model.suffix.lower() == ".onnx" else None
    if rows is not None and seq > rows:
        typer.echo(f"error: --seq {seq}: beyond the model's learnt position table ({rows:,} positions); "
                   f"use --seq {rows} or less", err=True)
        raise typer.Exit(2)
    big, big_gib = gpu_memory.largest()
    one = _saved_bytes(analysis.features(1, seq), meta) / 2**20
    if one > big_gib * 1024:
        typer.echo(f"error: --seq {seq}: the activations of one sample alone need ~{one / 1024:,.0f} GiB, more than "
                   f"any GPU holds (largest known: {big}, {big_gib:.0f} GiB); lower --seq", err=True)
        raise typer.Exit(2)


def predict(
    model: Annotated[Path, typer.Argument(help="ONNX model file, or a zoo model name (e.g. resnet50, built and "
                                                "cached on first use; needs the 'export' extra)")],
    batch: int = typer.Option(64, "--batch", "-b", min=1, help="training batch size"),
    seq: int | None = typer.Option(None, "--seq", "-s", min=1, help="sequence length (models with a seq dim)"),
    gpu: str = typer.Option("V100", "--gpu", help="GPU type for the predictors"),
    optimizer: str = typer.Option("adam", "--optimizer",
                                  help="sgd, sgd_momentum, adam or adamw (optimizer state in memory)"),
    amp: bool = typer.Option(False, "--amp", help="mixed-precision training (torch.autocast)"),
    attention: str = typer.Option("", "--attention", show_default=False,
                                  help="attention implementation of transformer graphs: fused (default: "
                                       "scaled_dot_product_attention / FlashAttention, what PyTorch >= 2.0, "
                                       "transformers >= 4.36 and timm >= 0.9 run; keeps no seq x seq matrix, "
                                       "one fp32 statistic per row), memory_efficient (SDPA's memory-efficient "
                                       "kernel: the same memory) or eager (softmax(q k^T) v by hand: keeps the "
                                       "probabilities, their dropout mask and the dropped copy)"),
    optimizer_impl: str = typer.Option("foreach", "--optimizer-impl",
                                       help="foreach (PyTorch 2.x default on CUDA: Adam's step allocates one "
                                            "parameter-sized temporary), fused or for_loop"),
    ddp: bool = typer.Option(False, "--ddp", help="DistributedDataParallel (its gradient buckets: one more "
                                                  "copy of the gradients)"),
    stack: str = typer.Option("unknown", "--stack",
                              help="software stack, for the memory held before the first tensor: lazy (PyTorch >= "
                                   "1.13 with CUDA >= 11.7), eager, gpumemnet-a100 (the fit's own), lucid, unknown "
                                   "(default: the largest known context, band down to lazy), or a cluster's own label "
                                   "(predicted as unknown, plus its calibration from `predictor calibrate`)"),
    predictor_dir: Path | None = typer.Option(None, "--predictor",
                                              help="a predictor saved by `dlsched predictor train` (default: shipped)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Predict GPU utilisation and peak memory of training MODEL at a batch size."""
    from dlsched.core import gpus
    from dlsched.graph import GraphError, analyze, horus_memory_mib
    from dlsched.predictors.resources import gpu_memory
    from dlsched.predictors.resources.train_memory import (
        ATTENTION_MODES,
        MAX_BATCH,
        OPTIMIZER_IMPLS,
        OPTIMIZER_STATES,
        JobMeta,
    )

    if gpus.find(gpu, fuzzy=True) is None:  # one list of GPU types for predict and simulate (core/gpus.py)
        typer.echo(f"error: --gpu {gpu!r}: unknown GPU type; known: {', '.join(gpus.names())}", err=True)
        raise typer.Exit(2)
    if optimizer not in OPTIMIZER_STATES:
        typer.echo(f"error: --optimizer {optimizer!r}: expected one of {', '.join(OPTIMIZER_STATES)}", err=True)
        raise typer.Exit(2)
    if attention and attention.replace("-", "_").lower() not in ATTENTION_MODES:
        typer.echo(f"error: --attention {attention!r}: expected one of {', '.join(ATTENTION_MODES)}", err=True)
        raise typer.Exit(2)
    if optimizer_impl not in OPTIMIZER_IMPLS:
        typer.echo(f"error: --optimizer-impl {optimizer_impl!r}: expected one of {', '.join(OPTIMIZER_IMPLS)}",
                   err=True)
        raise typer.Exit(2)
    meta = JobMeta(optimizer, amp, attention=attention, optimizer_impl=optimizer_impl, ddp=ddp)
    from dlsched.predictors.resources.context import KNOWN_STACKS
    if batch > MAX_BATCH:
        typer.echo(f"error: --batch {batch}: beyond any GPU (at most {MAX_BATCH:,} samples per step are accepted)",
                   err=True)
        raise typer.Exit(2)
    model_ref = str(model)
    try:
        model = _model_file(model)
        analysis = analyze(model)
        _check_seq(model, analysis, seq, meta)
        feats = analysis.features(batch, seq)
    except (GraphError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    feats["amp"] = float(amp)
    big, big_gib = gpu_memory.largest()
    act_mib = _saved_bytes(feats, meta) / 2**20
    if batch > 1 and act_mib > big_gib * 1024:
        typer.echo(f"error: --batch {batch}: the activations alone need ~{act_mib / 1024:,.0f} GiB, more than any "
                   f"GPU holds (largest known: {big}, {big_gib:.0f} GiB); lower --batch", err=True)
        raise typer.Exit(2)

    notes: list[str] = []
    if seq is not None and not analysis.has_seq:
        notes.append(f"--seq {seq} ignored: {model_ref} has no sequence dimension")
    if attention and not feats.get("attn_layers", 0):
        notes.append(f"--attention {attention} ignored: {model_ref} has no attention layer")
    pred, why = _load_predictor(predictor_dir) if predictor_dir is not None else _load_predictor()
    util: dict[str, Any] | None = None
    mem: dict[str, Any] | None = None
    if pred is not None:
        util = _ask(pred.predict_util, feats, gpu, "utilisation", notes)
        explain = getattr(pred, "gpu_note", None)  # optional: only data-sheet predictors have it
        if util is not None and explain is not None and (note := explain(gpu)):
            notes.append(note)
        params = inspect.signature(pred.predict_mem_mib).parameters
        kw: dict[str, Any] = {"meta": meta} if "meta" in params else {}
        if "stack" in params:   # "unknown" on a predictor that names no fit stack: its own intercept
            kw["stack"] = pred.stack_for(stack)
        if "signature" in params:   # the observed-peak guard of `predictor calibrate`
            from dlsched.predictors.resources.stack_calibration import job_signature

            kw["signature"] = job_signature(model_ref, batch, int(seq or 0), optimizer, amp, meta.attention)
        mem = _ask(pred.predict_mem_mib, feats, gpu, "memory", notes, **kw)
    else:
        notes.append(why or "no predictor")
    if util is None:
        notes.append(TRAIN_HINT)
    if mem is None:
        est = horus_memory_mib(feats)
        mem = {"mean": est, "lo": est / FALLBACK_BAND, "hi": est * FALLBACK_BAND, "source": "horus_eq2"}
    if stack.strip().lower() not in KNOWN_STACKS and mem.get("source") == "predictor":
        has_cal = any(k.split("|")[1:2] == [stack.strip().lower()] for k in getattr(pred, "mem_affine", {}))
        notes.append(f"stack {stack!r}: no documented context (known: {', '.join(KNOWN_STACKS)}); predicted as "
                     f"unknown{', then its calibration from observed peaks' if has_cal else ''}")
    if (fit := gpu_memory.fit_note(mem["mean"], gpu)) is not None:
        notes.append(fit)
    elif gpu_memory.memory_gib(gpu) is None:
        notes.append(f"GPU {gpu!r} has no known memory size (known: {', '.join(gpu_memory.MEMORY_GIB)})")

    out = {
        "model": str(model),
        "gpu": gpu,
        "batch": batch,
        "seq": int(feats["seq"]) if analysis.has_seq else None,
        "flops": feats["flops"],
        "flops_per_sample": feats["flops_per_sample"],
        "flops_per_step": feats["flops_per_step"],
        "params": int(feats["params"]),
        "param_bytes": int(feats["param_bytes"]),
        "peak_activation_bytes": feats["peak_activation_bytes"],
        "saved_activation_bytes": _saved_bytes(feats, meta),
        "attention_bytes_eager": feats["saved_attn_bytes_amp" if amp else "saved_attn_bytes"],
        "optimizer": optimizer,
        "optimizer_impl": meta.optimizer_impl,
        "amp": amp,
        "attention": meta.attention,
        "attention_layers": int(feats.get("attn_layers", 0)),
        "ddp": ddp,
        "stack": stack,
        "gpu_util": util,
        "gpu_mem_mib": mem,
        "unknown_ops": analysis.unknown_ops,
        "notes": notes,
    }
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    seq_txt = f", seq {out['seq']}" if out["seq"] is not None else ""
    lines = [
        f"model          {model}  (opset {analysis.opset}, {len(analysis.node_ops)} nodes, {analysis.mode} batch)",
        f"batch          {batch}{seq_txt}",
        f"FLOPs/sample   {_human(feats['flops_per_sample'], 'FLOP')} (forward)",
        f"FLOPs/step     {_human(feats['flops_per_step'], 'FLOP')} (training step = 3 x forward)",
        f"parameters     {feats['params'] / 1e6:.2f} M ({feats['param_bytes'] / 2**20:.1f} MiB)",
        f"peak activ.    {feats['peak_activation_bytes'] / 2**20:.1f} MiB (forward liveness)",
        (f"kept for bwd   {out['saved_activation_bytes'] / 2**20:.1f} MiB (activations autograd saves"
         f"{', AMP' if amp else ''}); optimizer {optimizer} ({meta.optimizer_impl})"),
    ]
    if out["attention_layers"]:
        lines.append(f"attention      {meta.attention}, {out['attention_layers']} layers (eager would keep "
                     f"{out['attention_bytes_eager'] / 2**30:.2f} GiB of seq x seq tensors)")
    if util is not None:
        lines.append(f"GPU util       {util['mean']:.1f} % [{util['lo']:.1f} - {util['hi']:.1f}] on {gpu}")
    else:
        lines.append(f"GPU util       n/a - {TRAIN_HINT}")
    src = "predictor" if mem.get("source") == "predictor" else "Horus Eq. 2 fallback, uncalibrated"
    lines.append(f"GPU memory     {mem['mean']:,.0f} MiB [{mem['lo']:,.0f} - {mem['hi']:,.0f}] ({src})")
    unk = ", ".join(f"{k} x{v}" for k, v in analysis.unknown_ops.items()) or "none"
    lines.append(f"unknown ops    {unk}")
    for note in notes:
        if note != TRAIN_HINT:
            lines.append(f"note           {note}")
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    """Add the ``predict`` command to the top-level app."""
    app.command("predict")(predict)

"""Every table ``dlsched interference evaluate`` prints, as one JSON-ready dict.

Protocols (EVALUATION.md): ``lucid-lomo`` leave-one-model-out on Lucid's time-sliced pairs;
``gavel-loao`` leave-one-architecture-out within each Gavel GPU type; ``gavel-logo``
leave-one-GPU-type-out; ``lucid-to-gavel`` (with ``all``) the end-to-end transfer check. Gavel's
utilisation is predicted from graph features (see :mod:`.utilisation`), so the Gavel rows are
end-to-end: predicted profile -> predicted slowdown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dlsched.predictors.interference.evaluation.folds import (
    Fold,
    leave_one_gpu_out,
    leave_one_model_out,
    leave_one_model_out_per_gpu,
    transfer,
)
from dlsched.predictors.interference.evaluation.run import evaluate_folds
from dlsched.predictors.interference.evaluation.utilisation import with_predicted_utilisation
from dlsched.predictors.interference.registry import MODELS
from dlsched.profiles import load_gavel, load_lucid, profiles_dir

DATASETS = ("lucid", "gavel", "all")
DEFAULT_MODELS = ("constant-1", "constant-2", "horus-curve", "pair-forest")
#: figures EVALUATION.md quotes for Lucid (looser grouping): the targets to beat
QUOTED_LUCID_MAPE = {"horus-curve": 0.081, "pair-forest": 0.084}

PROTOCOL_TEXT = {
    "lucid-lomo": "Lucid, leave-one-model-out (a pair is tested when either model is held out)",
    "gavel-loao": "Gavel, leave-one-architecture-out within each GPU type (K80, P100, V100)",
    "gavel-logo": "Gavel, leave-one-GPU-type-out",
    "lucid-to-gavel": "fitted on Lucid, tested per GPU type on Gavel's ResNet-18/50, Transformer and LM pairs "
                      "(rankings transfer, absolute values cannot: time-slicing vs MPS)",
}
#: Gavel architectures that Lucid also profiled (EVALUATION.md's end-to-end check)
TRANSFER_MODELS = ("ResNet-18", "ResNet-50", "Transformer", "LM")


def _protocols(directory: Path, dataset: str) -> tuple[dict[str, list[Fold]], list[str]]:
    folds: dict[str, list[Fold]] = {}
    notes: list[str] = []
    if dataset in ("lucid", "all"):
        lucid = load_lucid(directory)
        notes += lucid.notes
        folds["lucid-lomo"] = leave_one_model_out(lucid.pairs)
    if dataset in ("gavel", "all"):
        gavel = load_gavel(directory)
        gavel, util_note = with_predicted_utilisation(gavel)
        notes += gavel.notes + [util_note]
        folds["gavel-loao"] = leave_one_model_out_per_gpu(gavel.pairs)
        folds["gavel-logo"] = leave_one_gpu_out(gavel.pairs)
        if dataset == "all":
            folds["lucid-to-gavel"] = transfer(lucid.pairs, gavel.pairs, TRANSFER_MODELS)
    return folds, notes


def interference_report(directory: str | Path | None = None, dataset: str = "all",
                        models: Sequence[str] = DEFAULT_MODELS,
                        factories: dict[str, Callable] | None = None) -> dict[str, Any]:
    """Score ``models`` (registry names) under every protocol of ``dataset``."""
    if dataset not in DATASETS:
        raise ValueError(f"--dataset: unknown value {dataset!r}; choose one of {', '.join(DATASETS)}")
    factories = factories or MODELS
    unknown = [m for m in models if m not in factories]
    if unknown:
        raise ValueError(f"--models: unknown model(s) {', '.join(unknown)}; known: {', '.join(factories)}")
    folder = profiles_dir(directory)
    folds, notes = _protocols(folder, dataset)
    report: dict[str, Any] = {"profiles": str(folder), "notes": notes, "protocols": {}}
    for proto, proto_folds in folds.items():
        report["protocols"][proto] = {
            "description": PROTOCOL_TEXT[proto], "folds": [f.name for f in proto_folds],
            "models": {m: evaluate_folds(factories[m], proto_folds) for m in models}}
    if "lucid-lomo" in report["protocols"]:
        report["quoted_lucid_mape"] = dict(QUOTED_LUCID_MAPE)
    return report

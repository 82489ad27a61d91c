"""Fold assignment for group cross-validation, fixed in code so numbers stay comparable.

EVALUATION.md asks to split by architecture and to keep the assignment in the repository.
A fold is a pure function of the group name (SHA-256, modulo k): adding rows or families later
never moves an existing family to another fold.
"""

from __future__ import annotations

import hashlib
import re

#: Lucid's 14 models grouped for leave-one-family-out (EVALUATION.md).
LUCID_FAMILIES: dict[str, str] = {
    "ResNet18": "classic_cnn", "ResNet50": "classic_cnn", "VGG": "classic_cnn",
    "MobileNetV2": "mobile", "MobileNetV3": "mobile", "EfficientNet": "mobile",
    "BERT": "sequence", "Transformer": "sequence", "LSTM": "sequence",
    "DCGAN": "other", "PointNet": "other", "NeuMF": "other",
    "PPO": "rl", "TD3": "rl",
}

_FAMILY_RE = re.compile(r"^([a-z]+?)(?=v\d|\d|_|$)")


def stable_fold(group: str, k: int) -> int:
    """Fold index of a group: SHA-256 of its name modulo ``k``."""
    return int(hashlib.sha256(group.encode("utf-8")).hexdigest(), 16) % k


def timm_family(model: str) -> str:
    """Family prefix of a TIMM model name: ``resnet50d`` -> ``resnet``, ``swinv2_cr_tiny`` ->
    ``swin``, ``tf_efficientnet_b3`` -> ``efficientnet`` (the tf_/legacy_ ports are the same
    architecture, so they must sit in the same fold)."""
    name = re.sub(r"^(tf_|legacy_)", "", model.lower())
    m = _FAMILY_RE.match(name)
    return m.group(1) if m else name


def lucid_family(model: str) -> str:
    """Family of a Lucid model name; unknown models form their own family."""
    return LUCID_FAMILIES.get(model, model)

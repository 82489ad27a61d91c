"""Zoo entries and the mapping from profile-table model names to zoo names.

Builders are referenced by "module:function" strings so that importing the registry does not
import torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ZooEntry:
    """How to build one zoo model; ``seq_axes[i]`` marks input i's sequence axis (or None)."""

    builder: str
    input_names: tuple[str, ...]
    seq_axes: tuple[int | None, ...] = ()
    default_seq: int | None = None
    description: str = ""


_V = "dlsched.graph.zoo.vision"
_G = "dlsched.graph.zoo.generative"
_S = "dlsched.graph.zoo.small"
_Q = "dlsched.graph.zoo.sequence"
_H = "dlsched.graph.zoo.hf"

ZOO: dict[str, ZooEntry] = {
    "resnet18_cifar": ZooEntry(f"{_V}:build_resnet18_cifar", ("image",), description="ResNet-18, CIFAR stem, 32x32, 10 classes"),
    "resnet50": ZooEntry(f"{_V}:build_resnet50", ("image",), description="ResNet-50 (v1.5), 224x224, 1000 classes"),
    "vgg11_cifar": ZooEntry(f"{_V}:build_vgg11_cifar", ("image",), description="VGG-11 with BatchNorm, 32x32, 10 classes"),
    "mobilenet_v2_cifar": ZooEntry(f"{_V}:build_mobilenet_v2_cifar", ("image",), description="MobileNetV2, CIFAR strides, 32x32"),
    "mobilenet_v3_large": ZooEntry(f"{_V}:build_mobilenet_v3_large", ("image",), description="MobileNetV3-Large, 224x224"),
    "efficientnet_b0_cifar": ZooEntry(f"{_V}:build_efficientnet_b0_cifar", ("image",), description="EfficientNet-B0, stride-1 stem, 32x32"),
    "dcgan": ZooEntry(f"{_G}:build_dcgan", ("z", "real"), description="DCGAN G+D step, 64x64 (LSUN)"),
    "cyclegan": ZooEntry(f"{_G}:build_cyclegan", ("real_a", "real_b"), description="CycleGAN 2xG(9 res blocks)+2xPatchGAN, 256x256"),
    "pointnet_cls": ZooEntry(f"{_G}:build_pointnet_cls", ("points",),
                             description="PointNet classification (input T-Net), 2500 points, 16 classes (ShapeNet)"),
    "pointnet": ZooEntry(f"{_G}:build_pointnet", ("points",), description="PointNet part segmentation, 2500 points, 4 parts"),
    "neumf": ZooEntry(f"{_S}:build_neumf", ("user", "item"), description="NeuMF, MovieLens-1M, factor 8, MLP 64-32-16-8"),
    "ppo_lunarlander": ZooEntry(f"{_S}:build_ppo_lunarlander", ("obs",), description="SB3 PPO MlpPolicy 64-64 tanh"),
    "td3_bipedalwalker": ZooEntry(f"{_S}:build_td3_bipedalwalker", ("obs", "action"), description="SB3 TD3 actor + twin critics 400-300"),
    "a3c_pong": ZooEntry(f"{_S}:build_a3c_pong", ("frame", "hx", "cx"), description="A3C 4xconv + LSTMCell(256), 42x42"),
    "recommendation_vae": ZooEntry(f"{_S}:build_recommendation_vae", ("ratings",), description="VAE-CF autoencoder, ML-20M (20108 items)"),
    "lstm_lm": ZooEntry(f"{_Q}:build_lstm_lm", ("tokens",), (1,), 35, "word LSTM LM, WikiText-2 vocab 33278, 2x200, bptt 35"),
    "transformer": ZooEntry(f"{_Q}:build_transformer", ("src", "tgt"), (1, 1), 32, "Transformer base 6+6 layers, d 512, Multi30k"),
    "bert_base_squad": ZooEntry(f"{_H}:build_bert_base_squad", ("input_ids",), (1,), 384, "BERT-base QA head, seq 384"),
    "gpt2_small": ZooEntry(f"{_H}:build_gpt2_small", ("input_ids",), (1,), 512, "GPT-2 small (124M) LM head, seq 512"),
    "bert_large": ZooEntry(f"{_H}:build_bert_large", ("input_ids",), (1,), 512, "BERT-large (335M) encoder, seq 512"),
    "gpt2_medium": ZooEntry(f"{_H}:build_gpt2_medium", ("input_ids",), (1,), 1024, "GPT-2 medium (355M) LM head, seq 1024"),
    "gpt2_large": ZooEntry(f"{_H}:build_gpt2_large", ("input_ids",), (1,), 1024, "GPT-2 large (774M) LM head, seq 1024"),
    "vit_b_16": ZooEntry(f"{_H}:build_vit_b_16", ("pixel_values",), description="ViT-B/16 (86M), 224x224, 1000 classes"),
}
ZOO_NAMES: tuple[str, ...] = tuple(ZOO)

#: Lucid ``single_data.csv`` / ``colocate_info.csv`` ``model`` column -> zoo name.
LUCID_MODELS: dict[str, str] = {
    "BERT": "bert_base_squad", "DCGAN": "dcgan", "EfficientNet": "efficientnet_b0_cifar", "LSTM": "lstm_lm",
    "MobileNetV2": "mobilenet_v2_cifar", "MobileNetV3": "mobilenet_v3_large", "NeuMF": "neumf",
    "PPO": "ppo_lunarlander", "PointNet": "pointnet_cls", "ResNet18": "resnet18_cifar", "ResNet50": "resnet50",
    "TD3": "td3_bipedalwalker", "Transformer": "transformer", "VGG": "vgg11_cifar",
}
#: Gavel ``model`` column (job type without the batch size) -> zoo name.
GAVEL_MODELS: dict[str, str] = {
    "ResNet-18": "resnet18_cifar", "ResNet-50": "resnet50", "Transformer": "transformer", "LM": "lstm_lm",
    "Recommendation": "recommendation_vae", "A3C": "a3c_pong", "CycleGAN": "cyclegan",
}


def zoo_name_for(profile_model: str) -> str:
    """Zoo name for a Lucid or Gavel model name (also accepts 'ResNet-18 (batch size 32)')."""
    key = profile_model.split(" (batch size")[0].strip()
    for table in (LUCID_MODELS, GAVEL_MODELS):
        if key in table:
            return table[key]
    if key in ZOO:
        return key
    raise KeyError(f"no zoo model for profile name {profile_model!r}; known: "
                   f"{sorted(LUCID_MODELS) + sorted(GAVEL_MODELS)}")

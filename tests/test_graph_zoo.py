"""Zoo exports: exact op counts, a cross-check against torch's FlopCounterMode, symbolic
sequence length on an HF model, the on-disk cache and the profile-name mapping."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dlsched.graph import analyze

torch = pytest.importorskip("torch")

from dlsched.graph.zoo import (  # noqa: E402  (after the torch skip: the zoo needs torch)
    GAVEL_MODELS,
    LUCID_MODELS,
    ZOO,
    ZOO_NAMES,
    export_model,
    zoo_name_for,
)


@pytest.fixture(scope="session")
def exported() -> Callable[[str], bytes]:
    """Export each zoo model at most once per test session (no user cache touched)."""
    memo: dict[str, bytes] = {}

    def get(name: str) -> bytes:
        if name not in memo:
            memo[name] = export_model(name)
        return memo[name]

    return get


def test_profile_names_map_to_zoo() -> None:
    assert set(LUCID_MODELS.values()) | set(GAVEL_MODELS.values()) <= set(ZOO_NAMES)
    assert len(LUCID_MODELS) == 14 and len(GAVEL_MODELS) == 7
    assert zoo_name_for("ResNet-18 (batch size 32)") == "resnet18_cifar"
    assert zoo_name_for("BERT") == "bert_base_squad"
    with pytest.raises(KeyError):
        zoo_name_for("AlexNet")


def test_resnet18_cifar_exact_counts(exported: Callable[[str], bytes]) -> None:
    a = analyze(exported("resnet18_cifar"))
    f = a.features(32)
    assert a.mode == "symbolic" and a.unknown_ops == {}
    # 17 convs on the main path + 3 projection shortcuts; BN stays (training-mode export)
    assert (f["n_conv"], f["n_bn"], f["n_relu"], f["n_add"], f["n_gemm"], f["n_global_avgpool"]) == (
        20, 20, 17, 8, 1, 1)
    trainable = sum(p.numel() for p in ZOO_MODULES["resnet18_cifar"]().parameters())
    assert trainable == 11_173_962
    bn_buffers = 2 * sum(c * n for c, n in ((64, 5), (128, 5), (256, 5), (512, 5)))
    assert f["params"] == trainable + bn_buffers


def _module(name: str) -> Callable[[], torch.nn.Module]:
    import importlib

    mod, fn = ZOO[name].builder.split(":")
    return lambda: getattr(importlib.import_module(mod), fn)()[0]


ZOO_MODULES = {"resnet18_cifar": _module("resnet18_cifar")}


def test_lucid_pointnet_is_the_classification_network(exported: Callable[[str], bytes]) -> None:
    """Lucid's PointNet job trains PointNetCls (input T-Net, no feature transform, 16 ShapeNet
    classes, 2500 points); the part-segmentation net stays available as ``pointnet``."""
    assert zoo_name_for("PointNet") == "pointnet_cls" and "pointnet" in ZOO_NAMES
    f = analyze(exported("pointnet_cls")).features(4)
    assert f["n_unknown_ops"] == 0
    assert (f["n_conv"], f["n_gemm"], f["n_bn"], f["n_dropout"]) == (6, 6, 10, 1)
    # two shared MLPs 3-64-128-1024 (T-Net and main), 1x1 convs with bias, over 2500 points
    macs, biases = 3 * 64 + 64 * 128 + 128 * 1024, 64 + 128 + 1024
    assert f["flops_conv"] == 4 * 2500 * 2 * (2 * macs + biases)
    module = _module("pointnet_cls")()
    assert sum(p.numel() for p in module.parameters()) == 1_607_961


def test_conv_and_linear_flops_match_torch_flop_counter(exported: Callable[[str], bytes]) -> None:
    """FlopCounterMode counts 2 FLOPs per MAC for conv/mm and ignores bias; so do we for
    conv (bias-free here) and the Gemm minus its bias adds."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = 4
    model = ZOO_MODULES["resnet18_cifar"]().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randn(batch, 3, 32, 32))
    by_op = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    torch_conv = sum(v for k, v in by_op.items() if "convolution" in k)
    torch_mm = sum(v for k, v in by_op.items() if "mm" in k)
    f = analyze(exported("resnet18_cifar")).features(batch)
    assert f["flops_conv"] == torch_conv
    assert f["flops_matmul"] - batch * 10 == torch_mm  # Gemm bias: 1 FLOP per output


def test_lstm_lm_is_symbolic_in_sequence(exported: Callable[[str], bytes]) -> None:
    a = analyze(exported("lstm_lm"))
    assert a.symbols == {"batch": "b", "seq": "s"} and a.default_seq == 35
    assert a.features(8)["n_lstm"] == 2
    f35, f70 = a.features(8), a.features(8, 70)
    assert f70["flops"] == pytest.approx(2 * f35["flops"])  # linear in sequence length
    per_token = f35["flops_rnn"] / (8 * 35)
    h = i = 200
    assert per_token == 2 * (2 * 4 * h * (i + h) + 4 * h + 8 * h + 4 * h + 5 * h)


def test_small_models_and_cache_roundtrip(exported: Callable[[str], bytes], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from dlsched.graph import zoo

    for name in ("neumf", "ppo_lunarlander", "a3c_pong", "td3_bipedalwalker"):
        f = analyze(exported(name)).features(64)
        assert f["flops"] > 0 and f["n_unknown_ops"] == 0, name
    assert analyze(exported("a3c_pong")).features(1)["n_conv"] == 4
    monkeypatch.setenv("DLSCHED_CACHE", str(tmp_path))
    monkeypatch.setattr(zoo, "export_model", lambda name: exported(name))
    graph = zoo.build_model("neumf")
    path = zoo.model_path("neumf")
    assert path.parent == tmp_path and path.with_name(path.name + ".data").is_file()
    assert len(graph) < len(exported("neumf"))  # weights live in the side file
    a, b = analyze(graph).features(16), analyze(exported("neumf")).features(16)
    assert a == b
    import onnx

    full = onnx.load(str(path))  # loads external data next to the graph
    assert sum(t.ByteSize() for t in full.graph.initializer) > 1_000_000


def test_hf_bert_seq_quadratic_attention() -> None:
    pytest.importorskip("transformers")
    from dlsched.graph.export import export_hf_config

    a = analyze(export_hf_config("bert-tiny", 16, head="qa"))
    assert a.default_seq == 16 and a.unknown_ops == {}
    f = a.features(2, 64)
    assert (f["n_softmax"], f["n_layernorm"]) == (2, 5)
    # attention score/mix matmuls: 2 layers x 2 matmuls x 2*b*s*s*d  (d = hidden 128)
    d, layers = 128, 2
    lin = a.flops(2, 64) - a.flops(2, 32) * 2  # isolate the s^2 part: f(2s) - 2 f(s) = quadratic terms
    quad = 2 * 2 * 32 * 32 * (2 * 2 * d + 5 + 1) * layers  # scores + mix + softmax + scale per score
    assert lin == pytest.approx(quad, rel=0.02)

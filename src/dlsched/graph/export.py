"""Export PyTorch modules and Hugging Face configs to ONNX bytes, offline, with random weights.

torch/transformers are imported lazily so the analysis core works without them.  We use the
TorchScript exporter (``dynamo=False``): it needs no ``onnxscript`` and keeps batch/sequence
symbolic through ``dynamic_axes``."""

from __future__ import annotations

import io
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from dlsched.graph.analysis import SEQ_META_KEY

DEFAULT_OPSET = 17
#: modules with more parameter bytes than this export through a file with external data: an
#: in-memory ONNX protobuf cannot exceed 2 GiB (GPT-2 large already does)
LARGE_MODEL_BYTES = 1 << 30


#: rough CPU cost of an export per parameter (seconds, peak resident bytes), used only to warn
#: before one, never for a result.  In memory (GPT-2 small, 124 M parameters, measured on 2 busy
#: cores: 44 s, 3.0 GB: the weights are held by the module, the protobuf and the cache writer)
#: and through a file with external data (GPT-2 large, 774 M: 203 s of CPU, 6.5 GB peak, measured
#: 2026-12-02 at a load average of ~25; issue 37 had ~180 s and 5.2 GB)
EXPORT_COST_IN_MEMORY = (44.0 / 124.4e6, 3.0e9 / 124.4e6)
EXPORT_COST_EXTERNAL = (203.0 / 774e6, 6.5e9 / 774e6)


class ExportError(RuntimeError):
    """Export is impossible here (torch/transformers missing) or the exporter failed."""


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """What an export is about to do, known once the module is built and before tracing starts,
    so that a caller can warn about a long or large export (``on_export``)."""

    module: str          # the exported module's class name
    params: int
    param_bytes: int
    large: bool          # exported through a file with external data (over ``large_model_bytes``)

    @property
    def seconds(self) -> float:
        """Rough CPU wall time of the export (tracing, serialising, the cache write)."""
        return self.params * (EXPORT_COST_EXTERNAL if self.large else EXPORT_COST_IN_MEMORY)[0]

    @property
    def peak_bytes(self) -> float:
        """Rough peak resident memory of the exporting process."""
        return self.params * (EXPORT_COST_EXTERNAL if self.large else EXPORT_COST_IN_MEMORY)[1]


_LISTENER: ContextVar[Callable[[ExportPlan], None] | None] = ContextVar("dlsched_export_listener", default=None)


@contextmanager
def on_export(listener: Callable[[ExportPlan], None]) -> Iterator[None]:
    """Within the block, every :func:`export_torch_module` calls ``listener(plan)`` before tracing:
    the zoo builders reach the exporter through several layers, and none of them needs a parameter."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ExportError(
            "exporting needs PyTorch (CPU build is enough): pip install 'dlsched[export]'"
        ) from exc
    return torch


def export_torch_module(
    module: Any,
    example_inputs: Any,
    dynamic_batch: bool = True,
    *,
    input_names: Sequence[str] | None = None,
    seq_axes: Sequence[int | None] | None = None,
    default_seq: int | None = None,
    opset: int = DEFAULT_OPSET,
    training: bool = True,
    large_model_bytes: int = LARGE_MODEL_BYTES,
) -> bytes:
    """Export ``module`` (in eval mode) to ONNX bytes.

    A module with more than ``large_model_bytes`` of parameters is exported to a temporary file
    with its weights as external data, and only the graph comes back: its initializers keep
    their shapes and point to a weights file that is not kept (``dlsched.graph`` reads shapes
    only), so models beyond protobuf's 2 GiB limit can be analysed.

    ``dynamic_batch`` names axis 0 of every input ``batch``; ``seq_axes[i]`` (if not None) names
    that axis of input ``i`` ``seq``.  ``default_seq`` is recorded in the model's metadata so that
    ``GraphAnalysis.features`` can default the sequence length.  ``training=True`` exports the
    training-mode graph (BatchNorm computing batch statistics, Dropout present) because the
    profiled jobs train; eval mode would fold BatchNorm into the convolutions."""
    torch = _torch()
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    names = list(input_names or [f"input_{i}" for i in range(len(inputs))])
    dyn: dict[str, dict[int, str]] = {}
    for i, name in enumerate(names):
        axes: dict[int, str] = {}
        if dynamic_batch:
            axes[0] = "batch"
        if seq_axes is not None and i < len(seq_axes) and seq_axes[i] is not None:
            axes[int(seq_axes[i])] = "seq"
        if axes:
            dyn[name] = axes
    module = module.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    params = list(module.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in params)
    large = param_bytes > large_model_bytes
    if (listener := _LISTENER.get()) is not None:
        inner = getattr(module, "model", module)   # the HF wrappers below hold the real model
        listener(ExportPlan(type(inner).__name__, sum(p.numel() for p in params), param_bytes, large))
    with tempfile.TemporaryDirectory() as tmp:
        target: Any = Path(tmp) / "model.onnx" if large else io.BytesIO()
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    module, inputs, str(target) if large else target, dynamo=False, opset_version=opset,
                    input_names=names, dynamic_axes=dyn or None, do_constant_folding=not training, training=mode,
                )
        except Exception as exc:
            raise ExportError(f"torch.onnx.export failed for {type(module).__name__}: {exc}") from exc
        data = _graph_only(target) if large else target.getvalue()
    if default_seq is not None:
        model = onnx.load_model_from_string(data)
        entry = model.metadata_props.add()
        entry.key, entry.value = SEQ_META_KEY, str(int(default_seq))
        data = model.SerializeToString()
    return data


def _graph_only(path: Path) -> bytes:
    """The graph of an exported file with every initializer over 1 KiB made external (to a file
    that is not kept), so the bytes stay far below protobuf's 2 GiB limit."""
    from onnx.external_data_helper import convert_model_to_external_data

    model = onnx.load(str(path), load_external_data=False)
    convert_model_to_external_data(model, all_tensors_to_one_file=True, location="weights.dropped",
                                   size_threshold=1024)
    out = path.with_name("graph.onnx")
    onnx.save_model(model, str(out))
    return out.read_bytes()


#: Offline configurations we know by name (no hub access): name -> (config class, kwargs).
HF_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "bert-base": ("BertConfig", {}),
    "bert-large": ("BertConfig", {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                                  "intermediate_size": 4096}),
    "bert-tiny": ("BertConfig", {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                                 "intermediate_size": 512}),
    "gpt2": ("GPT2Config", {}),
    "gpt2-medium": ("GPT2Config", {"n_embd": 1024, "n_layer": 24, "n_head": 16}),
    "gpt2-large": ("GPT2Config", {"n_embd": 1280, "n_layer": 36, "n_head": 20}),
    "gpt2-tiny": ("GPT2Config", {"n_embd": 128, "n_layer": 2, "n_head": 2}),
    "vit-b-16": ("ViTConfig", {}),   # ViTConfig defaults: ViT-B/16, 224x224, 12 layers, 768 wide
    "vit-tiny": ("ViTConfig", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                               "intermediate_size": 128, "image_size": 32, "patch_size": 8}),
}


def hf_config(config_or_name: Any) -> Any:
    """A transformers config object: passed through, or built from :data:`HF_CONFIGS`."""
    if not isinstance(config_or_name, str):
        return config_or_name
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover
        raise ExportError("exporting HF models needs transformers: pip install 'dlsched[export]'") from exc
    if config_or_name not in HF_CONFIGS:
        raise ExportError(
            f"unknown offline config {config_or_name!r}; known: {sorted(HF_CONFIGS)} "
            "(or pass a transformers config object; hub names are never downloaded)"
        )
    cls_name, kwargs = HF_CONFIGS[config_or_name]
    return getattr(transformers, cls_name)(**kwargs)


def _hf_wrapper(model: Any, output: str) -> Any:
    torch = _torch()

    class _Wrap(torch.nn.Module):
        """Feed token ids only and return a tensor (the exporter dislikes ModelOutput dicts)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any) -> Any:
            # an explicit all-ones mask keeps transformers off its packed-sequence detection
            # (aten::diff), which the TorchScript exporter cannot translate
            mask = torch.ones_like(input_ids)
            if output == "logits_lm":
                out = self.model(input_ids=input_ids, attention_mask=mask, use_cache=False)
            else:
                out = self.model(input_ids=input_ids, attention_mask=mask)
            if output == "qa":
                return out.start_logits, out.end_logits
            if output in ("logits", "logits_lm"):
                return out.logits
            return out.last_hidden_state

    return _Wrap()


def export_hf_config(config_or_name: Any, seq_len: int, *, head: str = "base", batch: int = 2) -> bytes:
    """Build a transformers model from a config with random weights and export it.

    ``head``: "base" (last hidden state), "qa" (BERT question answering: start/end logits) or
    "lm" (causal LM logits).  Attention uses the eager implementation so it shows up as MatMuls."""
    torch = _torch()
    import transformers

    cfg = hf_config(config_or_name)
    cfg._attn_implementation = "eager"
    auto = {"base": transformers.AutoModel, "qa": transformers.AutoModelForQuestionAnswering,
            "lm": transformers.AutoModelForCausalLM}[head]
    torch.manual_seed(0)
    model = auto.from_config(cfg)
    wrapped = _hf_wrapper(model, {"base": "hidden", "qa": "qa", "lm": "logits_lm"}[head])
    ids = torch.ones(batch, seq_len, dtype=torch.long)
    return export_torch_module(wrapped, (ids,), input_names=["input_ids"], seq_axes=[1], default_seq=seq_len)


def export_hf_vision(config_or_name: Any, *, batch: int = 2) -> bytes:
    """A transformers image classifier (ViT) from a config with random weights, exported with
    eager attention (MatMul/Softmax; the attention mode is applied when memory is estimated) and
    1000 classes unless the config says otherwise."""
    torch = _torch()
    import transformers

    cfg = hf_config(config_or_name)
    cfg._attn_implementation = "eager"
    if getattr(cfg, "num_labels", 2) == 2:
        cfg.num_labels = 1000
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(cfg)

    class _Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: Any) -> Any:
            return self.model(pixel_values=pixel_values).logits

    x = torch.randn(batch, cfg.num_channels, cfg.image_size, cfg.image_size)
    return export_torch_module(_Wrap(), (x,), input_names=["pixel_values"])

"""Transformers models of the profiles, built from configs with random weights (never from the hub)."""

from __future__ import annotations

from dlsched.graph.export import export_hf_config, export_hf_vision


def build_bert_base_squad(seq: int = 384) -> bytes:
    """bert-base-uncased geometry (BertConfig defaults) with the SQuAD span head."""
    return export_hf_config("bert-base", seq, head="qa")


def build_gpt2_small(seq: int = 512) -> bytes:
    """GPT-2 small (GPT2Config defaults: 12 layers, 768 wide) with the LM head."""
    return export_hf_config("gpt2", seq, head="lm")


def build_bert_large(seq: int = 512) -> bytes:
    """BERT-large (24 layers, 1024 wide, 16 heads, 335M) with the masked-LM head's encoder
    (last hidden state): the geometry fine-tuning and pre-training jobs train."""
    return export_hf_config("bert-large", seq, head="base")


def build_gpt2_medium(seq: int = 1024) -> bytes:
    """GPT-2 medium (24 layers, 1024 wide, 16 heads, 355M) with the LM head."""
    return export_hf_config("gpt2-medium", seq, head="lm")


def build_gpt2_large(seq: int = 1024) -> bytes:
    """GPT-2 large (36 layers, 1280 wide, 20 heads, 774M) with the LM head; exported through a
    file with external data (beyond protobuf's 2 GiB)."""
    return export_hf_config("gpt2-large", seq, head="lm")


def build_vit_b_16() -> bytes:
    """ViT-B/16 (HF ViTConfig defaults: 224x224, patch 16, 12 layers, 768 wide, 86M) classifier."""
    return export_hf_vision("vit-b-16")

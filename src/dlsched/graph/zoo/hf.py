"""Transformers models of the profiles, built from configs with random weights (never from the hub)."""

from __future__ import annotations

from dlsched.graph.export import export_hf_config


def build_bert_base_squad(seq: int = 384) -> bytes:
    """bert-base-uncased geometry (BertConfig defaults) with the SQuAD span head."""
    return export_hf_config("bert-base", seq, head="qa")


def build_gpt2_small(seq: int = 512) -> bytes:
    """GPT-2 small (GPT2Config defaults: 12 layers, 768 wide) with the LM head."""
    return export_hf_config("gpt2", seq, head="lm")

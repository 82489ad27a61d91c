"""Sequence models: word-level LSTM LM (WikiText-2) and the encoder-decoder Transformer
(Vaswani et al., Multi30k).  Inputs are (batch, seq) token ids; seq stays symbolic."""

from __future__ import annotations

import math

import torch
from torch import nn


class LSTMLM(nn.Module):
    """PyTorch word_language_model LSTM: embed 200, 2 x LSTM(200), decoder to the vocabulary."""

    def __init__(self, vocab: int = 33278, emb: int = 200, hidden: int = 200, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, layers, batch_first=True)
        self.dec = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.emb(ids))
        return self.dec(out)


def build_lstm_lm() -> tuple[nn.Module, tuple]:
    return LSTMLM(), (torch.zeros(2, 35, dtype=torch.long),)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention written with matmuls so it exports as MatMul/Softmax."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.h, self.dk = heads, d_model // heads
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.o = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.h, self.dk).transpose(1, 2)

    def forward(self, x: torch.Tensor, mem: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self._split(self.q(x)), self._split(self.k(mem)), self._split(self.v(mem))
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dk)
        if mask is not None:
            att = att.masked_fill(mask, -1e9)
        y = torch.matmul(torch.softmax(att, dim=-1), v).transpose(1, 2).reshape(x.shape)
        return self.norm(x + self.o(y))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_inner: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(), nn.Linear(d_inner, d_model))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.f(x))


class Seq2SeqTransformer(nn.Module):
    """Post-norm Transformer base: d_model 512, 8 heads, d_inner 2048, 6+6 layers, sinusoidal
    positions, causal decoder self-attention, projection to the target vocabulary."""

    def __init__(self, src_vocab: int = 5375, tgt_vocab: int = 4555, d_model: int = 512, heads: int = 8,
                 d_inner: int = 2048, layers: int = 6, max_len: int = 512) -> None:
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pos", table)
        self.enc = nn.ModuleList(nn.ModuleList([MultiHeadAttention(d_model, heads), FeedForward(d_model, d_inner)])
                                 for _ in range(layers))
        self.dec = nn.ModuleList(nn.ModuleList([MultiHeadAttention(d_model, heads), MultiHeadAttention(d_model, heads),
                                                FeedForward(d_model, d_inner)]) for _ in range(layers))
        self.proj = nn.Linear(d_model, tgt_vocab, bias=False)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = self.src_emb(src) + self.pos[: src.shape[1]]
        for att, ff in self.enc:
            x = ff(att(x, x))
        s = tgt.shape[1]
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        y = self.tgt_emb(tgt) + self.pos[:s]
        for self_att, cross, ff in self.dec:
            y = ff(cross(self_att(y, y, causal), x))
        return self.proj(y)


def build_transformer() -> tuple[nn.Module, tuple]:
    ids = torch.zeros(2, 32, dtype=torch.long)
    return Seq2SeqTransformer(), (ids, ids)

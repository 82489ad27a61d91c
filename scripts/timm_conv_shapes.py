#!/usr/bin/env python3
"""Every convolution a TIMM architecture runs, from its own PyTorch code at batch 2 on the meta
device (shapes only, no arithmetic, no weights): one CSV row per model with the counts and
per-sample sizes that cuDNN's workspace choice depends on (issue 36: which graphs hold memory
outside their tensors). Catches functional calls too (timm's BlurPool2d calls ``F.conv2d``),
because it records ``aten.convolution`` under a dispatch mode, not module hooks.

    nice -n 15 python scripts/timm_conv_shapes.py MODEL [MODEL ...] --out runs/timm_conv_shapes.csv

Needs torch and timm (``pip install 'dlsched[timm]'``); ``scripts/memory_excess.py --conv-shapes``
reads the CSV. Columns: n_conv, n_grouped (1 < groups < input channels), n_depthwise (groups =
input channels > 1), n_frozen (a filter without gradient, e.g. an anti-aliasing blur),
conv_in_mib (sum of conv inputs per sample), grouped_in_mib / depthwise_in_mib (their part),
max_in_mib (the largest conv input per sample), max_kernel (largest kernel side), n_large_kernel
(kernel side >= 7).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

MIB = 2.0**20
COLUMNS = ("model", "status", "n_conv", "n_grouped", "n_depthwise", "n_frozen", "conv_in_mib", "grouped_in_mib",
           "depthwise_in_mib", "max_in_mib", "max_kernel", "n_large_kernel")


def conv_shapes(name: str) -> dict[str, object]:
    """The convolutions of one forward pass of ``name`` (train mode, batch 2, fp32; sizes per sample)."""
    import timm
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    convs: list[tuple[tuple[int, ...], tuple[int, ...], int, bool]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's signature
            if func is torch.ops.aten.convolution.default:
                x, w = args[0], args[1]
                convs.append((tuple(x.shape), tuple(w.shape), int(args[8]), bool(w.requires_grad)))
            return func(*args, **(kwargs or {}))

    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False)
    model.train()
    size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    x = torch.empty(2, *size, device="meta")   # 2: a batch norm in training mode needs more than 1 value
    with Record():
        model(x)
    row: dict[str, object] = {"model": name, "status": "ok", "n_conv": len(convs), "n_grouped": 0, "n_depthwise": 0,
                              "n_frozen": 0, "conv_in_mib": 0.0, "grouped_in_mib": 0.0, "depthwise_in_mib": 0.0,
                              "max_in_mib": 0.0, "max_kernel": 0, "n_large_kernel": 0}
    for xs, ws, groups, grad in convs:
        n_in = 1
        for v in xs[1:]:
            n_in *= int(v)
        mib = 4.0 * n_in / MIB
        cin = int(xs[1])
        row["conv_in_mib"] += mib
        row["max_in_mib"] = max(row["max_in_mib"], mib)
        k = max(int(v) for v in ws[2:]) if len(ws) > 2 else 1
        row["max_kernel"] = max(row["max_kernel"], k)
        row["n_large_kernel"] += int(k >= 7)
        row["n_frozen"] += int(not grad)
        if groups > 1 and groups == cin:
            row["n_depthwise"] += 1
            row["depthwise_in_mib"] += mib
        elif groups > 1:
            row["n_grouped"] += 1
            row["grouped_in_mib"] += mib
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    done = set()
    if args.out.is_file():
        with open(args.out, newline="") as fh:
            done = {r["model"] for r in csv.DictReader(fh)}
    new = not args.out.is_file()
    with open(args.out, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        if new:
            w.writeheader()
        for name in args.models:
            if name in done:
                continue
            try:
                row = conv_shapes(name)
            except Exception as exc:  # noqa: BLE001 - recorded per model, the run goes on
                row = {"model": name, "status": f"error: {type(exc).__name__}: {str(exc)[:120]}"}
            w.writerow(row)
            fh.flush()
            print(name, row.get("status"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

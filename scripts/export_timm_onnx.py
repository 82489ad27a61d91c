"""Export the TIMM architectures of GPUMemNet's memory table to slim training-mode ONNX graphs.

Runs on CPU with random weights (``timm.create_model(..., pretrained=False)`` downloads nothing).
Each graph is written with its large weights moved to external data, and that data file is then
deleted: dlsched's analysis reads shapes only (see ``dlsched.graph.loader``), so the cache holds
~100 KB per model instead of up to 1 GB, and models over protobuf's 2 GiB limit export too.

Families are visited round-robin (in a fixed hashed order) so a time budget yields an even sample.
Every attempt is appended to ``<out>/manifest.jsonl`` (name, family, status, seconds, input size,
error), which is the record of what was exported.  Re-running skips what is already there.

    nice -n 15 python scripts/export_timm_onnx.py \
        ../shared/profiles/itu_gpumem/timm_faketensor_vs_measured_memory.csv \
        --out ~/.cache/dlsched/timm-onnx --budget-min 40

Needs torch, timm and onnx only (``pip install 'dlsched[export]'``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

_FAMILY_RE = re.compile(r"^([a-z]+?)(?=v\d|\d|_|$)")
CAP_MIB = 40_000


def family(model: str) -> str:
    """Same rule as ``dlsched.predictors.ml.folds.timm_family`` (kept standalone on purpose)."""
    name = re.sub(r"^(tf_|legacy_)", "", model.lower())
    m = _FAMILY_RE.match(name)
    return m.group(1) if m else name


def usable_models(csv_path: Path) -> list[str]:
    """Models with at least one row that is neither censored (>= 40 GB) nor a failed run."""
    keep: set[str] = set()
    seen: set[str] = set()
    with open(csv_path, newline="") as fh:
        for row in csv.DictReader(fh):
            name = re.sub(r"_\d+\.out$", "", row["Filename"])
            seen.add(name)
            mem, fake = float(row["Max GPU Memory (MiB)"]), float(row["Last Numeric Value"])
            if mem < CAP_MIB and fake <= 40960 and mem >= 0.5 * fake:
                keep.add(name)
    return sorted(keep)


def round_robin(models: list[str]) -> list[str]:
    """Order models so that every family gets its first member before any gets a second."""
    fams: dict[str, list[str]] = defaultdict(list)
    for m in sorted(models, key=lambda s: hashlib.sha256(s.encode()).hexdigest()):
        fams[family(m)].append(m)
    order = sorted(fams, key=lambda f: hashlib.sha256(f.encode()).hexdigest())
    out: list[str] = []
    depth = 0
    while len(out) < len(models):
        for f in order:
            if depth < len(fams[f]):
                out.append(fams[f][depth])
        depth += 1
    return out


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout()


def export_one(name: str, dest: Path, timeout_s: int) -> dict[str, object]:
    """Build ``name`` with random weights, export the training graph, keep shapes only."""
    import onnx
    import timm
    import torch
    from onnx.external_data_helper import convert_model_to_external_data

    t0 = time.time()
    signal.alarm(timeout_s)
    try:
        model = timm.create_model(name, pretrained=False)
        size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
        model.train()
        x = torch.randn(2, *size)
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "m.onnx"
            with torch.no_grad():
                torch.onnx.export(model, (x,), str(raw), dynamo=False, opset_version=17,
                                  input_names=["input_0"], dynamic_axes={"input_0": {0: "batch"}},
                                  do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
            proto = onnx.load(str(raw), load_external_data=False)
            convert_model_to_external_data(proto, all_tensors_to_one_file=True, location="weights.bin",
                                           size_threshold=1024)
            onnx.save_model(proto, str(Path(tmp) / "slim.onnx"))
            os.replace(Path(tmp) / "slim.onnx", dest)  # weights.bin stays behind and is deleted
        return {"status": "ok", "input_size": list(size), "seconds": round(time.time() - t0, 1),
                "params": int(sum(p.numel() for p in model.parameters()))}
    finally:
        signal.alarm(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache" / "dlsched" / "timm-onnx")
    ap.add_argument("--budget-min", type=float, default=40.0, help="stop starting new exports after this")
    ap.add_argument("--timeout-s", type=int, default=180, help="give up on one model after this")
    ap.add_argument("--limit", type=int, default=0, help="at most this many new exports (0: no limit)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = args.out / "manifest.jsonl"
    tried = set()
    if manifest.is_file():
        tried = {json.loads(line)["name"] for line in manifest.read_text().splitlines() if line.strip()}
    todo = [m for m in round_robin(usable_models(args.csv)) if m not in tried]
    print(f"{len(todo)} models to try, budget {args.budget_min:.0f} min -> {args.out}", flush=True)
    deadline = time.time() + 60 * args.budget_min
    done = 0
    for name in todo:
        if time.time() > deadline or (args.limit and done >= args.limit):
            break
        rec: dict[str, object] = {"name": name, "family": family(name)}
        t0 = time.time()
        try:
            rec.update(export_one(name, args.out / f"{name}.onnx", args.timeout_s))
        except _Timeout:
            rec.update(status="timeout", seconds=round(time.time() - t0, 1))
        except Exception as exc:  # noqa: BLE001 - record and go on: one odd architecture must not stop the run
            rec.update(status="error", seconds=round(time.time() - t0, 1), error=str(exc).splitlines()[0][:300])
        with open(manifest, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        done += 1  # noqa: SIM113 - also read by the budget check above
        print(f"[{done}] {name}: {rec['status']} ({rec['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measure real training jobs on one GPU: peak memory, utilisation, step time, and co-located pairs.

For each model of the zoo (CNNs, transformers with eager and with fused attention, an LSTM, a
recommendation model) and 2-3 batch sizes it trains a few steps (Adam, fp32, random data) and
records ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved``, NVML's used memory of the
process (the figure nvidia-smi shows, CUDA context included), NVML's mean utilisation over the
measured steps, and the mean step time. Then it runs pairs of jobs time-sliced on the same GPU
(two processes, default compute mode) and records each job's step rate alone and together.

Every model/batch group runs in a fresh child process (ascending batches, ``empty_cache``
between them) so one job's cached blocks never inflate another's peak. Output, in ``--out``:
``jobs.csv`` (one row per model x batch), ``pairs.csv`` (one row per pair), ``stack.json``
(GPU, driver, CUDA, cuDNN, torch, transformers, ``CUDA_MODULE_LOADING``) -- commit them under
``src/dlsched/predictors/resources/data/measured/<gpu>-<date>/`` and ``dlsched predictor
evaluate`` scores the memory model on them as a held-out set.

    python scripts/measure_gpu_jobs.py --out runs/measured            # one GPU, < 10 min on an H100
    python scripts/measure_gpu_jobs.py --dry-run --out /tmp/m         # CPU, tiny steps: the plumbing
    python scripts/measure_gpu_jobs.py --cudnn-benchmark both --models resnet50 --out runs/cudnn
                                        # each job with cuDNN autotuning off and on (issue 36's open question)

Needs torch and transformers (``pip install 'dlsched[export]'``); NVML through ``pynvml``
(nvidia-ml-py) when installed, else ``nvidia-smi``; on CPU (``--dry-run``) the GPU columns stay empty.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"

#: (label, zoo name, kind, attention, batch sizes, seq): kind "zoo" builds the zoo's torch module,
#: "hf" a transformers model with the zoo entry's geometry and the named attention implementation
MODELS: list[tuple[str, str, str, str, tuple[int, ...], int]] = [
    ("resnet18_cifar", "resnet18_cifar", "zoo", "", (64, 256, 512), 0),
    ("resnet50", "resnet50", "zoo", "", (32, 64, 128), 0),
    ("vgg11_cifar", "vgg11_cifar", "zoo", "", (64, 256), 0),
    ("mobilenet_v2_cifar", "mobilenet_v2_cifar", "zoo", "", (64, 256), 0),
    ("mobilenet_v3_large", "mobilenet_v3_large", "zoo", "", (32, 128), 0),
    ("efficientnet_b0_cifar", "efficientnet_b0_cifar", "zoo", "", (64, 128), 0),
    ("dcgan", "dcgan", "zoo", "", (64, 256), 0),
    ("cyclegan", "cyclegan", "zoo", "", (1, 2), 0),
    ("pointnet_cls", "pointnet_cls", "zoo", "", (32, 64), 0),
    ("neumf", "neumf", "zoo", "", (1024, 8192), 0),
    ("recommendation_vae", "recommendation_vae", "zoo", "", (64, 512), 0),
    ("lstm_lm", "lstm_lm", "zoo", "", (20, 80), 0),
    ("a3c_pong", "a3c_pong", "zoo", "", (16, 64), 0),
    ("transformer_eager", "transformer", "zoo", "eager", (32, 128), 0),
    ("bert_base_eager", "bert_base_squad", "hf", "eager", (8, 16, 32), 384),
    ("bert_base_fused", "bert_base_squad", "hf", "sdpa", (8, 16, 32), 384),
    ("bert_large_fused", "bert_large", "hf", "sdpa", (4, 8), 512),
    ("gpt2_small_eager", "gpt2_small", "hf", "eager", (4, 8), 512),
    ("gpt2_small_fused", "gpt2_small", "hf", "sdpa", (4, 8, 16), 512),
    ("gpt2_medium_fused", "gpt2_medium", "hf", "sdpa", (2, 4), 1024),
    ("vit_b_16_eager", "vit_b_16", "hf", "eager", (32, 64), 0),
    ("vit_b_16_fused", "vit_b_16", "hf", "sdpa", (32, 64), 0),
]
#: co-located pairs (labels of MODELS, first batch size of each)
PAIRS = [("resnet18_cifar", "resnet50"), ("resnet50", "bert_base_fused"), ("lstm_lm", "neumf"),
         ("vgg11_cifar", "mobilenet_v2_cifar"), ("gpt2_small_fused", "resnet18_cifar"),
         ("recommendation_vae", "dcgan"), ("bert_base_eager", "lstm_lm"), ("efficientnet_b0_cifar", "pointnet_cls"),
         ("vit_b_16_fused", "a3c_pong"), ("transformer_eager", "mobilenet_v3_large")]
HF_GEOMETRY = {"bert_base_squad": ("bert-base", "qa"), "bert_large": ("bert-large", "base"),
               "gpt2_small": ("gpt2", "lm"), "gpt2_medium": ("gpt2-medium", "lm"), "vit_b_16": ("vit-b-16", "vit")}
JOB_FIELDS = ["label", "model", "attention", "batch", "seq", "optimizer", "amp", "cudnn_benchmark", "device", "steps",
              "step_s",
              "max_allocated_mib", "max_reserved_mib", "nvml_used_mib", "nvml_util_mean", "error"]
PAIR_FIELDS = ["a", "b", "batch_a", "batch_b", "seconds", "rate_a_alone", "rate_b_alone", "rate_a_together",
               "rate_b_together", "speed_a", "speed_b", "error"]


# ----------------------------------------------------------------------------- child side
def _build(model: str, kind: str, attention: str, seq: int) -> tuple[Any, Any]:
    """(module, make_inputs(batch) -> (args, kwargs)); the loss is computed by :func:`_loss`."""
    import torch

    if kind == "zoo":
        import importlib

        from dlsched.graph.zoo.registry import ZOO

        mod, fn = ZOO[model].builder.split(":")
        module, example = getattr(importlib.import_module(mod), fn)()

        def inputs(b: int) -> tuple[tuple, dict]:
            out = []
            for x in example:
                reps = [math.ceil(b / x.shape[0])] + [1] * (x.dim() - 1)
                out.append(x.repeat(*reps)[:b])
            return tuple(out), {}
        return module, inputs
    import transformers

    from dlsched.graph.export import hf_config

    name, head = HF_GEOMETRY[model]
    cfg = hf_config(name)
    cfg._attn_implementation = attention
    torch.manual_seed(0)
    if head == "vit":
        cfg.num_labels = 1000
        module = transformers.ViTForImageClassification(cfg)
        return module, lambda b: ((), {"pixel_values": torch.randn(b, 3, cfg.image_size, cfg.image_size),
                                      "labels": torch.zeros(b, dtype=torch.long)})
    cls = {"qa": transformers.BertForQuestionAnswering, "base": transformers.BertModel,
           "lm": transformers.GPT2LMHeadModel}[head]
    module = cls(cfg)

    def hf_inputs(b: int) -> tuple[tuple, dict]:
        ids = torch.randint(0, 1000, (b, seq))
        kw: dict[str, Any] = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if head == "qa":
            kw |= {"start_positions": torch.zeros(b, dtype=torch.long), "end_positions": torch.zeros(b, dtype=torch.long)}
        elif head == "lm":
            kw["labels"] = ids
        return (), kw
    return module, hf_inputs


def _loss(out: Any) -> Any:
    """The model's own loss where it has one (HF heads with labels), else the mean of every float output."""
    import torch

    if getattr(out, "loss", None) is not None:
        return out.loss
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state.float().mean()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(o.float().mean() for o in outs if torch.is_tensor(o) and o.is_floating_point())


def _to(obj: Any, device: str) -> Any:
    if isinstance(obj, tuple):
        return tuple(_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj.to(device) if hasattr(obj, "to") else obj


class _Nvml:
    """This process's used memory and the device's utilisation, sampled in a thread."""

    def __init__(self, device: str) -> None:
        self.ok, self.handle, self.nv, self.cuda = False, None, None, device.startswith("cuda")
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not self.cuda:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            idx = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(max(idx, 0))
            self.ok = True
        except Exception:  # noqa: BLE001 - no NVML bindings: nvidia-smi below
            self.ok = False

    def _read(self) -> tuple[float, float]:
        pid = os.getpid()
        if self.ok:
            util = float(self.nv.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            used = next((p.usedGpuMemory for p in self.nv.nvmlDeviceGetComputeRunningProcesses(self.handle)
                         if p.pid == pid and p.usedGpuMemory), None)
            if used is None:
                used = self.nv.nvmlDeviceGetMemoryInfo(self.handle).used
            return util, used / 2**20
        q = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=5, check=False).stdout.split("\n")[0].split(",")
        return float(q[0]), float(q[1])

    def __enter__(self) -> _Nvml:  # noqa: PYI034 - a private helper, never subclassed
        self.samples = []
        if not self.cuda:
            return self
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(Exception):  # a failed read loses one sample, nothing else
                    self.samples.append(self._read())
                time.sleep(0.05)
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def summary(self) -> tuple[float, float]:
        if not self.samples:
            return math.nan, math.nan
        return max(s[1] for s in self.samples), sum(s[0] for s in self.samples) / len(self.samples)


def child_jobs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Train ``spec``'s model at each batch size (ascending) for a few steps; one row each."""
    import torch

    device = spec["device"]
    bench = bool(spec.get("cudnn_benchmark", False))
    torch.backends.cudnn.benchmark = bench   # autotuned convolutions pick a workspace per input shape
    module, inputs = _build(spec["model"], spec["kind"], spec["attention"] or "eager", spec["seq"])
    module = module.to(device).train()
    opt = torch.optim.Adam(module.parameters(), lr=1e-4)
    rows = []
    for b in sorted(spec["batches"]):
        row = {"label": spec["label"], "model": spec["model"], "attention": spec["attention"] or "", "batch": b,
               "seq": spec["seq"], "optimizer": "adam", "amp": 0, "cudnn_benchmark": int(bench), "device": device,
               "steps": spec["steps"], "error": ""}
        try:
            args, kw = _to(inputs(b), device)
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            for _ in range(spec["warmup"]):
                opt.zero_grad(set_to_none=True)
                _loss(module(*args, **kw)).backward()
                opt.step()
            nv = _Nvml(device)
            with nv:
                sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
                sync()
                t0 = time.perf_counter()
                for _ in range(spec["steps"]):
                    opt.zero_grad(set_to_none=True)
                    _loss(module(*args, **kw)).backward()
                    opt.step()
                sync()
                row["step_s"] = (time.perf_counter() - t0) / spec["steps"]
            row["nvml_used_mib"], row["nvml_util_mean"] = nv.summary()
            if device.startswith("cuda"):
                row["max_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
                row["max_reserved_mib"] = torch.cuda.max_memory_reserved() / 2**20
        except Exception as exc:  # noqa: BLE001 - OOM or a model that cannot run: recorded, not fatal
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        rows.append(row)
    return rows


def child_rate(spec: dict[str, Any]) -> dict[str, Any]:
    """Steps per second of one job for ``spec["seconds"]`` after a warm-up; waits for a start time
    so that the two jobs of a pair measure the same interval."""
    import torch

    device = spec["device"]
    module, inputs = _build(spec["model"], spec["kind"], spec["attention"] or "eager", spec["seq"])
    module = module.to(device).train()
    opt = torch.optim.Adam(module.parameters(), lr=1e-4)
    args, kw = _to(inputs(spec["batch"]), device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        _loss(module(*args, **kw)).backward()
        opt.step()
    step()
    sync()
    while time.time() < spec["start_at"]:
        time.sleep(0.01)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < spec["seconds"] or n == 0:
        step()
        n += 1
    sync()
    return {"rate": n / (time.perf_counter() - t0)}


# ----------------------------------------------------------------------------- parent side
def _run_child(mode: str, spec: dict[str, Any], timeout: float) -> Any:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if spec["device"] == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run([sys.executable, __file__, "--child", mode, json.dumps(spec)], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("{", "["))]
    if proc.returncode != 0 or not lines:
        raise RuntimeError((proc.stderr.strip().splitlines() or ["child failed"])[-1][:300])
    return json.loads(lines[-1])


def _spawn_rate(spec: dict[str, Any]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if spec["device"] == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.Popen([sys.executable, __file__, "--child", "rate", json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _collect(procs: list[subprocess.Popen], timeout: float) -> list[float]:
    rates = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            raise RuntimeError((err.strip().splitlines() or ["child failed"])[-1][:300])
        rates.append(float(json.loads(lines[-1])["rate"]))
    return rates


def stack_info(device: str) -> dict[str, Any]:
    """The software and hardware the figures were measured on."""
    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node(), "device": device,
                            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING", "(unset: torch sets LAZY)")}
    try:
        import torch

        info |= {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
        if device.startswith("cuda") and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["gpu_memory_mib"] = torch.cuda.get_device_properties(0).total_memory / 2**20
    except ImportError:
        pass
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=10, check=False)
        if q.returncode == 0:
            info["driver"] = q.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _write(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/measured"))
    ap.add_argument("--dry-run", action="store_true", help="CPU, batch 1-2, one step, 1 s pairs: checks the plumbing")
    ap.add_argument("--models", default="", help="comma-separated labels (default: all)")
    ap.add_argument("--pairs", type=int, default=len(PAIRS), help="how many of the co-located pairs")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--pair-seconds", type=float, default=6.0)
    ap.add_argument("--cudnn-benchmark", choices=("off", "on", "both"), default="off",
                    help="torch.backends.cudnn.benchmark for the jobs (off: PyTorch's default; on: timm's train.py; "
                         "both: every model twice, a row each, to measure what autotuning adds to the peak)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, spec = args.child[0], json.loads(args.child[1])
        print(json.dumps(child_jobs(spec) if mode == "jobs" else child_rate(spec)))
        return 0
    import torch

    device = "cpu" if args.dry_run or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not args.dry_run:
        print("error: no CUDA device; use --dry-run to check the script on CPU", file=sys.stderr)
        return 2
    known = {m[0]: m for m in MODELS}
    chosen = [s for s in args.models.split(",") if s] or list(known)
    unknown = [s for s in chosen if s not in known]
    if unknown:
        print(f"error: --models: unknown {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    rows: list[dict[str, Any]] = []
    benches = {"off": (False,), "on": (True,), "both": (False, True)}[args.cudnn_benchmark]
    for label, bench in [(lab, b) for lab in chosen for b in benches]:
        _, model, kind, attention, batches, seq = known[label]
        spec = {"label": label, "model": model, "kind": kind, "attention": attention, "seq": min(seq, 32) if
                args.dry_run and seq else seq, "batches": [1, 2] if args.dry_run else list(batches),
                "steps": 1 if args.dry_run else args.steps, "warmup": 1 if args.dry_run else 2, "device": device,
                "cudnn_benchmark": bench}
        t0 = time.time()
        try:
            got = _run_child("jobs", spec, timeout=600)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            got = [{"label": label, "model": model, "attention": attention, "batch": b, "seq": spec["seq"],
                    "cudnn_benchmark": int(bench), "device": device, "error": str(exc)} for b in spec["batches"]]
        rows += got
        print(f"{label}{' (cudnn.benchmark)' if bench else ''}: {len(got)} batch sizes in {time.time() - t0:.1f} s "
              f"({sum(1 for r in got if r.get('error'))} failed)", flush=True)
    _write(args.out / "jobs.csv", JOB_FIELDS, rows)
    pair_rows: list[dict[str, Any]] = []
    seconds = 1.0 if args.dry_run else args.pair_seconds
    lead = 3.0 if args.dry_run else 12.0   # children build and warm up before the common start
    for a, b in [p for p in PAIRS if p[0] in chosen and p[1] in chosen][:args.pairs]:
        specs = []
        for lab in (a, b):
            _, model, kind, attention, batches, seq = known[lab]
            specs.append({"model": model, "kind": kind, "attention": attention, "device": device,
                          "seq": min(seq, 32) if args.dry_run and seq else seq,
                          "batch": 1 if args.dry_run else batches[0], "seconds": seconds})
        row: dict[str, Any] = {"a": a, "b": b, "batch_a": specs[0]["batch"], "batch_b": specs[1]["batch"],
                               "seconds": seconds, "error": ""}
        try:
            alone = []
            for s in specs:
                alone += _collect([_spawn_rate(dict(s, start_at=time.time() + lead))], timeout=300)
            start = time.time() + lead
            together = _collect([_spawn_rate(dict(s, start_at=start)) for s in specs], timeout=300)
            row |= {"rate_a_alone": alone[0], "rate_b_alone": alone[1], "rate_a_together": together[0],
                    "rate_b_together": together[1], "speed_a": together[0] / alone[0], "speed_b": together[1] / alone[1]}
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            row["error"] = str(exc)
        pair_rows.append(row)
        print(f"pair {a} + {b}: {row.get('speed_a', math.nan):.2f} / {row.get('speed_b', math.nan):.2f} of alone"
              f"{' (' + row['error'] + ')' if row['error'] else ''}", flush=True)
    _write(args.out / "pairs.csv", PAIR_FIELDS, pair_rows)
    info = stack_info(device) | {"dry_run": bool(args.dry_run), "seconds": round(time.time() - t_start, 1),
                                 "jobs": len(rows), "failed_jobs": sum(1 for r in rows if r.get("error")),
                                 "pairs": len(pair_rows)}
    (args.out / "stack.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}/jobs.csv ({len(rows)} rows), pairs.csv ({len(pair_rows)}), stack.json "
          f"in {info['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

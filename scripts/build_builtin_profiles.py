"""Rebuild dlsched's built-in profile set (``src/dlsched/data/profiles/gavel_derived.json``).

The built-in set lets ``dlsched demo`` and the tests show GPU sharing without ``../shared``. It is
*derived* from Gavel's measurements (Narayanan et al., OSDI'20; MIT licence, Copyright (c) 2020
Stanford Future Data Systems), read from ``../shared/profiles/gavel/``:

* job types: Gavel's 26 single-GPU job types (7 architectures x batch sizes), named by dlsched's
  graph-zoo model (``resnet50``, ``lstm_lm``...) so predictors resolve them;
* isolated throughput (steps/s) per GPU type, rounded to 4 significant digits;
* pair slowdowns per GPU type: ``s = 1 / normalised throughput`` of each job of a co-located
  pair (Gavel measured them under CUDA MPS), rounded to 3 decimals, clipped at >= 1, infeasible
  (``[0, 0]`` = OOM) pairs left out;
* utilisation (Gavel has none): how much a job slows its partners. Under time slicing a job that
  keeps the GPU busy a fraction ``u`` of the time leaves its partner about ``1 - u/2`` of its
  speed, so ``u_j = 200 * (1 - mean over partners p of norm_p|j)``, clipped to [1, 100] %;
  a GPU type where a job has no feasible partner gets its highest utilisation on the others;
* memory (Gavel has none): dlsched's own graph predictor (the shipped default) on the same
  architecture and batch size.

Usage: ``python scripts/build_builtin_profiles.py [--gavel ../shared/profiles/gavel] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src/dlsched/data/profiles/gavel_derived.json"
GPU_NAMES = {"k80": "K80", "p100": "P100", "v100": "V100"}
# Gavel's A3C and CycleGAN have no batch size in the job-type name; both train one sample per step.
NO_BATCH = 1


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def build(gavel: Path, memory_from: Path | None = None) -> dict:
    sys.path.insert(0, str(REPO / "src"))
    from dlsched.graph.zoo.registry import zoo_name_for

    iso = pd.read_csv(gavel / "isolated_throughputs.csv")
    iso = iso[(iso["scale_factor"] == 1) & (iso["consolidated"] == 1)]
    pairs = pd.read_csv(gavel / "pair_throughputs_sf1.csv")
    names = sorted(iso["job_type"].unique())
    index = {name: i for i, name in enumerate(names)}
    types = []
    for name in names:
        row = iso[iso["job_type"] == name].iloc[0]
        batch = int(row["batch_size"]) if not pd.isna(row["batch_size"]) else NO_BATCH
        model = zoo_name_for(str(row["model"]))
        types.append({"id": f"{model}-bs{batch}", "model": model, "gavel_job_type": name,
                      "batch_size": batch, "iso_steps_per_s": {}, "gpu_util": {}})
    out_pairs: dict[str, list] = {}
    for gpu, label in GPU_NAMES.items():
        for _, row in iso[iso["gpu"] == gpu].iterrows():
            types[index[row["job_type"]]]["iso_steps_per_s"][label] = _sig(row["iso_steps_per_s_sim"])
        sub = pairs[(pairs["gpu"] == gpu) & (pairs["feasible"] == 1)]
        rows = []
        for _, r in sub.iterrows():
            i, j = index[r["job_a"]], index[r["job_b"]]
            if i > j:  # ordered pairs come twice: keep one
                continue
            rows.append([i, j, round(max(1.0, 1.0 / r["norm_a"]), 3), round(max(1.0, 1.0 / r["norm_b"]), 3)])
        out_pairs[label] = rows
        # utilisation from how much each job slows its partners (norm of the partner p when paired with j)
        for j, name in enumerate(names):
            partner = sub.loc[sub["job_b"] == name, "norm_a"].clip(upper=1.0)
            if len(partner):
                util = min(100.0, max(1.0, 200.0 * (1.0 - float(partner.mean()))))
                types[j]["gpu_util"][label] = round(util, 1)
    for t in types:  # no feasible partner on a GPU type (ResNet-50 bs 128 on K80): its highest elsewhere
        known = list(t["gpu_util"].values())
        for label in GPU_NAMES.values():
            if label not in t["gpu_util"] and known:
                t["gpu_util"][label] = max(known)
    if memory_from is None:
        _add_memory(types)
    else:
        _keep_memory(types, memory_from)
    return {
        "name": "gavel-derived",
        "description": "Built-in profile set derived from Gavel's throughput measurements (see NOTICE.md)",
        "source": "github.com/stanford-futuredata/gavel @ c4fa400, scheduler/simulation_throughputs.json",
        "license": "MIT, Copyright (c) 2020 Stanford Future Data Systems",
        "sharing": "CUDA MPS (Gavel's worker starts nvidia-cuda-mps-control)",
        "derivation": {
            "slowdown": "1 / (pair throughput / isolated throughput), clipped at >= 1, 3 decimals",
            "gpu_util": "200 * (1 - mean normalised throughput of the job's partners), clipped to [1, 100]",
            "gpu_mem_mib": "dlsched's graph predictor (memory model) at the job's batch size, frozen as of cc757c1: the truth's base, kept by rebuilds (--memory-from)",
            "batch_size": f"A3C and CycleGAN: {NO_BATCH} (no batch size in Gavel's job type)",
        },
        "gpu_types": list(GPU_NAMES.values()),
        "default_gpu": "V100",  # answers for cluster GPU types Gavel never measured (A100, H100...)
        "job_types": types,
        "pairs": out_pairs,
    }


def _add_memory(types: list[dict]) -> None:
    from dlsched.core.job import Job
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    jobs = [Job(t["id"], "v", 1, 0.0, 1.0, model_name=t["model"], batch_size=t["batch_size"]) for t in types]
    filled = fill_job_predictions(jobs, load_default(), graph_resolver, gpu="V100")
    if filled != len(jobs):
        raise SystemExit(f"the graph predictor resolved only {filled} of {len(jobs)} job types")
    for t, job in zip(types, jobs):
        if math.isnan(job.pred_gpu_mem_mib):
            raise SystemExit(f"no memory prediction for {t['id']}")
        t["gpu_mem_mib"] = round(job.pred_gpu_mem_mib)


def _keep_memory(types: list[dict], table: Path) -> None:
    """The memory column of an existing table. The shipped table's memory estimates are frozen: they
    are the ground truth's base (``models/truth.py`` multiplies them by a seeded measured error), and
    a truth must not move when the predictor is refitted (issue 23), so a rebuild keeps them."""
    frozen = {t["id"]: t["gpu_mem_mib"] for t in json.loads(table.read_text())["job_types"]}
    for t in types:
        if t["id"] not in frozen:
            raise SystemExit(f"--memory-from {table}: no memory for job type {t['id']}")
        t["gpu_mem_mib"] = frozen[t["id"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gavel", type=Path, default=REPO.parent / "shared/profiles/gavel")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--memory-from", type=Path, default=None,
                    help="keep the memory column of this table (the shipped one's estimates are frozen truth); "
                         "without it the current graph predictor estimates memory anew")
    args = ap.parse_args()
    if not (args.gavel / "pair_throughputs_sf1.csv").is_file():
        raise SystemExit(f"error: {args.gavel}/pair_throughputs_sf1.csv not found (give --gavel DIR)")
    data = build(args.gavel, args.memory_from)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pairs = data.pop("pairs")
    text = json.dumps(data, indent=1)[:-2]  # one pair per line keeps the file small and diffable
    body = ",\n".join(f' "{g}": [\n' + ",\n".join("  " + json.dumps(r) for r in rows) + "\n ]"
                      for g, rows in pairs.items())
    args.out.write_text(text + ',\n "pairs": {\n' + body + "\n }\n}\n")
    data["pairs"] = pairs
    json.loads(args.out.read_text())  # the file must parse
    n_pairs = {g: len(p) for g, p in data["pairs"].items()}
    print(f"wrote {args.out}: {len(data['job_types'])} job types, pairs per GPU type {n_pairs}")


if __name__ == "__main__":
    main()

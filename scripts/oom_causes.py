#!/usr/bin/env python3
"""Which jobs crash out of memory in a sharing run, and why: per job type, its predicted memory
(for each stack asked), its true memory and its OOM crashes (issue 36 point 2).

    python scripts/oom_causes.py --workload horus-wlarge --policy horus --seeds 0 1 2 \
        --stacks unknown gpumemnet-a100 --truth builtin

A stack other than the default is forced on every job through a wrapper around the shipped
predictor, so the runs differ in the predictions only (the truth is seeded by the workload).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

from dlsched.core.truth import gpu_mem_mib as true_mem


class _Stack:
    """The shipped predictor asked for one stack whatever the job says."""

    def __init__(self, inner, stack: str) -> None:
        self.inner, self.stack = inner, stack

    def predict_util(self, feats, gpu):
        return self.inner.predict_util(feats, gpu)

    def predict_mem_mib(self, feats, gpu, **kw):
        return self.inner.predict_mem_mib(feats, gpu, **{**kw, "stack": self.stack})


def measure(workload: str, policy: str, seeds: list[int], stack: str, truth_name: str, cap: int = 2) -> dict:
    """OOM crashes a run and, per (model, batch), crashes, jobs, predicted and true MiB."""
    from dlsched.experiments.sharing.run import PolicyRun, run_config
    from dlsched.models.truth import resolve_truth
    from dlsched.predictors.resources import default
    from dlsched.run.build import build_run
    from dlsched.run.workload import predictions

    shipped = default.load_default
    default.load_default = lambda *a, **k: _Stack(shipped(*a, **k), stack)
    predictions.cache_clear()
    per_type: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0, 0, [], []])
    crashes = []
    try:
        truth = resolve_truth(truth_name)
        for seed in seeds:
            built = build_run(run_config(workload, PolicyRun(policy, policy, cap), seed, truth=truth))
            res = built.engine().simulator.run(built.inputs.jobs)
            crashes.append(float(res.extra.get("failures", 0)))
            for j in res.jobs:
                row = per_type[(j.model_name, j.batch_size)]
                row[0] += j.failures
                row[1] += 1
                # the request before any correction: the cached prediction of this job
                row[2].append(_first_prediction(j, workload, seed, truth))
                row[3].append(true_mem(j))
    finally:
        default.load_default = shipped
        predictions.cache_clear()
    return {"crashes": crashes, "types": per_type}


def _first_prediction(job, workload: str, seed: int, truth) -> float:
    from dlsched.run.workload import predictions

    return predictions(workload, seed, None, truth, None)[0][job.job_id][1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="horus-wlarge")
    ap.add_argument("--policy", default="horus")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--stacks", nargs="+", default=["unknown", "gpumemnet-a100"])
    ap.add_argument("--truth", default="builtin")
    args = ap.parse_args(argv)
    out = {s: measure(args.workload, args.policy, args.seeds, s, args.truth) for s in args.stacks}
    for s, r in out.items():
        print(f"stack {s}: OOM crashes a run {statistics.fmean(r['crashes']):.1f} ({r['crashes']})")
    keys = sorted(next(iter(out.values()))["types"], key=lambda k: -out[args.stacks[0]]["types"][k][0])
    head = "| model | batch | jobs | true MiB (mean) | " + " | ".join(
        f"pred {s} | under share {s} | OOM {s}" for s in args.stacks) + " |"
    print(head)
    print("|" + "---|" * (4 + 3 * len(args.stacks)))
    for k in keys:
        first = out[args.stacks[0]]["types"][k]
        cells = [k[0], str(k[1]), str(first[1]), f"{statistics.fmean(first[3]):.0f}"]
        for s in args.stacks:
            fails, _, pred, true = out[s]["types"][k]
            under = sum(p < t for p, t in zip(pred, true)) / len(pred)
            cells += [f"{statistics.fmean(pred):.0f}", f"{100 * under:.0f} %", str(int(fails))]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

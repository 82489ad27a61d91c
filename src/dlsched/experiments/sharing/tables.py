"""The sharing papers' tables on our engine: Horus Table 6 and 7 (+ k sensitivity), Co-scheML
Fig. 7-9, and the oracle comparison. Each returns a JSON-ready dict with ``rows`` (ours) and
``paper`` (theirs); :mod:`dlsched.cli.sharing_exp_cmd` prints them side by side.

Ground truth everywhere: a named truth (:func:`dlsched.models.truth.resolve_truth`, ``builtin``
by default; ``truth=``), its ``colocation`` speed model, OOM failures with failover (re-checked
when a GPU's holders change), no preemption overhead. "Utilisation" is reported two ways: the
busy-GPU share and the delivered utilisation (measured utilisation x rate), the closer match to
what the papers measured with nvidia-smi/DCGM.

Protocol (:mod:`dlsched.experiments.protocol`): every table has a no-sharing row, every gain is
the mean of per-seed gains over that row with its 95 % CI and the seeds won; ``pairs``: every pair
of the ranked policies, paired per seed with Bonferroni-corrected CIs ("tied" where one spans 0),
and ``seed_rule``: the seeds run (``max_seeds``: the seed rule of
:mod:`dlsched.experiments.sharing.pairwise` extends a 10-seed table for close pairs; None: never). ``extra``: more
policies (any registered one, :func:`parse_policies`) appended as rows; ``history``: a list the
per-job rate / co-runner rows go to.
"""

from __future__ import annotations

import time

from dlsched.experiments.protocol import paired_gain
from dlsched.experiments.sharing.pairwise import comparisons, run_with_seed_rule
from dlsched.experiments.sharing.papers import COSCHEML, HORUS_TABLE6, HORUS_TABLE7, HORUS_UTILISATION
from dlsched.experiments.sharing.run import PolicyRun, mean_std, over_seeds
from dlsched.models.truth import Truth, resolve_truth

HORUS_WORKLOADS = ("horus-wlarge", "horus-wsmall")


def parse_policies(text: str, cap: int = 2) -> list[PolicyRun]:
    """``a,b:k=v:k2=v2,c``: registered policies with options (ints, floats or strings); the label is
    the text as written. Unknown names raise ``ValueError`` naming them."""
    from dlsched.registry import POLICIES

    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, *opts = item.split(":")
        if name not in POLICIES:
            raise ValueError(f"--policies: unknown policy {name!r}; choose from {', '.join(sorted(POLICIES))}")
        options = []
        for opt in opts:
            key, sep, value = opt.partition("=")
            if not sep or not key:
                raise ValueError(f"--policies: option {opt!r} of {name!r} is not key=value")
            options.append((key, _value(value)))
        out.append(PolicyRun(item, name, cap, tuple(options)))
    if not out:
        raise ValueError("--policies: no policy named")
    return out


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _with_models(specs: list[PolicyRun], gpu: str, truth: Truth) -> list[PolicyRun]:
    """A policy that reads the profile table (``reads_profiles``: Co-scheML) gets its interference
    model (``model=``) fitted on the truth's pairs of the workload's GPU type."""
    from dlsched.registry import POLICIES

    out = []
    for s in specs:
        if getattr(POLICIES[s.policy], "reads_profiles", False) and "model" not in dict(s.options):
            s = PolicyRun(s.label, s.policy, s.cap, (*s.options, ("model", coscheml_model(gpu, truth))))
        out.append(s)
    return out


def _gains(runs: dict, base: str, key: str) -> dict[str, dict[str, float]]:
    """Per label: the paired gain over ``base`` on ``key`` (mean, 95 % CI, wins)."""
    ref = [r.metrics[key] for r in runs[base]]
    return {label: paired_gain(ref, [r.metrics[key] for r in rs]).as_dict()
            for label, rs in runs.items() if label != base}


def _stats(runs, keys: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in keys:
        m, s = mean_std(runs, key)
        out[key], out[f"{key}_std"] = m, s
    return out


def horus_table6(seeds: list[int], cap: int = 2, beta: int = 15, predictions: str = "real",
                 truth: Truth | None = None, extra: list[PolicyRun] = (), history: list | None = None,
                 policies: list[PolicyRun] | None = None, max_seeds: int | None = None) -> dict:
    """FIFO (no sharing), PAB, OBP and Horus (k = 1) on W-Large and W-Small: makespan mean +- std
    over seeds, paired gain vs FIFO (mean, 95 % CI, wins), JCT (start to end, as Horus defines
    it), utilisation, OOM crashes. ``policies`` replaces PAB/OBP/Horus (FIFO stays)."""
    t0 = time.perf_counter()
    truth = truth or resolve_truth()
    base = PolicyRun("FIFO", "fifo", 1)
    shared = policies if policies is not None else [
        PolicyRun("PAB", "pab", cap), PolicyRun("OBP", "obp", cap),
        PolicyRun("Horus", "horus", cap, (("k", 1), ("beta", beta)))]
    specs = _with_models([base, *shared, *extra], "RTX2080", truth)
    rows, pairs, rules = [], [], {}
    for wl in HORUS_WORKLOADS:
        runs, _, rules[wl] = run_with_seed_rule(
            lambda ss, wl=wl: over_seeds(wl, specs, ss, predictions, truth=truth, history=history),
            seeds, "FIFO", "makespan", max_seeds)
        pairs += [{"workload": wl, **c} for c in comparisons(runs, "FIFO", "makespan", max_seeds or 30)]
        gains = _gains(runs, "FIFO", "makespan")
        for spec in specs:
            st = _stats(runs[spec.label], ("makespan", "avg_run_time", "avg_jct", "busy_gpu_utilization",
                                           "delivered_gpu_utilization", "failures", "requeued", "oom_called_off"))
            paper = HORUS_TABLE6[wl].get(spec.label, (None, None, None))
            g = gains.get(spec.label, {})
            rows.append({"workload": wl, "policy": spec.label, "makespan_min": st["makespan"] / 60,
                         "makespan_std_min": st["makespan_std"] / 60,
                         "gain": g.get("gain"), "gain_ci_low": g.get("gain_ci_low"),
                         "gain_ci_high": g.get("gain_ci_high"), "wins": g.get("wins"),
                         "avg_jct_s": st["avg_run_time"], "busy_util": st["busy_gpu_utilization"],
                         "delivered_util": st["delivered_gpu_utilization"], "failures": st["failures"],
                         "oom_called_off": st["oom_called_off"],
                         "requeued": st["requeued"], "paper_makespan_min": paper[0], "paper_std_min": paper[1],
                         "paper_gain": paper[2]})
    return {"experiment": "horus-table6", "truth": truth.name, "seeds": seeds, "max_jobs_per_gpu": cap,
            "beta": beta, "predictions": predictions, "rows": rows, "paper_horus_utilisation": HORUS_UTILISATION,
            "pairs": pairs, "seed_rule": rules, "seconds": time.perf_counter() - t0}


def horus_table7(seeds: list[int], workload: str = "philly-profiled", jobs: int | None = 2000, cap: int = 2,
                 beta: int = 15, ks: tuple[int, ...] = (3, 4, 5), predictions: str = "real",
                 nodes: int | None = 32, truth: Truth | None = None, extra: list[PolicyRun] = (),
                 history: list | None = None, gpu: str | None = "RTX2080", max_seeds: int | None = None) -> dict:
    """Waiting time of FIFO (no sharing), OBP, Horus (k = 1), Horus-f (k = 3) on a production-like
    trace, and Horus's sensitivity to k, with OOM crashes. ``nodes``: one pool of that many nodes
    (the paper: 128 x 8 GPUs for 398 jobs; a smaller pool gives the first few thousand Philly jobs
    the contention the paper's trace had); None keeps the workload's own VCs. ``gpu``: the
    testbed's RTX 2080 (8 GB) by default, as the paper's simulation was "configured identically to
    testbed experiments" (on 32 GB V100s two single-GPU types never overfill a GPU, so no OOM
    could happen); None keeps the workload's own (V100)."""
    t0 = time.perf_counter()
    truth = truth or resolve_truth()
    specs = [PolicyRun("FIFO", "fifo", 1), PolicyRun("OBP", "obp", cap),
             PolicyRun("Horus", "horus", cap, (("k", 1), ("beta", beta))),
             PolicyRun("Horus-f", "horus-f", cap, (("k", 3), ("beta", beta)))]
    specs += [PolicyRun(f"Horus k={k}", "horus-f", cap, (("k", k), ("beta", beta))) for k in ks if k != 3]
    specs = _with_models([*specs, *extra], gpu or "V100", truth)
    runs, _, rule = run_with_seed_rule(
        lambda ss: over_seeds(workload, specs, ss, predictions, jobs, nodes, truth, history, gpu),
        seeds, "FIFO", "avg_wait", max_seeds)
    pairs = comparisons(runs, "FIFO", "avg_wait", max_seeds or 30)
    gains = _gains(runs, "FIFO", "avg_wait")
    horus = [r.metrics["decisions"] for r in runs["Horus"]]
    rows = []
    for spec in specs:
        st = _stats(runs[spec.label], ("avg_wait", "median_wait", "std_wait", "makespan", "delivered_gpu_utilization",
                                       "failures", "oom_called_off"))
        same = sum(r.metrics["decisions"] == h for r, h in zip(runs[spec.label], horus))
        paper = HORUS_TABLE7.get(spec.label)
        g = gains.get(spec.label, {})
        rows.append({"policy": spec.label, "k": dict(spec.options).get("k"), "avg_wait_s": st["avg_wait"],
                     "median_wait_s": st["median_wait"], "std_wait_s": st["std_wait"],
                     "reduction": g.get("gain"), "reduction_ci_low": g.get("gain_ci_low"),
                     "reduction_ci_high": g.get("gain_ci_high"), "wins": g.get("wins"),
                     "makespan_h": st["makespan"] / 3600, "delivered_util": st["delivered_gpu_utilization"],
                     "failures": st["failures"], "oom_called_off": st["oom_called_off"],
                     "seeds_same_decisions_as_horus": float(same),
                     "paper_avg_steps": paper[0] if paper else None, "paper_reduction": paper[3] if paper else None})
    left = mean_std(runs["FIFO"], "left_out_too_wide")[0]
    return {"experiment": "horus-table7", "workload": workload, "jobs": jobs, "nodes": nodes, "seeds": seeds,
            "truth": truth.name, "gpu": gpu, "left_out_too_wide": left,
            "max_jobs_per_gpu": cap, "predictions": predictions, "rows": rows, "pairs": pairs,
            "seed_rule": {"": rule}, "seconds": time.perf_counter() - t0}


def coscheml_model(gpu: str, truth: Truth | None = None):
    """Co-scheML's random forest fitted on the offline pair profiles of the truth's table (the
    workload's GPU type; all of the table's pairs when it has none of that type)."""
    from dlsched.predictors.interference.pair_forest import PairForest

    table = (truth or resolve_truth()).table
    key = table.gpu_key(gpu)
    obs = table.observations(key) or table.observations()
    return PairForest().fit(obs)


def coscheml(seeds: list[int], interval: int = 30, predictions: str = "real", truth: Truth | None = None,
             extra: list[PolicyRun] = (), history: list | None = None, max_seeds: int | None = None) -> dict:
    """No sharing (FIFO), Co-scheML, Binpack, Loadbalance and Mystic (two jobs per GPU at most):
    average JCT from submission, makespan with its paired gain over no sharing, speed (solo /
    actual run time), utilisation, OOM crashes."""
    t0 = time.perf_counter()
    truth = truth or resolve_truth()
    workload = f"coscheml-{interval}"
    specs = [PolicyRun("no sharing (FIFO)", "fifo", 1), PolicyRun("Co-scheML", "coscheml", 2),
             PolicyRun("Binpack", "binpack", 2), PolicyRun("Loadbalance", "loadbalance", 2),
             PolicyRun("Mystic", "mystic", 2)]
    specs = _with_models([*specs, *extra], "TitanXp", truth)
    runs, _, rule = run_with_seed_rule(
        lambda ss: over_seeds(workload, specs, ss, predictions, truth=truth, history=history),
        seeds, "no sharing (FIFO)", "makespan", max_seeds)
    pairs = comparisons(runs, "no sharing (FIFO)", "makespan", max_seeds or 30)
    gains = _gains(runs, "no sharing (FIFO)", "makespan")
    jct_gains = _gains(runs, "no sharing (FIFO)", "avg_jct")
    rows = []
    for spec in specs:
        st = _stats(runs[spec.label], ("avg_jct", "makespan", "speed", "busy_gpu_utilization",
                                       "delivered_gpu_utilization", "failures"))
        paper = COSCHEML.get(spec.label, (None, None, None, None))
        g, gj = gains.get(spec.label, {}), jct_gains.get(spec.label, {})
        rows.append({"policy": spec.label, "avg_jct_s": st["avg_jct"], "makespan_s": st["makespan"],
                     "gain": g.get("gain"), "gain_ci_low": g.get("gain_ci_low"), "gain_ci_high": g.get("gain_ci_high"),
                     "wins": g.get("wins"), "jct_gain": gj.get("gain"),
                     "speed": st["speed"], "busy_util": st["busy_gpu_utilization"],
                     "delivered_util": st["delivered_gpu_utilization"], "failures": st["failures"],
                     "paper_jct_s": paper[0], "paper_makespan_s": paper[1], "paper_speedup": paper[2],
                     "paper_util": paper[3]})
    return {"experiment": "coscheml", "workload": workload, "truth": truth.name, "seeds": seeds,
            "predictions": predictions, "rows": rows, "pairs": pairs, "seed_rule": {"": rule},
            "seconds": time.perf_counter() - t0}


def colocation_oracle(seeds: list[int], workload: str = "coscheml-30", cap: int = 2, truth: Truth | None = None,
                      extra: list[PolicyRun] = (), history: list | None = None,
                      max_seeds: int | None = None) -> dict:
    """The share of the oracle's makespan gain over no sharing that each policy achieves, with the
    real predictors and with perfect predictions; paired gains over no sharing with 95 % CIs."""
    t0 = time.perf_counter()
    truth = truth or resolve_truth()
    gpu = "RTX2080" if workload.startswith("horus") else "TitanXp" if workload.startswith("coscheml") else "V100"
    base = "no sharing (FIFO)"
    specs = [PolicyRun(base, "fifo", 1), PolicyRun("oracle", "oracle-pairing", cap),
             PolicyRun("Horus", "horus", cap), PolicyRun("OBP", "obp", cap),
             PolicyRun("Co-scheML", "coscheml", cap),
             PolicyRun("Loadbalance", "loadbalance", cap), PolicyRun("Mystic", "mystic", cap),
             PolicyRun("random", "random-pairing", cap)]
    specs = _with_models([*specs, *extra], gpu, truth)
    rows, pairs, rules = [], [], {}
    for predictions in ("real", "perfect"):
        runs, _, rules[predictions] = run_with_seed_rule(
            lambda ss, p=predictions: over_seeds(workload, specs, ss, p, truth=truth, history=history),
            seeds, base, "makespan", max_seeds)
        pairs += [{"predictions": predictions, **c} for c in comparisons(runs, base, "makespan", max_seeds or 30)]
        gains = _gains(runs, base, "makespan")
        oracle_vs_base = gains["oracle"]
        for spec in specs:
            m = mean_std(runs[spec.label], "makespan")[0]
            jct = mean_std(runs[spec.label], "avg_jct")[0]
            g = gains.get(spec.label, {})
            og = oracle_vs_base["gain"]
            rows.append({"predictions": predictions, "policy": spec.label, "makespan_s": m, "avg_jct_s": jct,
                         "gain": g.get("gain"), "gain_ci_low": g.get("gain_ci_low"),
                         "gain_ci_high": g.get("gain_ci_high"), "wins": g.get("wins"),
                         "share_of_oracle_gain": (g.get("gain", 0.0) / og) if og else None,
                         "failures": mean_std(runs[spec.label], "failures")[0]})
    return {"experiment": "colocation-oracle", "workload": workload, "truth": truth.name, "seeds": seeds,
            "max_jobs_per_gpu": cap, "rows": rows, "pairs": pairs, "seed_rule": rules,
            "seconds": time.perf_counter() - t0}


def compare(seeds: list[int], workload: str, specs: list[PolicyRun], predictions: str = "real",
            truth: Truth | None = None, jobs: int | None = None, nodes: int | None = None,
            history: list | None = None, max_seeds: int | None = None) -> dict:
    """Any registered policies on one sharing workload beside no sharing (FIFO): makespan, JCT,
    waiting time, paired makespan gain (mean, 95 % CI, wins), OOM crashes."""
    t0 = time.perf_counter()
    truth = truth or resolve_truth()
    from dlsched.workloads import DEFAULT_GPU

    base = PolicyRun("no sharing (FIFO)", "fifo", 1)
    specs = _with_models([base, *specs], DEFAULT_GPU.get(workload.split("-")[0], "V100"), truth)
    runs, _, rule = run_with_seed_rule(
        lambda ss: over_seeds(workload, specs, ss, predictions, jobs, nodes, truth, history),
        seeds, base.label, "makespan", max_seeds)
    pairs = comparisons(runs, base.label, "makespan", max_seeds or 30)
    gains = _gains(runs, base.label, "makespan")
    rows = []
    for spec in specs:
        st = _stats(runs[spec.label], ("makespan", "avg_jct", "avg_wait", "delivered_gpu_utilization", "failures"))
        g = gains.get(spec.label, {})
        rows.append({"policy": spec.label, "makespan_s": st["makespan"], "makespan_std_s": st["makespan_std"],
                     "gain": g.get("gain"), "gain_ci_low": g.get("gain_ci_low"), "gain_ci_high": g.get("gain_ci_high"),
                     "wins": g.get("wins"), "avg_jct_s": st["avg_jct"], "avg_wait_s": st["avg_wait"],
                     "delivered_util": st["delivered_gpu_utilization"], "failures": st["failures"]})
    return {"experiment": "compare", "workload": workload, "truth": truth.name, "seeds": seeds,
            "predictions": predictions, "rows": rows, "pairs": pairs, "seed_rule": {"": rule},
            "seconds": time.perf_counter() - t0}

"""Levels the metrics and the dashboard both show, read from the core (no Prometheus import)."""

from __future__ import annotations


def gpu_levels(core) -> dict[str, dict[str, int]]:
    """Per VC: GPUs with no holder (free), at least one (busy), at least two (shared)."""
    st = core.state
    out: dict[str, dict[str, int]] = {vc.name: {"free": 0, "busy": 0, "shared": 0} for vc in st.vcs}
    for idx in range(len(st.node_ids)):
        if st.node_removed[idx]:
            continue
        level = out[st.vcs[st.node_vc[idx]].name]
        for g in range(st.node_gpus[idx]):
            n = len(st.gpu_holders(idx, g))
            level["free" if n == 0 else "busy"] += 1
            level["shared"] += n >= 2
    return out


def predicted_vs_observed(core) -> list[dict]:
    """Running pods with an agent reading: the prediction made before any correction, the last
    observation, and their absolute errors (NaN where either side is missing)."""
    rows = []
    for uid, (util, mem, _at) in core.observed.items():
        job = core.jobs.get(uid)
        if job is None:
            continue
        corrected = job.observed_at >= 0
        p_util = job.prior_gpu_util if corrected else job.pred_gpu_util
        p_mem = job.prior_gpu_mem_mib if corrected else job.pred_gpu_mem_mib
        rows.append({"pod": core.pods[uid].key, "predicted_util": p_util, "observed_util": util,
                     "predicted_mem_mib": p_mem, "observed_mem_mib": mem,
                     "util_error": abs(p_util - util), "mem_error_mib": abs(p_mem - mem),
                     "corrected": corrected})
    return rows

"""QSSF's value where queueing is real: the built-in workload (``dlsched demo``), FIFO, SJF, SRTF
and QSSF with the online estimator, with Helios Table 4's short / middle / long groups."""

from __future__ import annotations

from dlsched.reproduce.base import NA, Context, Reproduction, Table

POLICIES = ("fifo", "sjf", "srtf", "qssf")
LABELS = {"fifo": "FIFO", "sjf": "SJF (oracle)", "srtf": "SRTF (oracle, preemptive)", "qssf": "QSSF (online)"}


def group_split(summary: dict) -> str:
    """Avg JCT of Helios Table 4's short / middle / long groups (``–`` when the run has none); every
    policy's, SRTF's too (the README quotes 215 / 4,594 / 88,712 s; the table showed ``–``)."""
    groups = summary.get("groups") or {}
    parts = [f"{groups[g]['avg_jct']:,.0f}" for g in ("short", "middle", "long") if (groups.get(g) or {}).get("jobs")]
    return " / ".join(parts) if parts else NA


class HeliosQSSFBuiltin(Reproduction):
    name = "helios-qssf-builtin"
    title = "QSSF with the online estimator on the built-in workload (20,000 jobs, 98 nodes)"
    paper = ("Helios (Hu et al., SC'21), Sec. 4.2 QSSF and Table 4's job groups; the built-in workload is "
             "calibrated to Helios statistics, so there are no paper numbers for it")
    command = "dlsched demo --out DIR   (= dlsched compare --policies fifo,sjf,srtf,qssf)"

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        from dlsched.run import RunConfig, WorkloadConfig
        from dlsched.run.build import build_comparison
        from dlsched.run.params import policy
        from dlsched.runner import compare_policies, load_summary

        # the built-in workload as `dlsched demo` runs it: every other option at its default
        configs = [RunConfig(workload=WorkloadConfig(jobs=20000, seed=0), policy=policy(p)) for p in POLICIES]
        inputs, cluster, base = build_comparison(configs)
        jobs = inputs.jobs
        compare_policies(jobs, cluster, list(POLICIES), ctx.work, base)
        summaries = {p: load_summary(ctx.work / p) for p in POLICIES}
        rows = [[LABELS[p], round(summaries[p]["avg_jct"]), round(summaries[p]["avg_queue_delay"]),
                 summaries[p]["queued_jobs"], group_split(summaries[p])] for p in POLICIES]
        q, f, j = summaries["qssf"], summaries["fifo"], summaries["sjf"]
        ratios = (f"QSSF/FIFO: JCT x{q['avg_jct'] / f['avg_jct']:.3f}, queue delay "
                  f"x{q['avg_queue_delay'] / f['avg_queue_delay']:.3f}, queued jobs x{q['queued_jobs'] / f['queued_jobs']:.2f}; "
                  f"QSSF/SJF: x{q['avg_jct'] / j['avg_jct']:.2f}, x{q['avg_queue_delay'] / j['avg_queue_delay']:.2f}, "
                  f"x{q['queued_jobs'] / j['queued_jobs']:.2f}")
        table = Table(f"{len(jobs):,} built-in jobs, {len(cluster.nodes)} nodes",
                      ["policy", "avg JCT (s)", "avg queue delay (s)", "queued jobs", "short / middle / long avg JCT (s)"],
                      rows, ratios)
        return [table], []

"""Fidelity to the Helios reference simulator: the reference run's input, VC sizes and window,
every policy of the reference run, cluster averages and per-job start times side by side."""

from __future__ import annotations

from dlsched.reproduce.base import Context, Reproduction, Table

REF = "traces/philly/reference_run"
TRACE = f"{REF}/input_cluster_log_helios_format.csv.gz"
VC_CONFIG = "traces/philly/philly_vc_config.csv"
PRIORITIES = f"{REF}/input_qssf_priority_Philly_lgb.csv.gz"
SUMMARY = f"{REF}/base_vc_config/summary_all.csv"
POLICIES = ("fifo", "sjf", "srtf", "qssf")
#: the reference run's policy parameters: QSSF reads the reference's priority file
PARAMS = {"qssf": {"priority_file": PRIORITIES}}


def load_reference_input(ctx: Context):
    """The reference run's 68,503 jobs (Oct-Nov 2017) and its VC sizes."""
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    vc_nodes = load_vc_config(ctx.data(VC_CONFIG))
    trace = load_trace(ctx.data(TRACE), "helios-log", start="2017-10-01 00:00:00", end="2017-11-30 23:59:00",
                       vcs=list(vc_nodes))
    return trace, vc_nodes


def reference_config(ctx: Context, name: str):
    """The reference run of policy ``name`` as a RunConfig: the command below (the policies' own
    placement, consolidate), ``--compat helios``, the parameters of :data:`PARAMS` (paths resolved)."""
    from dlsched.run import ClusterConfig, EngineConfig, RunConfig, WorkloadConfig
    from dlsched.run.params import policy

    params = {key: ctx.data(path) for key, path in PARAMS.get(name, {}).items()}
    return RunConfig(workload=WorkloadConfig(trace=ctx.data(TRACE), trace_format="helios-log",
                                             start="2017-10-01 00:00:00", end="2017-11-30 23:59:00"),
                     cluster=ClusterConfig(vc_config=ctx.data(VC_CONFIG)), policy=policy(name, **params),
                     engine=EngineConfig(compat="helios"))


class HeliosFidelity(Reproduction):
    name = "helios-fidelity"
    title = "Fidelity to the Helios reference simulator (Philly, Oct-Nov 2017, 68,503 jobs)"
    paper = "HeliosArtifact QSSF Service run on Philly (../shared/traces/philly/reference_run)"
    command = ("dlsched simulate --trace $REF/input_cluster_log_helios_format.csv.gz --trace-format helios-log --vc-config "
               "$P/philly_vc_config.csv --start '2017-10-01 00:00:00' --end '2017-11-30 23:59:00' "
               "--compat helios --policy fifo|sjf|srtf|qssf [--priority-file $REF/input_qssf_priority_Philly_lgb.csv.gz]")
    needs = (TRACE, VC_CONFIG, PRIORITIES, SUMMARY, *(f"{REF}/base_vc_config/{p}_jobs.csv.gz" for p in POLICIES))

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        import pandas as pd

        from dlsched.core.cluster import ClusterSpec
        from dlsched.run import Inputs, build_run

        trace, vc_nodes = load_reference_input(ctx)
        jobs = trace.jobs
        inputs = Inputs(jobs, ClusterSpec.from_vc_sizes(vc_nodes), trace.origin, str(ctx.data(TRACE)), "V100")
        reference = pd.read_csv(ctx.data(SUMMARY)).set_index("policy")
        rows = []
        for name in POLICIES:
            run = build_run(reference_config(ctx, name), inputs=inputs)
            run.engine().simulator.run(jobs)
            n = len(jobs)
            jct = sum(j.end_time - j.submit_time for j in jobs) / n
            queue = sum(j.queue_delay for j in jobs) / n
            queued = sum(j.queue_delay > 0 for j in jobs)
            preempted = sum(j.preemptions for j in jobs)
            ref_jobs = pd.read_csv(ctx.data(f"{REF}/base_vc_config/{name}_jobs.csv.gz"), usecols=["jobname", "start_time"],
                                   dtype={"jobname": str})
            starts = dict(zip(ref_jobs.jobname, ref_jobs.start_time))
            equal = sum(starts.get(j.job_id) == j.start_time for j in jobs)
            ref = reference.loc[name]
            rows.append([name.upper() + (" (prio. file)" if "priority_file" in PARAMS.get(name, {}) else ""), n,
                         round(float(ref.avg_jct_s), 2), round(jct, 2), round(float(ref.avg_queue_s), 2),
                         round(queue, 2), int(ref.queued_jobs), queued, int(ref.preemptions), preempted,
                         f"{equal:,} of {n:,}"])
        table = Table("reference run (base VC sizes, 352 nodes, consolidate, --compat helios)",
                      ["policy", "jobs", "avg JCT ref (s)", "dlsched", "avg queue ref (s)", "dlsched",
                       "queued ref", "dlsched", "preemptions ref", "dlsched", "start times equal"], rows)
        notes = [("Differences come only from jobs submitted in the same second to the same VC: the reference "
                 "orders such ties with pandas' unstable sort; dlsched keeps file order.")]
        return [table], notes

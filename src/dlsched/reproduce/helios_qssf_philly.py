"""QSSF (Helios SC'21, Sec. 4.2) with the online estimator on Philly: FIFO, SJF and QSSF on the
reference run's jobs, on the base VC sizes and with every VC cut to a quarter of its nodes."""

from __future__ import annotations

import math

from dlsched.reproduce.base import NA, Context, Reproduction, Table
from dlsched.reproduce.helios_fidelity import SUMMARY, TRACE, VC_CONFIG, load_reference_input

POLICIES = ("fifo", "sjf", "qssf")


def quarter(vc_nodes: dict[str, int]) -> dict[str, int]:
    """Every VC with a quarter of its nodes (at least one): 352 -> 88 nodes, heavy queueing."""
    return {vc: max(1, n // 4) for vc, n in vc_nodes.items()}


class HeliosQSSFPhilly(Reproduction):
    name = "helios-qssf-philly"
    title = "QSSF with the online GPU-time estimator on Philly (68,503 jobs)"
    paper = ("Helios (Hu et al., SC'21), Sec. 4.2 QSSF; reference numbers: the HeliosArtifact run with its "
             "priority file (base sizes only)")
    command = ("dlsched compare --trace $REF/input_cluster_log_helios_format.csv.gz --vc-config VC.csv "
               "--start '2017-10-01 00:00:00' --end '2017-11-30 23:59:00' --policies fifo,sjf,qssf")
    needs = (TRACE, VC_CONFIG, SUMMARY)

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        import pandas as pd

        from dlsched.core.cluster import ClusterSpec
        from dlsched.run import Inputs, RunConfig
        from dlsched.run.build import build_comparison
        from dlsched.run.params import policy
        from dlsched.runner import compare_policies

        trace, vc_nodes = load_reference_input(ctx)
        reference = pd.read_csv(ctx.data(SUMMARY)).set_index("policy")
        # every option at its default (online QSSF estimator); the input is the reference window
        configs = [RunConfig(policy=policy(p)) for p in POLICIES]
        inputs = Inputs(trace.jobs, ClusterSpec.from_vc_sizes(vc_nodes), trace.origin, str(ctx.data(TRACE)), "V100")
        _, _, base = build_comparison(configs, inputs=inputs)
        base.meta = {"trace": str(ctx.data(TRACE))}
        results = {}
        for label, sizes in (("base", vc_nodes), ("quarter", quarter(vc_nodes))):
            table = compare_policies(trace.jobs, ClusterSpec.from_vc_sizes(sizes), list(POLICIES),
                                     ctx.work / label, base)
            results[label] = (table.set_index("policy"), sum(sizes.values()))
        tables = []
        for label, (frame, nodes) in results.items():
            rows = []
            for p in POLICIES:
                r = frame.loc[p]
                ref = reference.loc[p] if label == "base" and p in reference.index else None
                rows.append([p.upper() + (" (online)" if p == "qssf" else ""), round(float(r.avg_jct)),
                             round(float(r.avg_queue_delay), 1), int(r.queued_jobs),
                             round(float(r.ratio_avg_jct), 3), round(float(r.ratio_avg_queue_delay), 3),
                             NA if ref is None else round(float(ref.avg_jct_s)),
                             NA if ref is None else round(float(ref.avg_queue_s), 1)])
            qssf, sjf = frame.loc["qssf"], frame.loc["sjf"]
            note = (f"QSSF/SJF: avg JCT x{qssf.avg_jct / sjf.avg_jct:.2f}, queue delay "
                    f"x{qssf.avg_queue_delay / sjf.avg_queue_delay:.2f}" if sjf.avg_queue_delay else "")
            tables.append(Table(f"{label} VC sizes ({nodes} nodes)",
                                ["policy", "avg JCT (s)", "avg queue (s)", "queued jobs", "JCT / FIFO",
                                 "queue / FIFO", "reference avg JCT", "reference avg queue"], rows, note))
        notes = [("Reference columns: HeliosArtifact with its noisy-oracle priority file for QSSF (reference run, "
                 "base sizes); the Helios paper evaluates QSSF on its own clusters' traces, not on Philly."),
                 "Philly has no users or job names: the online estimator has only VC, GPUs and time to go on."]
        if any(math.isnan(float(v)) for v in results["quarter"][0]["avg_jct"]):
            notes.append("some runs produced no jobs")
        return tables, notes

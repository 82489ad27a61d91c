"""Loading a run's input: a trace (or the built-in workload) and the cluster it runs on.

The library side of ``--trace``/``--vc-config``/``--cluster``/``--nodes``/``--start``/``--end``/
``--vcs``: what ``simulate``, ``sweep`` and ``reproduce`` load, with the same checks and the
same counted notes. Lines for the user go through ``say(text, style)`` (quiet by default), so a
command prints them and a sweep cell does not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

Say = Callable[..., None]


def quiet(text: str, style: str = "") -> None:
    """A ``say`` that drops every line (sweep cells, reproductions)."""


def load_jobs_and_cluster(trace: Path | None, trace_format: str, vc_config: Path | None, nodes: int | None,
                          gpus_per_node: int, start: str | None, end: str | None, vcs: str | None,
                          skip_invalid: bool, synthetic_jobs: int = 20000, seed: int = 0, say: Say = quiet,
                          topology: str | None = None, cluster_file: Path | None = None):
    """Load a trace (or the built-in workload) and size the cluster. Prints the load report.

    The cluster is what is simulated: with ``--vcs`` and a VC table, only the named VCs' nodes
    (so cluster-wide figures are over them); a VC named in ``--vcs`` without jobs is an error, a
    VC of the table without jobs is a printed note (its idle nodes count in the utilisation)."""
    from dlsched.runner import cluster_for, keep_cluster_vcs
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    if nodes is not None and nodes < 1:
        raise ValueError(f"--nodes must be >= 1, got {nodes}")
    if gpus_per_node < 1:
        raise ValueError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")
    wanted = [v.strip() for v in vcs.split(",") if v.strip()] if vcs else None
    vc_nodes = load_vc_config(vc_config) if vc_config else None
    described = None  # the ClusterSpec of --cluster FILE
    if cluster_file is not None:
        from dlsched.traces.cluster_file import read_cluster_file

        if vc_config is not None or nodes is not None or topology is not None:
            raise ValueError(f"--cluster {cluster_file} describes the whole cluster: leave out "
                             "--vc-config, --nodes and --topology")
        described = read_cluster_file(cluster_file)
        vc_nodes = {vc: len(members.node_ids) for vc, members in described.vcs.items()}
        if wanted:
            vc_nodes = _only_vcs(vc_nodes, wanted, f"the cluster file {cluster_file}")
            described = _sub_cluster(described, list(vc_nodes))
    elif vc_nodes is not None and wanted:
        vc_nodes = _only_vcs(vc_nodes, wanted, f"the VC config {vc_config}")
    if trace is None:
        from dlsched.traces import synthetic

        tr = synthetic.generate(jobs=synthetic_jobs, seed=seed)
        if vc_nodes is None and nodes is None:
            vc_nodes = synthetic.default_cluster(tr)
            if wanted:
                vc_nodes = _only_vcs(vc_nodes, wanted, "the built-in cluster")
        name = f"built-in synthetic workload ({synthetic_jobs} jobs, seed {seed})"
        _filter_builtin(tr, time_arg(start), time_arg(end), wanted)
        report_lines = tr.report.lines()[1:] if tr.report.filtered else []
    else:
        vc_filter = wanted or (list(vc_nodes) if vc_nodes else None)
        tr = load_trace(trace, trace_format, start=time_arg(start), end=time_arg(end), vcs=vc_filter,
                        skip_invalid=skip_invalid, vcs_reason="VC not in --vcs" if wanted else "VC not in config")
        name = str(trace)
        report_lines = tr.report.lines()
    for line in report_lines:
        say(line, "dim")
    jobs = tr.jobs
    if not jobs:
        raise ValueError(_nothing_left(name, tr.report))
    if wanted:
        present = {j.vc for j in jobs}
        ghost = [v for v in wanted if v not in present]
        if ghost:
            raise ValueError(f"--vcs {','.join(ghost)}: no jobs of {'this VC' if len(ghost) == 1 else 'these VCs'} "
                             f"in {name}" + (" within --start/--end" if start or end else "")
                             + f" (VCs with jobs: {', '.join(sorted(present)[:12])})")
    cluster = described if described is not None else cluster_for(jobs, vc_nodes, nodes, gpus_per_node, topology)
    jobs, left = keep_cluster_vcs(jobs, cluster)
    if left:
        say(f"left out {sum(left.values())} jobs of VCs missing from the cluster: {dict(sorted(left.items()))}",
            "yellow")
    idle_vcs = sorted(set(cluster.vcs) - {j.vc for j in jobs})
    if idle_vcs:
        sizes = ", ".join(f"{v} ({len(cluster.vcs[v].node_ids)} nodes)" for v in idle_vcs[:8])
        say(f"note: VCs with no jobs to simulate: {sizes}"
            + (f" and {len(idle_vcs) - 8} more" if len(idle_vcs) > 8 else "")
            + "; their nodes stay in the cluster and count in gpu_utilization (drop them with --vcs)")
    return tr, jobs, cluster, name


def _sub_cluster(cluster, vcs: list[str]):
    """The part of ``cluster`` that belongs to ``vcs``."""
    from dlsched.core.cluster import ClusterSpec

    keep = set(vcs)
    return ClusterSpec([n for n in cluster.nodes if n.vc in keep], {v: cluster.vcs[v] for v in vcs})


def _only_vcs(vc_nodes: dict[str, int], wanted: list[str], where: str) -> dict[str, int]:
    """The VC table restricted to ``--vcs`` (an unknown name is an error, not a silent zero)."""
    unknown = [v for v in wanted if v not in vc_nodes]
    if unknown:
        raise ValueError(f"--vcs {','.join(unknown)}: not in {where} (it has {', '.join(list(vc_nodes)[:12])}"
                         + (", ..." if len(vc_nodes) > 12 else "") + ")")
    return {v: vc_nodes[v] for v in wanted}


def _filter_builtin(tr, start, end, wanted: list[str] | None) -> None:
    """Apply --start/--end (seconds) and --vcs to the built-in workload, counting what is left out."""
    for value, option in ((start, "--start"), (end, "--end")):
        if isinstance(value, str):
            raise ValueError(f"{option} {value!r}: the built-in workload has relative times; give seconds")
    if start is not None and end is not None and start > end:
        raise ValueError(f"--start {start:g} is after --end {end:g}: the window holds no time")
    if start is None and end is None and not wanted:
        return
    keep_vcs = set(wanted) if wanted else None
    kept = []
    for job in tr.jobs:
        if keep_vcs is not None and job.vc not in keep_vcs:
            tr.report.filtered["VC not in --vcs"] += 1
        elif start is not None and job.submit_time < start:
            tr.report.filtered["outside window (before start)"] += 1
        elif end is not None and job.submit_time > end:
            tr.report.filtered["outside window (after end)"] += 1
        else:
            kept.append(job)
    tr.jobs = kept


def _nothing_left(name: str, report) -> str:
    """Why no job is left: an empty input, or the filters (with their counts)."""
    if not report.rows_read:
        return f"{name}: the trace holds no job rows (only a header?)"
    why = "; ".join(f"{n} {reason}" for reason, n in sorted(report.filtered.items()))
    skipped = sum(report.skipped.values())
    return (f"{name}: no jobs left to simulate: all {report.rows_read} rows were left out"
            + (f" ({why})" if why else "") + (f"; {skipped} invalid rows skipped" if skipped else ""))


def time_arg(value: str | None):
    """A window bound from the command line: seconds if it parses as a number, else wall-clock text."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value

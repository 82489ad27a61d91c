"""Topology-aware placement commands: ``experiment topo-*``, ``bench placement``, ``topo show``.

``experiment`` and ``bench`` may be shared with other command modules: ``_group`` reuses a
sub-app of that name when one is already registered instead of adding a second one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.checks import check_job_count, check_machines, check_out_dir
from dlsched.cli.common import clear_errors, out

OutOpt = Annotated[Path, typer.Option("--out", help="output directory")]
SeedOpt = Annotated[int, typer.Option(help="workload seed")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _group(app: typer.Typer, name: str, help_text: str) -> typer.Typer:
    for info in app.registered_groups:
        if info.name == name and info.typer_instance is not None:
            return info.typer_instance
    sub = typer.Typer(help=help_text, no_args_is_help=True)
    app.add_typer(sub, name=name)
    return sub


def _print_summary(summary: dict, out_dir: Path, as_json: bool = False) -> None:
    if as_json:
        print(json.dumps(summary, indent=2, default=float))
        return
    from rich.table import Table

    table = Table(title=f"{summary['meta']['experiment']} -> {out_dir}")
    cols = ("cumulative_time", "makespan", "slowdown", "mean_wait", "slo_violations", "placed_below_min_utility")
    table.add_column("policy")
    for c in cols:
        table.add_column(c, justify="right")
    for pol, s in summary.items():
        if pol != "meta":
            table.add_row(pol, *(str(s[c]) for c in cols))
    out.print(table)
    if "speedup_of_topo_aware_p" in summary["meta"]:
        out.print("TOPO-AWARE-P speedup in cumulative time: "
                  + ", ".join(f"{k} {v:.2f}x" for k, v in summary["meta"]["speedup_of_topo_aware_p"].items()))


def _activity(ctx: typer.Context, label: str):
    from dlsched.cli import progress

    return progress.Activity(label, progress.enabled(ctx))


def register(app: typer.Typer) -> None:
    experiment = _group(app, "experiment", "Reproduce paper experiments.")
    bench = _group(app, "bench", "Micro-benchmarks.")
    topo = typer.Typer(help="GPU topology graphs (nvidia-smi topo -m).", no_args_is_help=True)
    app.add_typer(topo, name="topo")

    @experiment.command("topo-prototype")
    def topo_prototype(ctx: typer.Context, out_dir: OutOpt, as_json: JsonOpt = False) -> None:
        """Table 1's six jobs on one IBM Minsky under FCFS, BF, TOPO-AWARE and TOPO-AWARE-P (Fig. 8),
        on the main engine with the topology speed model."""
        from dlsched.experiments.topology.evaluation import prototype

        with clear_errors():
            check_out_dir(out_dir)
            with _activity(ctx, "experiment topo-prototype"):
                summary = prototype(out_dir)
            _print_summary(summary, out_dir, as_json)

    @experiment.command("topo-scenario1")
    def topo_scenario1(ctx: typer.Context, out_dir: OutOpt, seed: SeedOpt = 0, jobs: Annotated[int, typer.Option()] = 100,
                       machines: Annotated[int, typer.Option()] = 5, as_json: JsonOpt = False) -> None:
        """Sec. 5.5.1: 100 jobs on 5 Minsky machines (Fig. 10)."""
        from dlsched.experiments.topology.evaluation import scenario

        with clear_errors():
            check_job_count(jobs)
            check_machines(machines)
            check_out_dir(out_dir)
            with _activity(ctx, f"experiment topo-scenario1: {jobs:,} jobs on {machines:,} machines"):
                summary = scenario("topo-scenario1", jobs, machines, out_dir, seed)
            _print_summary(summary, out_dir, as_json)

    @experiment.command("topo-scenario2")
    def topo_scenario2(ctx: typer.Context, out_dir: OutOpt, seed: SeedOpt = 0,
                       jobs: Annotated[int, typer.Option(help="number of jobs (10,000 in the paper)")] = 10_000,
                       machines: Annotated[int, typer.Option(help="number of machines (1,000 in the paper)")] = 1_000,
                       as_json: JsonOpt = False) -> None:
        """Sec. 5.5.2: 10,000 jobs on 1,000 Minsky machines (Fig. 11); --jobs/--machines shrink it."""
        from dlsched.experiments.topology.evaluation import scenario

        with clear_errors():
            check_job_count(jobs)
            check_machines(machines)
            check_out_dir(out_dir)
            with _activity(ctx, f"experiment topo-scenario2: {jobs:,} jobs on {machines:,} machines"):
                summary = scenario("topo-scenario2", jobs, machines, out_dir, seed)
            _print_summary(summary, out_dir, as_json)

    @bench.command("placement")
    def bench_placement_cmd(ctx: typer.Context, machines: Annotated[int, typer.Option()] = 1000,
                            decisions: Annotated[int, typer.Option()] = 500,
                            preset: Annotated[str, typer.Option(help="minsky, dgx1, pcie or nvswitch")] = "dgx1",
                            occupancy: Annotated[float, typer.Option()] = 0.7,
                            postpone: Annotated[bool, typer.Option(help="TOPO-AWARE-P")] = False,
                            seed: SeedOpt = 0, as_json: JsonOpt = False) -> None:
        """Latency (p50/p99 ms) of one TOPO-AWARE placement decision on a loaded cluster."""
        from dlsched.experiments.topology.bench import bench_placement

        with clear_errors():
            check_machines(machines)
            if not 1 <= decisions <= 10**6:
                raise ValueError(f"--decisions must be 1 to 1,000,000, got {decisions:,}")
        with clear_errors(), _activity(ctx, f"bench placement: {decisions:,} decisions on {machines:,} machines"):
            res = bench_placement(machines, decisions, preset, occupancy, postpone, seed)
        if as_json:
            print(json.dumps(res))
        else:
            out.print(f"placement decision on {res['machines']} {res['preset']} machines ({res['gpus']} GPUs, "
                      f"{res['occupancy']:.0%} busy), {res['decisions']} decisions: "
                      f"p50_ms={res['p50_ms']} p99_ms={res['p99_ms']} mean_ms={res['mean_ms']}")

    @topo.command("show")
    def topo_show(file: Annotated[Path, typer.Argument(help="text of `nvidia-smi topo -m`")],
                  as_json: JsonOpt = False) -> None:
        """Parse an nvidia-smi topology matrix and print the physical graph it yields."""
        from dlsched.topology.graph import summary
        from dlsched.topology.smi import load_topo_file

        with clear_errors():
            try:
                smi = load_topo_file(file)
            except ValueError as exc:
                raise ValueError(f"{file}: {exc}") from None
            except OSError as exc:
                raise ValueError(f"{file}: cannot read: {exc.strerror or exc}") from None
            info = summary(smi.machine_graph(file.stem))
        info["nics"] = smi.nics
        info["pcie_switch_groups"] = smi.pix_groups()
        if as_json:
            print(json.dumps(info))
            return
        out.print(f"[bold]{info['name']}[/]: {info['gpus']} GPUs, {info['sockets']} sockets, "
                  f"vertices {info['vertices']}, {info['edges']} edges ({info['nvlink_edges']} NVLink), "
                  f"diameter {info['diameter']}; NICs {', '.join(smi.nics) or '-'}")
        out.print("socket of GPU: " + " ".join(f"GPU{g}:S{s}" for g, s in enumerate(info["socket_of"])))
        out.print("GPU distance matrix (sum of edge weights on the shortest path):")
        width = max(len(str(v)) for row in info["distance_matrix"] for v in row) + 1
        out.print(" " * 6 + "".join(f"G{g}".rjust(width) for g in range(info["gpus"])))
        for g, row in enumerate(info["distance_matrix"]):
            out.print(f"GPU{g}".ljust(6) + "".join(str(v).rjust(width) for v in row))

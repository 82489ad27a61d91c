"""``dlsched experiment backfill``: EASY and conservative backfill with limits, predictions,
predictions + correction and the truth, beside no backfill and greedy backfill, paired per seed
on the built-in workload (docs/backfill.md prints its tables)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out


def register(app: typer.Typer) -> None:
    from dlsched.cli.topology_cmd import _group
    from dlsched.experiments.dlsched.backfill import LIMITS

    experiment = _group(app, "experiment", "Reproduce paper experiments.")

    @experiment.command("backfill")
    def backfill(seeds: Annotated[int, typer.Option("--seeds", help="seeded built-in workloads (seeds 0..N-1)")] = 10,
                 jobs: Annotated[int, typer.Option("--jobs", help="jobs per built-in workload (with --philly: "
                                                   "its first N jobs, 0 = all 68,503)")] = 2000,
                 nodes: Annotated[int, typer.Option("--nodes", help="8-GPU nodes of the one pool the jobs share")] = 32,
                 limits: Annotated[str, typer.Option("--time-limits", help="how every job's time limit is drawn "
                                                     "(see `dlsched simulate --help`)")] = LIMITS,
                 markdown: Annotated[Path | None, typer.Option("--markdown", help="also write the tables as "
                                                               "Markdown to this file")] = None,
                 results: Annotated[Path | None, typer.Option("--results", help="also write the per-seed numbers "
                                                              "as JSON to this file (scripts/backfill_table.py "
                                                              "renders the docs tables from it)")] = None,
                 philly: Annotated[Path | None, typer.Option("--philly", help="the Helios reference run's Philly "
                                                             "trace (input_cluster_log_helios_format.csv.gz) instead "
                                                             "of the built-in workload; seeds draw its limits")] = None,
                 variants: Annotated[str | None, typer.Option("--variants", help="run only these variants "
                                                              "(comma-separated labels; default all)")] = None,
                 update: Annotated[bool, typer.Option("--update", help="with --results: keep the file's other "
                                                      "variants and replace only those run (same workload, seeds, "
                                                      "jobs, nodes and limits)")] = False,
                 as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False) -> None:
        """No backfill, greedy backfill, easy and conservative (limits, predictions, predictions +
        correction, truth): JCT, wait, bounded slowdown, large-job waits, utilisation, broken
        reservations; paired differences with Bonferroni-corrected 95 % CIs."""
        from dlsched.cli.checks import check_out_file
        from dlsched.experiments.dlsched.backfill import experiment as run
        from dlsched.experiments.dlsched.backfill import markdown as tables
        from dlsched.experiments.dlsched.backfill import merge_results, select_variants

        with clear_errors():
            chosen = select_variants(variants)
            kept = _kept(results) if update else None
            for path, option in ((markdown, "--markdown"), (results, "--results")):
                if path is not None:
                    check_out_file(path, option)
            if philly is not None and not philly.is_file():
                raise ValueError(f"--philly {philly}: no such file")
            result = run(seeds, jobs, limits, say=lambda text: console.print(text, highlight=False), nodes=nodes,
                         philly=philly, variants=chosen)
            if kept is not None:
                result.update(merge_results(kept, result))
                result["markdown"] = tables(result["results"], result["jobs"], limits, nodes, result["workload"])
                console.print(f"note: --update kept {len(result['results']) - len(chosen)} variants of {results} "
                              f"and replaced {len(chosen)}", highlight=False)
            if markdown is not None:
                markdown.write_text(result["markdown"] + "\n")
            if results is not None:
                keep = {k: result[k] for k in ("workload", "seeds", "jobs", "nodes", "limits", "results")}
                results.write_text(json.dumps(keep, indent=1) + "\n")
        if as_json:
            out.print_json(json.dumps({k: v for k, v in result.items() if k != "markdown"}, default=float))
            return
        out.print(result["markdown"], highlight=False, markup=False)


def _kept(results: Path | None) -> dict:
    """The ``--results`` file ``--update`` merges into, or a ValueError naming what is wrong with it."""
    if results is None:
        raise ValueError("--update needs --results FILE (the kept numbers to merge into)")
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--update: cannot read {results}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"--update: {results} has no 'results' object (not a --results file)")
    return data

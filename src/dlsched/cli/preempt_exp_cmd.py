"""``dlsched experiment preemption``: srtf-pred with and without preemption guards beside FIFO and
QSSF on the built-in workload, paired per seed (docs/preemption.md prints its table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out


def register(app: typer.Typer) -> None:
    from dlsched.cli.topology_cmd import _group

    experiment = _group(app, "experiment", "Reproduce paper experiments.")

    @experiment.command("preemption")
    def preemption(seeds: Annotated[int, typer.Option("--seeds", help="seeded built-in workloads (seeds 0..N-1)")] = 10,
                   jobs: Annotated[int, typer.Option("--jobs", help="jobs per built-in workload")] = 4000,
                   baseline: Annotated[str, typer.Option("--baseline", help="the variant differences are paired "
                                                         "against: fifo, qssf, srtf-pred, srtf-pred+guards")] = "qssf",
                   markdown: Annotated[Path | None, typer.Option("--markdown", help="also write the table as "
                                                                 "Markdown to this file")] = None,
                   as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False) -> None:
        """srtf-pred (with and without min_run_s / max_evictions / grace_s) vs qssf vs fifo: mean and p95 JCT,
        evictions, paired differences with 95 % CI and wins."""
        from dlsched.cli.checks import check_out_file
        from dlsched.experiments.dlsched.preemption import experiment as run

        with clear_errors():
            if markdown is not None:
                check_out_file(markdown, "--markdown")
            result = run(seeds, jobs, baseline, say=lambda text: console.print(text, highlight=False))
            if markdown is not None:
                markdown.write_text(result["markdown"] + "\n")
        if as_json:
            out.print_json(json.dumps({k: v for k, v in result.items() if k != "markdown"}, default=float))
            return
        out.print(result["markdown"], highlight=False, markup=False)

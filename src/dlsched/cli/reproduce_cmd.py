"""``dlsched reproduce NAME``: one paper result, our table beside the paper's numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out


def register(app: typer.Typer) -> None:
    @app.command("reproduce")
    def reproduce(
        names: Annotated[list[str] | None, typer.Argument(
            metavar="NAME...", help="Reproductions to run (see --list); 'all' runs every one.")] = None,
        list_them: Annotated[bool, typer.Option("--list", help="List the reproductions and exit.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
        html_file: Annotated[Path | None, typer.Option("--html", help="Also write an HTML page here.")] = None,
        shared: Annotated[Path | None, typer.Option(
            "--shared", help="The shared data folder (default: $DLSCHED_SHARED or ../shared).")] = None,
        out_dir: Annotated[Path | None, typer.Option(
            "--out", help="Keep the runs' output here (default: a scratch folder, removed).")] = None,
        seeds: Annotated[int | None, typer.Option(
            "--seeds", help="Seeded workloads for the sharing and backfill reproductions (default 10; horus-table7: 3).")] = None,
        truth: Annotated[str | None, typer.Option(
            "--profiles", help="Ground truth of the sharing reproductions: builtin (default), builtin-raw, lucid, "
                               "a profiles folder or a .json table.")] = None,
    ) -> None:
        """Run a paper reproduction and print our figures beside the paper's."""
        from dlsched.reproduce.base import default_shared
        from dlsched.reproduce.registry import REPRODUCTIONS

        if list_them:
            if as_json:
                import json

                print(json.dumps([{"name": r.name, "title": r.title, "paper": r.paper, "command": r.command,
                                   "needs": list(r.needs)} for r in REPRODUCTIONS.values()], indent=2))
                return
            from rich.table import Table

            table = Table(title="reproductions (dlsched reproduce NAME)")
            for column in ("name", "result", "paper"):
                table.add_column(column)
            for r in REPRODUCTIONS.values():
                table.add_row(r.name, r.title, r.paper)
            out.print(table)
            return
        from dlsched.reproduce.render import print_result, run_reproduction, to_html, to_json

        with clear_errors():
            if not names:
                raise ValueError("name a reproduction (dlsched reproduce --list shows them) or 'all'")
            chosen = list(REPRODUCTIONS) if names == ["all"] else names
            for name in chosen:
                if name not in REPRODUCTIONS:
                    raise ValueError(f"unknown reproduction {name!r}; choose from {', '.join(REPRODUCTIONS)}")
            root = shared if shared is not None else default_shared()
            from dlsched.cli.checks import check_out_dir, check_out_file

            if html_file is not None:   # before the runs (some take a minute), not after them
                check_out_file(html_file, "--html")
            if out_dir is not None:
                check_out_dir(out_dir, "--out")
            if truth is not None:
                from dlsched.models.truth import resolve_truth

                try:
                    resolve_truth(truth)
                except ValueError as exc:
                    raise ValueError(f"--profiles {truth}: {exc}") from None
            chosen_repros = []
            for name in chosen:
                repro = REPRODUCTIONS[name]
                if seeds is not None or truth is not None:
                    if hasattr(repro, "configured"):
                        repro = repro.configured(seeds, truth)
                        if truth is not None and not getattr(repro, "uses_truth", True):
                            console.print(f"note: --profiles does not apply to {name}; it runs on its own workload",
                                          highlight=False)
                    else:
                        console.print(f"note: --seeds/--profiles apply to the sharing reproductions; {name} runs "
                                      "as registered", highlight=False)
                chosen_repros.append(repro)
            results = []
            from dlsched.cli import progress

            for repro in chosen_repros:
                target = out_dir / repro.name if out_dir is not None else None
                with progress.Activity(f"reproduce {repro.name}", progress.enabled()):  # some run a minute
                    results.append(run_reproduction(repro, root, target))
                if not as_json:
                    print_result(results[-1], out)
            if html_file is not None:
                from dlsched.reproduce.render import to_html

                try:
                    html_file.parent.mkdir(parents=True, exist_ok=True)
                    html_file.write_text(to_html(results), encoding="utf-8")
                except OSError as exc:
                    raise ValueError(f"--html {html_file}: cannot write: {exc.strerror or exc}") from None
        if as_json:
            print(to_json(results))
        if html_file is not None:
            console.print(f"HTML page: {html_file}")

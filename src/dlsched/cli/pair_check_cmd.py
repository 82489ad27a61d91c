"""``dlsched interference pair-check``: the pairs of a truth whose combined throughput is below
time slicing (``1/s_a + 1/s_b < 1``), the rule the truths apply to them, and Gavel's V100
Recommendation evidence when the Gavel folder is at hand."""

from __future__ import annotations

import json
import statistics
import sys
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out


def add_pair_check(sub: typer.Typer) -> None:
    @sub.command("pair-check")
    def pair_check(
        truth: Annotated[str, typer.Option("--profiles", help="truth to check: builtin-raw (Gavel's pairs as "
                                           "measured), builtin (capped), lucid, a profiles folder or a .json")] = "builtin-raw",
        gpu: Annotated[str | None, typer.Option(help="only this GPU type of the table (e.g. V100)")] = None,
        limit: Annotated[int, typer.Option(help="list the N worst pairs (0: none)")] = 10,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    ) -> None:
        """Pairs slower together than time slicing, per GPU type, and how the built-in truth handles them."""
        from dlsched.models.pair_sanity import below_time_slicing, combined_throughputs
        from dlsched.models.truth import resolve_truth

        with clear_errors():
            if limit < 0:
                raise ValueError(f"--limit must be >= 0, got {limit}")
            t = resolve_truth(truth)
            table = t.table
            if gpu is not None and gpu not in table.pairs:
                raise ValueError(f"--gpu {gpu!r}: the table has {', '.join(repr(g) for g in table.pairs)}")
            issues = below_time_slicing(table, gpu)
            per_gpu = {}
            for g in table.pairs:
                if gpu is not None and g != gpu:
                    continue
                comb = combined_throughputs(table, g)
                per_gpu[g] = {"pairs": len(comb), "below_time_slicing": sum(1 for i in issues if i.gpu == g),
                              "median_combined": statistics.median(comb) if comb else None}
            evidence = _evidence()
        result = {"truth": t.name, "per_gpu": per_gpu, "capped_by_this_truth": len(t.capped),
                  "worst": [{"gpu": i.gpu, "a": i.a, "b": i.b, "s_a": i.s_a, "s_b": i.s_b, "combined": i.combined}
                            for i in issues[:limit]],
                  "rule": "builtin/lucid/folder truths scale such a pair to time slicing: s' = s x (1/s_a + 1/s_b)",
                  "gavel_recommendation": evidence}
        if as_json:
            sys.stdout.write(json.dumps(result, indent=2) + "\n")
            return
        from rich.table import Table

        tab = Table(title=f"pairs below time slicing in {t.name}")
        for col in ("GPU", "measured pairs", "below time slicing", "median combined throughput"):
            tab.add_column(col, justify="right")
        for g, row in per_gpu.items():
            med = row["median_combined"]
            tab.add_row(g or "(unnamed)", str(row["pairs"]), str(row["below_time_slicing"]),
                        "-" if med is None else f"{med:.2f}")
        out.print(tab)
        if result["worst"]:
            worst = Table(title=f"the {len(result['worst'])} worst")
            for col in ("GPU", "job a", "job b", "s(a|b)", "s(b|a)", "combined"):
                worst.add_column(col, justify="right")
            for w in result["worst"]:
                worst.add_row(w["gpu"], w["a"], w["b"], f"{w['s_a']:.2f}", f"{w['s_b']:.2f}", f"{w['combined']:.2f}")
            out.print(worst)
        console.print(f"rule: {result['rule']}; this truth capped {len(t.capped)} pair(s)", highlight=False)
        if evidence:
            console.print("Gavel Recommendation, isolated steps/s (simulation file / physical cluster):", highlight=False)
            for r in evidence:
                console.print(f"  {r['gpu']:>4} {'consolidated' if r['consolidated'] else 'unconsolidated':>14} "
                              f"{r['job_type']}: {r['sim_steps_per_s']:.1f} / {r['phys_steps_per_s']:.1f}",
                              highlight=False)


def _evidence() -> list[dict]:
    """Gavel's Recommendation rows when the Gavel folder is found, else none (said by the caller)."""
    from dlsched.profiles.gavel_evidence import isolated_rows
    from dlsched.profiles.table import ProfileError

    try:
        return [r for r in isolated_rows() if "512)" in r["job_type"]]
    except ProfileError:
        return []

"""``dlsched interference pair-check``: the pairs of a truth whose combined throughput is below
time slicing (``1/s_a + 1/s_b < 1``), the rule the truths apply to them, the entries equal to the
isolated throughput (``s = 1.000``, used as "no slowdown"), how closely a slowdown follows the
summed utilisation (Spearman's rho per GPU type), and Gavel's V100 Recommendation evidence when
the Gavel folder is at hand."""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import Counter
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
        """Pairs slower together than time slicing, entries equal to the isolated throughput, per GPU type."""
        from dlsched.models.pair_sanity import (
            ISOLATED_RULE,
            below_time_slicing,
            combined_throughputs,
            equal_to_isolated,
            util_slowdown_rho,
        )
        from dlsched.models.truth import resolve_truth

        with clear_errors():
            if limit < 0:
                raise ValueError(f"--limit must be >= 0, got {limit}")
            t = resolve_truth(truth)
            table = t.table
            if gpu is not None and gpu not in table.pairs:
                raise ValueError(f"--gpu {gpu!r}: the table has {', '.join(repr(g) for g in table.pairs)}")
            issues = below_time_slicing(table, gpu)
            isolated = equal_to_isolated(table, gpu)
            per_gpu = {}
            for g in table.pairs:
                if gpu is not None and g != gpu:
                    continue
                comb = combined_throughputs(table, g)
                rho, n_rho = util_slowdown_rho(table, g)
                mine = [e for e in isolated if e.gpu == g]
                per_gpu[g] = {"pairs": len(comb), "below_time_slicing": sum(1 for i in issues if i.gpu == g),
                              "median_combined": statistics.median(comb) if comb else None,
                              "entries": len(table.pairs[g]), "equal_to_isolated": len(mine),
                              "equal_to_isolated_by_first_job": dict(Counter(e.a.rsplit("-bs", 1)[0]
                                                                             for e in mine).most_common()),
                              "rho_summed_util_slowdown": rho, "rho_entries": n_rho}
            evidence = _evidence()
        result = {"truth": t.name, "per_gpu": per_gpu, "capped_by_this_truth": len(t.capped),
                  "worst": [{"gpu": i.gpu, "a": i.a, "b": i.b, "s_a": i.s_a, "s_b": i.s_b, "combined": i.combined}
                            for i in issues[:limit]],
                  "rule": "builtin/lucid/folder truths scale such a pair to time slicing: s' = s x (1/s_a + 1/s_b)",
                  "equal_to_isolated": [{"gpu": e.gpu, "a": e.a, "b": e.b, "s_b": e.s_b} for e in isolated],
                  "equal_to_isolated_rule": ISOLATED_RULE,
                  "gavel_recommendation": evidence}
        if as_json:
            sys.stdout.write(json.dumps(result, indent=2) + "\n")
            return
        from rich.table import Table

        tab = Table(title=f"pairs below time slicing in {t.name}")
        for col in ("GPU", "measured pairs", "below time slicing", "median combined throughput", "entries",
                    "entries = isolated (s = 1.000)", "rho(summed util, slowdown)"):
            tab.add_column(col, justify="right")
        for g, row in per_gpu.items():
            med, rho = row["median_combined"], row["rho_summed_util_slowdown"]
            tab.add_row(g or "(unnamed)", str(row["pairs"]), str(row["below_time_slicing"]),
                        "-" if med is None else f"{med:.2f}", str(row["entries"]), str(row["equal_to_isolated"]),
                        "-" if math.isnan(rho) else f"{rho:.2f} (n = {row['rho_entries']})")
        out.print(tab)
        for g, row in per_gpu.items():
            if row["equal_to_isolated"]:
                firsts = ", ".join(f"{m} {n}" for m, n in row["equal_to_isolated_by_first_job"].items())
                console.print(f"warning: {g or '(unnamed GPU)'}: {row['equal_to_isolated']} of {row['entries']} "
                              "entries equal the "
                              f"isolated throughput (first job: {firsts})", highlight=False)
        if isolated and limit:
            iso = Table(title=f"entries equal to the isolated throughput ({min(limit, len(isolated))} of "
                              f"{len(isolated)}; --json lists all)")
            for col in ("GPU", "job a", "beside b", "s(a|b)", "s(b|a)"):
                iso.add_column(col, justify="right")
            for e in isolated[:limit]:
                iso.add_row(e.gpu or "(unnamed)", e.a, e.b, "1.000", "-" if e.s_b is None else f"{e.s_b:.3f}")
            out.print(iso)
        if isolated:
            console.print(f"rule: {ISOLATED_RULE}", highlight=False)
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

"""``dlsched experiment horus-table6 | horus-table7 | coscheml | colocation-oracle | compare``: the
sharing papers' tables on our engine, printed beside the papers' numbers (``--json`` for the raw
rows; ``--out DIR`` also writes ``DIR/sharing_experiment.json``, which ``dlsched report DIR``
renders). Every command takes ``--seeds N`` (default 10; gains are paired per seed, with a 95 %
CI and wins; every pair of ranked policies is compared too, Bonferroni-corrected, "tied" where the
CI spans 0), ``--max-seeds M`` (the seed rule: a 10-seed table is extended up to M seeds for a
close pair; 0 = never), ``--profiles`` (the truth: builtin, builtin-raw, lucid, a folder or a .json),
``--policies a,b:k=v`` (more rows: any registered policy) and ``--history FILE`` (per-job rate and
co-runners, CSV)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console, out

SeedsOpt = Annotated[int, typer.Option("--seeds", help="number of seeded workloads (seeds 0..N-1); mean +- std, "
                                     "gains paired per seed with a 95 % CI and wins")]
TruthOpt = Annotated[str, typer.Option("--profiles", help="ground truth: builtin (Gavel-derived, pairs capped at time "
                                       "slicing, seeded memory error), builtin-raw, lucid (../shared/profiles/lucid), "
                                       "a profiles folder or a .json table")]
PoliciesOpt = Annotated[str, typer.Option("--policies", help="more rows: registered policies, comma-separated, "
                                          "options as name:key=value (e.g. horus-f:k=5,random-pairing)")]
HistoryOpt = Annotated[Path | None, typer.Option("--history", help="write every job's rate and co-runners over "
                                                 "time (CSV: policy, seed, job, time, rate, co_runners, event)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the rows as JSON")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="also write DIR/sharing_experiment.json (for `dlsched report DIR`)")]
CapOpt = Annotated[int, typer.Option("--max-jobs-per-gpu", help="jobs one GPU may hold for the sharing policies")]
PredOpt = Annotated[str, typer.Option("--predictions", help="real (the shipped predictors) | perfect (= truth)")]
MaxSeedsOpt = Annotated[int, typer.Option("--max-seeds", help="seed rule: a table of >= 10 seeds is run on more "
                                          "seeds, up to this many, when a pair of policies is tied but would "
                                          "separate within it (0 = never extend)")]

RESULT_FILE = "sharing_experiment.json"


def _setup(truth: str, policies: str, history: Path | None, cap: int = 2, out_dir: Path | None = None):
    """The truth, the extra policy rows and the history list (None without --history); the output
    paths are checked first, so an unusable one fails before minutes of simulation."""
    from dlsched.cli.checks import check_out_dir, check_out_file

    if history is not None:
        check_out_file(history, "--history")
    if out_dir is not None:
        check_out_dir(out_dir)
    from dlsched.experiments.sharing.tables import parse_policies
    from dlsched.models.truth import resolve_truth

    extra = parse_policies(policies, cap) if policies else []
    try:
        t = resolve_truth(truth)
    except ValueError as exc:
        raise ValueError(f"--profiles {truth}: {exc}") from None
    return t, extra, ([] if history is not None else None)


def _history(rows: list | None, path: Path | None, truth=None) -> None:
    """After a run: the truth's notes (what it capped), and the history file when asked."""
    for note in getattr(truth, "notes", ()):
        console.print(f"note: {note}", highlight=False)
    if truth is not None:
        from dlsched.models.pair_sanity import equal_to_isolated

        for gpu, pairs in truth.table.pairs.items():
            n = len(equal_to_isolated(truth.table, gpu))
            if n:
                console.print(f"note: truth {truth.name}: {n} of {len(pairs)} {gpu + ' ' if gpu else ''}pair entries "
                              "equal the isolated "
                              "throughput and are used as no slowdown (`dlsched interference pair-check`)",
                              highlight=False)
    if rows is not None and path is not None:
        from dlsched.experiments.history import write_history

        write_history(rows, path)
        console.print(f"history: {len(rows):,} rows written to {path}", highlight=False)


GAIN_COLUMNS = [("gain", "gain", ".1f", True), ("gain_ci_low", "CI low", ".1f", True),
                ("gain_ci_high", "CI high", ".1f", True), ("wins", "wins", ".0f", False)]


def _seeds(n: int) -> list[int]:
    from dlsched.experiments.protocol import check_seeds

    return check_seeds(n)


def _check_cap(cap: int) -> None:
    if cap < 2:
        raise ValueError(f"--max-jobs-per-gpu must be >= 2 for the sharing policies, got {cap}")


def _max_seeds(n: int) -> int | None:
    from dlsched.experiments.protocol import MAX_SEEDS

    if not 0 <= n <= MAX_SEEDS:
        raise ValueError(f"--max-seeds must be between 0 and {MAX_SEEDS:,}, got {n:,}")
    return n or None


def _fmt(value, spec: str = ".1f", pct: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:{spec}} %" if pct else f"{value:{spec}}"


def _emit(result: dict, as_json: bool, out_dir: Path | None, columns: list[tuple[str, str, str, bool]],
          title: str) -> None:
    """Print the rows (a rich table or JSON) and write the result file when asked."""
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / RESULT_FILE).write_text(json.dumps(result, indent=2, default=float))
    if as_json:
        out.print_json(json.dumps(result, default=float))
        return
    from rich.table import Table

    table = Table(title=title)
    for _, head, _, _ in columns:
        table.add_column(head, justify="right")
    for row in result["rows"]:
        table.add_row(*(str(row[key]) if isinstance(row.get(key), str) else _fmt(row.get(key), spec, pct)
                        for key, _, spec, pct in columns))
    out.print(table)
    _print_pairs(result)
    console.print(f"{len(result['seeds'])} seed(s) asked on truth {result.get('truth', 'builtin')} in "
                  f"{result['seconds']:.1f} s" + (f"; written to {out_dir / RESULT_FILE}" if out_dir is not None else ""))


def _points(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:+.1f}"


def _print_pairs(result: dict) -> None:
    """Every pair of ranked policies (paired per seed, Bonferroni-corrected) and the seeds run."""
    from rich.table import Table

    from dlsched.experiments.sharing.pairwise import rule_text

    pairs = result.get("pairs") or []
    if not pairs:
        return
    group = next((k for k in ("workload", "predictions") if k in pairs[0]), None)
    table = Table(title=f"between policies: gain of a minus gain of b, points; {pairs[0]['pairs']} pair(s) "
                  f"per group, CIs at {100 * pairs[0]['level']:.2f} % (Bonferroni: 95 % for all together)")
    heads = ([group] if group else []) + ["a", "b", "a - b", "CI low", "CI high", "seeds a won", "seeds",
                                           "verdict", "seeds a verdict needs"]
    for h in heads:
        table.add_column(h, justify="right")
    for p in pairs:
        table.add_row(*([str(p[group])] if group else []), p["a"], p["b"], _points(p["diff"]),
                      _points(p["diff_ci_low"]), _points(p["diff_ci_high"]),
                      str(p["wins_a"]), str(p["n"]), p["verdict"], p["seeds_needed_text"])
    out.print(table)
    for name, rule in result.get("seed_rule", {}).items():
        console.print(f"seeds{' (' + name + ')' if name else ''}: {rule_text(rule)}", highlight=False)


def register(app: typer.Typer) -> None:
    from dlsched.cli.topology_cmd import _group

    experiment = _group(app, "experiment", "Reproduce paper experiments.")

    @experiment.command("horus-table6")
    def horus_table6(seeds: SeedsOpt = 10, cap: CapOpt = 2, beta: Annotated[int, typer.Option(help="Horus's jobs per round")] = 15,
                     predictions: PredOpt = "real", truth: TruthOpt = "builtin", policies: PoliciesOpt = "",
                     history: HistoryOpt = None, as_json: JsonOpt = False, out_dir: OutOpt = None,
                     max_seeds: MaxSeedsOpt = 30) -> None:
        """Horus Table 6: makespan of FIFO, PAB, OBP, Horus on W-Large / W-Small (testbed: 3 x 4 RTX 2080)."""
        from dlsched.experiments.sharing.tables import horus_table6 as run

        with clear_errors():
            _check_cap(cap)
            t, extra, rows = _setup(truth, policies, history, cap, out_dir)
            result = run(_seeds(seeds), cap, beta, predictions, t, extra, rows, max_seeds=_max_seeds(max_seeds))
            _history(rows, history, t)
        _emit(result, as_json, out_dir, [
            ("workload", "workload", "", False), ("policy", "policy", "", False),
            ("makespan_min", "makespan min", ".1f", False), ("makespan_std_min", "+- std", ".1f", False),
            *GAIN_COLUMNS, ("paper_makespan_min", "paper min", ".1f", False),
            ("paper_std_min", "paper std", ".2f", False), ("paper_gain", "paper gain", ".1f", True),
            ("avg_jct_s", "JCT s", ".0f", False), ("busy_util", "busy GPUs", ".1f", True),
            ("delivered_util", "delivered util", ".1f", True), ("failures", "OOM", ".1f", False),
            ("oom_called_off", "OOM called off", ".1f", False), ("requeued", "re-queued", ".1f", False)],
            "Horus Table 6 (ours beside the paper's; paper: Horus utilisation 69.6 %)")

    @experiment.command("horus-table7")
    def horus_table7(seeds: SeedsOpt = 10, cap: CapOpt = 2, beta: Annotated[int, typer.Option(help="Horus's jobs per round")] = 15,
                     workload: Annotated[str, typer.Option(help="philly-profiled (needs ../shared) or a built-in sharing workload")] = "philly-profiled",
                     jobs: Annotated[int, typer.Option(help="first N jobs of philly-profiled (0 = all)")] = 2000,
                     ks: Annotated[str, typer.Option("--k", help="Horus-f queue counts for the sensitivity rows")] = "3,4,5",
                     nodes: Annotated[int, typer.Option(help="one pool of N nodes (0 = the workload's own VCs)")] = 32,
                     predictions: PredOpt = "real", truth: TruthOpt = "builtin", policies: PoliciesOpt = "",
                     history: HistoryOpt = None, as_json: JsonOpt = False, out_dir: OutOpt = None,
                     max_seeds: MaxSeedsOpt = 30) -> None:
        """Horus Table 7: waiting time of FIFO, OBP, Horus, Horus-f on a production-like trace, and k = 3/4/5."""
        from dlsched.experiments.sharing.tables import horus_table7 as run

        with clear_errors():
            _check_cap(cap)
            try:
                k_list = tuple(int(k) for k in ks.split(","))
            except ValueError:
                raise ValueError(f"--k must be comma-separated integers, got {ks!r}") from None
            if jobs < 0:
                raise ValueError(f"--jobs must be >= 0, got {jobs}")
            if nodes < 0:
                raise ValueError(f"--nodes must be >= 0, got {nodes}")
            t, extra, rows = _setup(truth, policies, history, cap, out_dir)
            result = run(_seeds(seeds), workload, jobs or None, cap, beta, k_list, predictions, nodes or None, t,
                         extra, rows, max_seeds=_max_seeds(max_seeds))
            _history(rows, history, t)
            if result["left_out_too_wide"]:
                console.print(f"left out {result['left_out_too_wide']:.0f} jobs wider than the {nodes}-node pool")
        _emit(result, as_json, out_dir, [
            ("policy", "policy", "", False), ("avg_wait_s", "avg wait s", ".0f", False),
            ("median_wait_s", "median s", ".0f", False), ("std_wait_s", "std s", ".0f", False),
            ("reduction", "reduction vs FIFO", ".1f", True), ("reduction_ci_low", "CI low", ".1f", True),
            ("reduction_ci_high", "CI high", ".1f", True), ("wins", "wins", ".0f", False),
            ("paper_avg_steps", "paper avg (steps)", ".1f", False),
            ("paper_reduction", "paper reduction", ".1f", True), ("makespan_h", "makespan h", ".1f", False),
            ("delivered_util", "delivered util", ".1f", True), ("failures", "OOM", ".1f", False),
            ("seeds_same_decisions_as_horus", "seeds = Horus", ".0f", False)],
            f"Horus Table 7 on {workload} (ours in seconds; the paper counts scheduling steps)")

    @experiment.command("coscheml")
    def coscheml(seeds: SeedsOpt = 10, interval: Annotated[int, typer.Option(help="arrival interval: 15, 30 or 60 s")] = 30,
                 predictions: PredOpt = "real", truth: TruthOpt = "builtin", policies: PoliciesOpt = "",
                 history: HistoryOpt = None, as_json: JsonOpt = False, out_dir: OutOpt = None,
                 max_seeds: MaxSeedsOpt = 30) -> None:
        """Co-scheML Fig. 7-9: JCT, makespan, speed, utilisation of Co-scheML, Binpack, Loadbalance, Mystic."""
        from dlsched.experiments.sharing.tables import coscheml as run

        with clear_errors():
            if interval not in (15, 30, 60):
                raise ValueError(f"--interval must be 15, 30 or 60 (the paper's densities), got {interval}")
            t, extra, rows = _setup(truth, policies, history, out_dir=out_dir)
            result = run(_seeds(seeds), interval, predictions, t, extra, rows, max_seeds=_max_seeds(max_seeds))
            _history(rows, history, t)
        _emit(result, as_json, out_dir, [
            ("policy", "policy", "", False), ("avg_jct_s", "avg JCT s", ".0f", False), *GAIN_COLUMNS,
            ("paper_jct_s", "paper JCT", ".0f", False), ("makespan_s", "makespan s", ".0f", False),
            ("paper_makespan_s", "paper makespan", ".0f", False), ("speed", "speed", ".2f", False),
            ("paper_speedup", "paper speedup", ".2f", False), ("busy_util", "busy GPUs", ".1f", True),
            ("delivered_util", "delivered util", ".1f", True), ("paper_util", "paper util", ".0f", True),
            ("failures", "OOM", ".1f", False)],
            f"Co-scheML Fig. 7-9 ({interval} s arrivals; 3 x 1 Titan Xp)")

    @experiment.command("colocation-oracle")
    def colocation_oracle(seeds: SeedsOpt = 10, cap: CapOpt = 2,
                          workload: Annotated[str, typer.Option(help="a sharing workload (see `dlsched trace generate --help`)")] = "coscheml-30",
                          truth: TruthOpt = "builtin", policies: PoliciesOpt = "", history: HistoryOpt = None,
                          as_json: JsonOpt = False, out_dir: OutOpt = None, max_seeds: MaxSeedsOpt = 30) -> None:
        """Share of the oracle's makespan gain (over no sharing) each policy reaches, real vs perfect predictions."""
        from dlsched.experiments.sharing.tables import colocation_oracle as run

        with clear_errors():
            _check_cap(cap)
            t, extra, rows = _setup(truth, policies, history, cap, out_dir)
            result = run(_seeds(seeds), workload, cap, t, extra, rows, max_seeds=_max_seeds(max_seeds))
            _history(rows, history, t)
        _emit(result, as_json, out_dir, [
            ("predictions", "predictions", "", False), ("policy", "policy", "", False),
            ("makespan_s", "makespan s", ".0f", False), ("avg_jct_s", "avg JCT s", ".0f", False),
            *GAIN_COLUMNS, ("share_of_oracle_gain", "share of oracle gain", ".0f", True),
            ("failures", "OOM", ".1f", False)],
            f"Co-location oracle comparison on {workload}")

    @experiment.command("compare")
    def compare(policies: Annotated[str, typer.Option("--policies", help="registered policies, comma-separated, "
                                                      "options as name:key=value")],
                workload: Annotated[str, typer.Option(help="a sharing workload: horus-wlarge, horus-wsmall, "
                                                      "coscheml-15/30/60, philly-profiled")] = "horus-wlarge",
                seeds: SeedsOpt = 10, cap: CapOpt = 2, predictions: PredOpt = "real", truth: TruthOpt = "builtin",
                jobs: Annotated[int, typer.Option(help="first N jobs of philly-profiled (0 = all)")] = 0,
                nodes: Annotated[int, typer.Option(help="one pool of N nodes (0 = the workload's own VCs)")] = 0,
                history: HistoryOpt = None, as_json: JsonOpt = False, out_dir: OutOpt = None,
                max_seeds: MaxSeedsOpt = 30) -> None:
        """Any registered policies on a sharing workload beside no sharing: makespan, paired gain (95 % CI, wins)."""
        from dlsched.experiments.sharing.tables import compare as run
        from dlsched.workloads import WORKLOADS

        with clear_errors():
            _check_cap(cap)
            if workload not in WORKLOADS:
                raise ValueError(f"--workload: unknown {workload!r}; choose from {', '.join(WORKLOADS)}")
            if jobs < 0 or nodes < 0:
                raise ValueError(f"--jobs and --nodes must be >= 0, got {jobs}, {nodes}")
            t, specs, rows = _setup(truth, policies, history, cap, out_dir)
            result = run(_seeds(seeds), workload, specs, predictions, t, jobs or None, nodes or None, rows,
                         max_seeds=_max_seeds(max_seeds))
            _history(rows, history, t)
        _emit(result, as_json, out_dir, [
            ("policy", "policy", "", False), ("makespan_s", "makespan s", ".0f", False),
            ("makespan_std_s", "+- std", ".0f", False), *GAIN_COLUMNS, ("avg_jct_s", "avg JCT s", ".0f", False),
            ("avg_wait_s", "avg wait s", ".0f", False), ("delivered_util", "delivered util", ".1f", True),
            ("failures", "OOM", ".1f", False)],
            f"{workload}: policies beside no sharing (truth {result['truth']})")

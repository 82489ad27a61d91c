"""``dlsched whatif LOG --policy NAME --queues FILE``: the live service's state at a moment of its
recorded log, run forward under the recorded policy and fixed VCs and under another policy, other
queues (quotas that borrow and lend, the cluster file's ``[[queues]]``), or both
(docs/eta.md#what-if, docs/queues.md#what-if-on-quotas)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from dlsched.cli.common import clear_errors, console, out
from dlsched.run.config import OptionError


def _s(x: float | None) -> str:
    return "-" if x is None else "never" if math.isinf(x) else f"{x:,.0f}"


def _signed(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else ("never" if math.isinf(x) else f"{x:+,.0f}")


def _read_queues(path: Path):
    """The ``[[queues]]`` tables of ``path``: the cluster file's format, alone in the file as in the
    live service's ConfigMap (``queues.toml``); ValueError naming the file, the line and the key."""
    from dlsched.traces.cluster_queues import parse_queues_text

    if not path.is_file():
        raise FileNotFoundError(f"--queues: {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--queues: {path} is not UTF-8 text") from None
    specs = parse_queues_text(text, f"--queues {path}")
    if not specs:
        raise ValueError(f"--queues {path}: no [[queues]] tables (docs/queues.md#what-if-on-quotas)")
    return specs


def register(app: typer.Typer) -> None:
    @app.command("whatif")
    def whatif_cmd(
        log: Path = typer.Argument(..., metavar="LOG", help="Event log written by `dlsched serve --record LOG`."),
        policy: str | None = typer.Option(None, help="Policy from the registry to compare with the recorded one "
                                             "(default: the recorded one; give it, --queues or both)."),
        queues: Path | None = typer.Option(None, "--queues", metavar="FILE.toml",
                                              help="[[queues]] tables (the cluster file's format) for the other "
                                              "run: quotas that borrow and lend. The log's run had fixed VCs."),
        param: list[str] = typer.Option([], "--param", help="KEY=VALUE parameter of --policy (repeatable)."),
        placement: str | None = typer.Option(None, help="Placement of --policy (default: the policy's own)."),
        at: float | None = typer.Option(None, "--at", help="Seconds after the log's first event (default: "
                                           "the last moment with a pending pod, said in a note)."),
        durations: str = typer.Option("predicted", help="predicted: the mean run time of the jobs finished before "
                                      "the cut; recorded: each job's run time in the whole log (hindsight)."),
        as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    ) -> None:
        """Start time of every pending pod under the recorded policy and under --policy and/or --queues, from the log."""
        from dlsched.cli.policy_factory import build_policy
        from dlsched.service.log import read_log, recorded_params
        from dlsched.service.whatif import split_params
        from dlsched.service.whatif_log import state_at
        from dlsched.sim.eta import EtaEstimator
        from dlsched.sim.whatif import never_reasons, what_if

        with clear_errors():
            if not log.is_file():
                raise FileNotFoundError(f"LOG: {log} is not a file")
            if policy is None and queues is None:
                raise ValueError("give --policy NAME, --queues FILE.toml or both: what should the other run change?")
            if policy is None and (param or placement is not None):
                raise ValueError("--param and --placement go with --policy NAME")
            if at is not None and not math.isfinite(at):
                raise ValueError(f"--at {at}: want a finite number of seconds")
            try:
                config = read_log(log).config
            except UnicodeDecodeError:
                raise ValueError(f"LOG: {log} is not a text event log") from None
            cap = int(config.get("max_jobs_per_gpu") or 1)
            recorded = str(config.get("policy") or "fifo")
            try:
                current = build_policy(recorded, recorded_params(config), str(config.get("placement") or "") or None,
                                       bool(config.get("backfill")), cap > 1)
            except ValueError as exc:
                raise ValueError(f"LOG {log}: its recorded policy cannot be rebuilt ({exc})") from None
            other = None
            if policy is not None:
                try:
                    other = build_policy(policy, split_params(param, "--param"), placement, False, cap > 1)
                except OptionError as exc:   # its message names the option already (--policy: unknown ...)
                    raise ValueError(str(exc).replace("--policy:", f"--policy {policy}:", 1)) from None
                except ValueError as exc:
                    raise ValueError(f"--policy {policy}: {exc}") from None
            specs = _read_queues(queues) if queues is not None else None
            moment = state_at(log, current, at, durations)
            notes = list(moment.notes)
            if specs is None and other is not None and _same_policy(current, other, param):
                notes.append(f"--policy {policy} is the recorded policy with its placement and parameters: "
                             "both runs are the same, so every difference is 0 (change --policy, --param, "
                             "--placement or give --queues)")
            estimator = EtaEstimator(current, resubmit=True)   # the log has no queue keys: both from predictions
            try:
                result = what_if(estimator, other, moment.state, moment.now, specs)
            except ValueError as exc:
                if specs is None:
                    raise
                raise ValueError(f"--queues {queues}: {exc}") from None
        names = moment.names
        never = never_reasons(moment.state, result)
        if as_json:
            data = result.as_dict(names)
            data.update(notes=notes, never={names.get(k, k): v for k, v in never.items()})
            data.update(log=str(log), at=moment.now - moment.t0, durations=durations, mean_run=moment.mean_run,
                        skipped=moment.skipped, recorded_queues=[q.name for q in moment.queues])
            out.print_json(json.dumps(data))
            return
        for note in notes:
            console.print(f"note: {note}", soft_wrap=True, highlight=False, markup=False)
        st = moment.state
        dur = (f"{moment.mean_run:,.0f} s (mean run time before the cut)" if moment.mean_run is not None
               else "1 h (no job had finished)") if durations == "predicted" else "each job's recorded run time"
        other_label = result.other_policy + (f" with queues {result.other_queues}" if result.other_queues else "")
        console.print(f"what-if at {moment.now - moment.t0:g} s of {log}: {st.n_pending} pending, "
                      f"{st.n_running} running; {result.current_policy} (recorded"
                      f"{', with its queues' if moment.queues else ''}) vs {other_label}; "
                      f"durations: {dur}" + (f"; left out: {moment.skipped}" if moment.skipped else ""),
                      soft_wrap=True, highlight=False)
        from rich.table import Table

        jobs = Table(title="start, seconds after the cut")
        other_col = result.other_policy + (" + queues" if result.other_queues else "")
        if other_col == result.current_policy:
            other_col += " (other)"
        for col in ("pod", "VC", "GPUs", result.current_policy, other_col, "difference"):
            jobs.add_column(col, justify="left" if col in ("pod", "VC") else "right")
        for j in result.jobs:
            jobs.add_row(names.get(j.job_id, j.job_id), j.vc, str(j.gpus), _s(j.current - result.now),
                         _s(j.other - result.now), _signed(j.diff))
        out.print(jobs)
        queues = Table(title="waits (seconds from submission)")
        for col in ("queue", "jobs", "mean, current", "mean, other", "change", "median, current", "median, other",
                    "change ", "earlier", "later", "never (cur/other)"):
            queues.add_column(col, justify="left" if col == "queue" else "right")
        rows = [*result.by_queue().items(), ("all", result.summary())]
        for name, s in rows:
            queues.add_row(name, str(s["jobs"]), _s(s["mean_wait_current"]), _s(s["mean_wait_other"]),
                           _signed(s["mean_wait_change"]), _s(s["median_wait_current"]), _s(s["median_wait_other"]),
                           _signed(s["median_wait_change"]), str(s["earlier"]), str(s["later"]),
                           f"{s['never_current']}/{s['never_other']}")
        out.print(queues)
        for uid, why in never.items():
            console.print(f"note: {names.get(uid, uid)} never starts in {why}", soft_wrap=True, highlight=False,
                          markup=False)


def _same_policy(current, other, param: list[str]) -> bool:
    """Whether --policy (without --param) is the recorded policy with the recorded placement."""
    return (other.name == current.name and not param
            and getattr(other, "placement_name", "") == getattr(current, "placement_name", ""))

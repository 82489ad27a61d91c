"""``dlsched replay LOG``: the live service's recorded arrivals through the simulator, any policy;
``--stimuli``: its recorded stimuli through the kernel's entry point, nominations and evictions
compared. The log is read and checked by the one reader (:mod:`dlsched.service.log`)."""

from __future__ import annotations

from pathlib import Path

import typer

from dlsched.cli.common import clear_errors, console


def register(app: typer.Typer) -> None:
    @app.command("replay")
    def replay_cmd(
        log: Path = typer.Argument(..., metavar="LOG", help="Event log written by `dlsched serve --record LOG`."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Run directory to write (as `dlsched "
                                           "simulate`); not with --stimuli."),
        stimuli: bool = typer.Option(False, "--stimuli", help="Feed the recorded stimuli through the kernel "
                                     "(Kernel.handle) and report how its nominations and evictions agree with the "
                                     "recorded ones."),
        policy: str | None = typer.Option(None, help="Policy from the registry (default: the recorded one)."),
        placement: str | None = typer.Option(None, help="Placement (default: the recorded one with the "
                                                "recorded policy, else the policy's own)."),
        param: list[str] | None = typer.Option(None, "--param", metavar="NAME=VALUE",
                                                  help="A parameter of the policy's own (repeatable; `dlsched "
                                                       "policies` lists them), as for `dlsched simulate`."),
    ) -> None:
        """Replay what the live service saw in the simulator; `dlsched report OUT` reads the result."""
        from dlsched.cli.checks import check_out_dir
        from dlsched.run.params import parse_assignments

        with clear_errors():
            if not log.is_file():
                raise FileNotFoundError(f"LOG: {log} is not a file")
            if stimuli:
                if out is not None:
                    raise ValueError(f"--out {out}: --stimuli writes no run directory (it reports agreement)")
            elif out is None:
                raise ValueError("--out is needed (the run directory to write), or --stimuli")
            else:
                check_out_dir(out, "--out")
            params = parse_assignments(param or ())
            if policy is not None:  # a wrong name or parameter fails before the log is read
                _check_choice(policy, placement, params)
            from dlsched.run.replay import replay
            from dlsched.service.log import read_log

            try:
                if stimuli:
                    _stimuli(log, policy, placement, params)
                    return
                _notes(read_log(log).notes)   # checked (file, line, field) before the run starts
                summary = replay(log, out, policy, placement, params=params)
            except UnicodeDecodeError:
                raise ValueError(f"LOG: {log} is not a text event log") from None
            except IsADirectoryError:
                raise ValueError(f"LOG: {log} is not a file") from None
        left = summary.get("left_out") or {}
        console.print(f"replayed {summary.get('jobs')} jobs with {summary.get('policy')}: avg JCT "
                      f"{summary.get('avg_jct', float('nan')):.1f} s, avg queue delay "
                      f"{summary.get('avg_queue_delay', float('nan')):.1f} s; written to {out}"
                      + (f" (left out: {left})" if left else ""), soft_wrap=True, highlight=False)


def _check_choice(policy: str, placement: str | None, params: dict[str, str]) -> None:
    """The chosen policy, placement and parameters make a run (OptionError naming the option)."""
    from dlsched.run.build import check
    from dlsched.run.config import PlacementConfig, RunConfig
    from dlsched.run.params import policy as policy_config

    check([RunConfig(policy=policy_config(policy, **params), placement=PlacementConfig(placement))])


def _notes(notes: list[str]) -> None:
    for note in notes:
        console.print(f"note: {note}", soft_wrap=True, highlight=False, markup=False)


def _stimuli(log: Path, policy: str | None, placement: str | None, params: dict[str, str]) -> None:
    """Print the agreement of a replay of stimuli: counts, then the first difference if any."""
    from dlsched.cli.policy_factory import build_policy
    from dlsched.service.feed import describe, replay_stimuli
    from dlsched.service.log import read_log, recorded_params

    def make(name: str, place: str | None, backfill: bool = False, share: bool = False):
        # the recorded policy runs with the recorded parameters (--param overrides them)
        given = {**recorded_params(read_log(log).config), **params} if policy is None else params
        return build_policy(name, given, place, backfill, share)

    result = replay_stimuli(log, make, policy, placement)
    _notes(result.notes)
    total = max(len(result.recorded), len(result.replayed))
    console.print(f"fed {result.stimuli} stimuli through the kernel with {result.policy}: "
                  f"{result.agreeing} of {total} nominations agree ({100 * result.rate:.1f}%; "
                  f"{len(result.recorded)} recorded, {len(result.replayed)} replayed)",
                  soft_wrap=True, highlight=False, markup=False)
    diff = result.first_difference
    if diff is not None:
        console.print(f"first difference at nomination {diff['index'] + 1}: recorded "
                      f"{describe(diff['recorded'])}, replayed {describe(diff['replayed'])}",
                      soft_wrap=True, highlight=False, markup=False)
    want, got = result.recorded_evictions, result.replayed_evictions
    if want or got:
        line = (f"evictions: {result.evictions_agreeing} of {max(len(want), len(got))} agree "
                f"({len(want)} recorded, {len(got)} replayed)")
        if not result.evictions_agree:
            n = result.evictions_agreeing
            line += (f"; first difference at eviction {n + 1}: recorded {want[n] if n < len(want) else 'nothing'}, "
                     f"replayed {got[n] if n < len(got) else 'nothing'}")
        console.print(line, soft_wrap=True, highlight=False, markup=False)

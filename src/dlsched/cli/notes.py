"""Notes for options the user gave that do nothing in the chosen mode (e.g. --lam with FIFO).

An ignored option usually means the user expected a different run; saying so costs one line.
Only options given on the command line are checked (defaults are never "ignored").
"""

from __future__ import annotations

import typer

ENERGY_ONLY = {"boot_delay": "--boot-delay", "idle_timeout": "--idle-timeout", "buffer": "--buffer"}
ENERGY_OWNER = {"idle_timeout": "vanilla", "buffer": "ces"}
QSSF_ONLY = {"lam": "--lam", "refit_every": "--refit-every"}
TOPOLOGY_PLACERS = ("topo-aware", "topo-aware-p", "socket-best-fit")


def given(ctx: typer.Context, name: str) -> bool:
    """True when parameter ``name`` came from the command line or the environment, not its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def unused_options(ctx: typer.Context, policies: list[str], placement: str | None,
                   energy: str | None) -> list[str]:
    """One note per given option that the chosen policies, placement and energy mode never read.
    No ``placement`` means each policy's own default placement (consolidate for most)."""
    from dlsched.registry import POLICIES

    if placement is None:
        placement = ",".join(dict.fromkeys(getattr(POLICIES.get(p), "default_placement", "consolidate")
                                           for p in policies))
    notes = []
    readers = [p for p in policies if getattr(POLICIES.get(p), "options_from_cli", None) is not None]
    for name, flag in QSSF_ONLY.items():
        if given(ctx, name) and not readers:
            verb = "ignores" if len(policies) == 1 else "ignore"
            notes.append(f"{flag} is read only by qssf; {', '.join(policies)} {verb} it")
    for name, flag in ENERGY_ONLY.items():
        if not given(ctx, name):
            continue
        if energy is None:
            notes.append(f"{flag} does nothing without --energy ces|vanilla")
        elif name in ENERGY_OWNER and ENERGY_OWNER[name] != energy:
            notes.append(f"{flag} is read only by --energy {ENERGY_OWNER[name]}, not {energy}")
    if given(ctx, "interference_model") and "coscheml" not in policies:
        notes.append(f"--interference-model is read only by coscheml; {', '.join(policies)} "
                     f"{'ignores' if len(policies) == 1 else 'ignore'} it")
    if given(ctx, "topology") and not any(p.split(":")[0].strip() in TOPOLOGY_PLACERS
                                          for p in placement.split(",")):
        notes.append(f"--topology sets the node topology for the speed model only: placement {placement} "
                     f"does not read it ({', '.join(TOPOLOGY_PLACERS)} do)")
    return notes

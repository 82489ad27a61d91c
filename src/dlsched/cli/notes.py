"""Notes for options the user gave that do nothing in the chosen mode (e.g. --lam with FIFO).

An ignored option usually means the user expected a different run; saying so costs one line.
Only options given on the command line are checked (defaults are never "ignored"). Which policy
reads which option comes from the policies' parameter classes, not from a list here.
"""

from __future__ import annotations

import typer

TOPOLOGY_PLACERS = ("topo-aware", "topo-aware-p", "socket-best-fit")


def given(ctx: typer.Context, name: str) -> bool:
    """True when parameter ``name`` came from the command line or the environment, not its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def unused_options(configs: list, given_keys: set[str], unread_params: list[str],
                   via_param: set[str] = frozenset()) -> list[str]:
    """One note per given option that the runs ``configs`` (one per policy) never read.
    ``unread_params``: the given policy parameters none of the policies declares; ``via_param``:
    the names given as ``--param NAME=VALUE`` (a parameter some compared policies ignore is noted)."""
    from dlsched.registry import POLICIES
    from dlsched.run.build import ignored
    from dlsched.run.config import flag
    from dlsched.run.params import readers

    policies = [c.policy.name for c in configs]
    notes = []
    verb = "ignores" if len(policies) == 1 else "ignore"
    for key in unread_params:
        who = readers(key)
        notes.append(f"{flag(key)} is read only by {', '.join(who) or 'no policy'}; {', '.join(policies)} {verb} it")
    if len(policies) > 1:   # compare: a parameter some of the policies read and the others do not
        for key in sorted((set(given_keys) | set(via_param)) - set(unread_params)):
            who = readers(key)
            ignoring = [p for p in policies if p not in who]
            if who and ignoring:
                spelt = f"--param {key}" if key in via_param else flag(key)
                verb_here = "ignores" if len(ignoring) == 1 else "ignore"
                notes.append(f"{spelt} is read only by {', '.join(p for p in policies if p in who)} here; "
                             f"{', '.join(ignoring)} {verb_here} it")
    notes.extend(message for _, message in ignored(configs[0], given_keys))
    placement = configs[0].placement.name
    if placement is None:
        placement = ",".join(dict.fromkeys(getattr(POLICIES.get(p), "default_placement", "consolidate")
                                           for p in policies))
    if "topology" in given_keys and not any(p.split(":")[0].strip() in TOPOLOGY_PLACERS
                                            for p in placement.split(",")):
        notes.append(f"--topology sets the node topology for the speed model only: placement {placement} "
                     f"does not read it ({', '.join(TOPOLOGY_PLACERS)} do)")
    return notes

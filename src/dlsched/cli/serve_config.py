"""``dlsched serve``'s flags -> a :class:`~dlsched.run.config.ServiceConfig`, and that
configuration as the compact block the service prints at start-up.

The policy part goes through :func:`dlsched.run.options.policy_config`, the function ``simulate``
builds its policy with: the generated flags (``--threshold``, ``--lam``...) and ``--param
NAME=VALUE`` are checked alike in both commands, and a parameter the policy does not read is a
``note:`` (a flag) or an error (a ``--param``, surely misspelt), as in ``simulate``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dlsched.run.config import PlacementConfig, PredictionConfig, ServiceConfig, ServiceTimings


def given_policy_flags(ctx, values: dict[str, object]) -> dict[str, object]:
    """The generated policy flags (``ctx.command``'s, a :class:`~dlsched.cli.run_options.RunCommand`)
    that came from the command line or the environment, with their values: the others are left
    out so that each policy keeps its own defaults."""
    out = {}
    for param in getattr(ctx.command, "_policy_flags", ()):
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT") and param.name in values:
            out[param.name] = values[param.name]
    return out


def service_config(policy: str, backfill: bool, flags: dict[str, object], param: list[str] | None, *,
                   placement: str | None, max_jobs_per_gpu: int, predictions: PredictionConfig,
                   timings: ServiceTimings, note: Callable[[str], None], scheduler_name: str, vc_map: str,
                   default_vc: str, queues_configmap: str, nudge: bool, record: Path | None,
                   mode: str = "extender") -> ServiceConfig:
    """The service's configuration; OptionError (a ValueError) naming the flag for a bad value,
    ``note`` told of each given policy flag that ``policy`` does not read. ``scheduler_name``
    '' : the mode's own (``default-scheduler`` as an extender, ``dlsched`` as a scheduler)."""
    from dlsched.run.options import check_unread, policy_config
    from dlsched.run.params import parse_assignments, readers

    if mode not in MODES:
        raise ValueError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
    scheduler_name = scheduler_name or DEFAULT_SCHEDULER_NAMES[mode]
    if mode == "scheduler" and nudge:
        nudge = False   # nudges move pods in kube-scheduler's queue; in this mode dlsched binds them itself
    generic = parse_assignments(param or ())
    chosen, unread = policy_config(policy, flags, generic, backfill)
    check_unread([policy], flags, generic, set(unread))
    for key in unread:
        who = readers(key)
        note(f"--{key.replace('_', '-')} is read only by {', '.join(who) or 'no policy'}; {policy} ignores it")
    return ServiceConfig(policy=chosen, placement=PlacementConfig(placement, max_jobs_per_gpu),
                         predictions=predictions, timings=timings, scheduler_name=scheduler_name, vc_map=vc_map,
                         default_vc=default_vc, queues_configmap=queues_configmap, nudge=nudge, record=record,
                         mode=mode)


MODES = ("extender", "scheduler")
DEFAULT_SCHEDULER_NAMES = {"extender": "default-scheduler", "scheduler": "dlsched"}


def _s(value: object) -> str:
    return f"{value:g} s" if isinstance(value, (int, float)) else str(value)


def config_lines(described: dict) -> list[str]:
    """The effective configuration (:meth:`ServiceConfig.describe` with what the service chose:
    the placement, the eviction grace) as a few lines for the start-up output."""
    d = described
    params = ", ".join(f"{k}={v}" for k, v in d["params"].items())
    why = ("--grace-seconds" if d.get("grace_seconds") is not None else
           "the policy's grace_s" if (d["params"].get("grace_s") or 0) > 0 else "default")
    grace = f"{d['eviction_grace_s']} s ({why})"
    predicted = (f"predicted from dlsched.io/model (models in {d['model_dir']})" if d["predict_resources"] and
                 d.get("model_dir") else "predicted from dlsched.io/model" if d["predict_resources"] else "off")
    policy_line = (f"policy {d['policy']} ({params or 'no parameters'}), placement {d['placement']}, "
                   f"backfill {'on' if d['backfill'] else 'off'}")
    sharing = (f"sharing: at most {d['max_jobs_per_gpu']} job(s) per GPU; predictions: {predicted}, default GPU "
               f"{d['gpu']}, agent readings after {_s(d['observe_after'])}")
    clocks = (f"timings: ETA every {_s(d['eta_interval'])} (rewritten on a {_s(d['eta_threshold'])} move), "
              f"unseen-pod TTL {_s(d['unseen_pod_ttl'])}, gang permit {_s(d['gang_permit_timeout'])} / arrival "
              f"{_s(d['gang_arrival_timeout'])}, eviction grace {grace}")
    how = ("as their scheduler (Bindings posted directly)" if d.get("mode") == "scheduler"
           else "as kube-scheduler's extender")
    cluster = (f"pods of {d['scheduler_name']} {how}; VCs {d['vc_map'] or '-'} (default {d['default_vc']}); queues "
               f"{d['queues_configmap'] or 'none'}; nudge {'on' if d['nudge'] else 'off'}; "
               f"store {d.get('store', '-')}; record {d['record'] or '-'}")
    return [policy_line, sharing, clocks, cluster]


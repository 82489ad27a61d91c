"""A policy object built as ``simulate`` builds it, without a whole run: for ``dlsched serve``
(from its :class:`~dlsched.run.config.ServiceConfig`), ``dlsched whatif`` and the live what-if
(``--param KEY=VALUE`` texts)."""

from __future__ import annotations

from dlsched.run.config import PlacementConfig, PolicyConfig


def policy_from_config(policy: PolicyConfig, placement: PlacementConfig):
    """The policy object ``policy`` describes (its parameters reach the constructor through the
    same :func:`~dlsched.run.params.constructor_options` as a simulation's), placed by
    ``placement`` and sharing GPUs when it allows more than one job per GPU; ValueError naming
    the placement when that is not one."""
    return _make(policy, placement.name, placement.max_jobs_per_gpu > 1)


def _make(policy: PolicyConfig, placement: str | None, share: bool):
    from dlsched.registry import make_policy
    from dlsched.run.params import PolicyContext, constructor_options

    options = {**constructor_options(policy.name, policy.params, PolicyContext()), **dict(policy.objects)}
    try:
        return make_policy(policy.name, placement, backfill=policy.backfill, share=share, **options)
    except KeyError as exc:
        raise ValueError(f"placement {placement!r}: {exc}") from None


def build_policy(name: str, params: dict[str, str] | None = None, placement: str | None = None,
                 backfill: bool = False, share: bool = False):
    """The policy object; ValueError naming the policy, a parameter it lacks or a bad value."""
    from dlsched.run.params import make_params

    built, unknown = make_params(name, dict(params or {}))
    if unknown:
        raise ValueError(f"policy {name} has no parameter {unknown[0]!r}")
    return _make(PolicyConfig(name, built, backfill), placement, share)

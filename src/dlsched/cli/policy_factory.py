"""A policy by registry name with ``--param KEY=VALUE`` parameters, as ``simulate`` builds it:
what ``dlsched whatif`` and the live what-if (``dlsched serve``) need without a whole run."""

from __future__ import annotations


def build_policy(name: str, params: dict[str, str] | None = None, placement: str | None = None,
                 backfill: bool = False, share: bool = False):
    """The policy object; ValueError naming the policy, a parameter it lacks or a bad value."""
    from dlsched.registry import make_policy
    from dlsched.run.params import PolicyContext, constructor_options, make_params

    built, unknown = make_params(name, dict(params or {}))
    if unknown:
        raise ValueError(f"policy {name} has no parameter {unknown[0]!r}")
    options = constructor_options(name, built, PolicyContext())
    try:
        return make_policy(name, placement, backfill=backfill, share=share, **options)
    except KeyError as exc:
        raise ValueError(f"placement {placement!r}: {exc}") from None

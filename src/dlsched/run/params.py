"""Policy parameters: each policy declares its own frozen dataclass, ``Params``.

A policy class may set ``Params`` (a frozen dataclass; :class:`~dlsched.run.config.NoParams` when
it has none) and, when its constructor wants something other than the fields themselves,
``from_params(params, context) -> dict`` of constructor keywords (QSSF loads its priority file;
Co-scheML takes the run's profile table from ``context``). Nothing here knows a policy by name:
``--lam`` reaches QSSF because ``lam`` is a field of ``QssfParams``, and a new policy with an option
of its own needs no line outside its file and the registry: its flag is generated from the field
(:func:`dlsched.run.options.policy_options`), and ``--param NAME=VALUE`` sets it as text.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType

from dlsched.run.config import NoParams, OptionError, flag


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy's constructor may need from the rest of the run (not from its own options)."""

    compat: str = "none"
    origin: object = None            # the trace's wall-clock origin (calendar features)
    profiles: str | None = None      # the run's profile table when one was named


def params_class(policy: str) -> type:
    """The parameter dataclass policy ``policy`` declares (NoParams when none)."""
    from dlsched.registry import POLICIES, policy_params

    if policy not in POLICIES:
        raise OptionError("policy", f"--policy: unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    return policy_params(policy) or NoParams


def field_kinds(params_cls: type) -> dict[str, tuple[type, bool]]:
    """Field name -> (type, None allowed) of a parameter dataclass."""
    hints = typing.get_type_hints(params_cls)
    out = {}
    for f in dataclasses.fields(params_cls):
        hint = hints[f.name]
        if typing.get_origin(hint) in (typing.Union, UnionType):
            inner = [a for a in typing.get_args(hint) if a is not NoneType]
            out[f.name] = (inner[0], True)
        else:
            out[f.name] = (hint, False)
    return out


def convert(key: str, value: object, kind: type, optional: bool) -> object:
    """``value`` (from YAML or from ``NAME=VALUE`` text) as a ``kind``; OptionError says what was expected."""
    if value is None or (isinstance(value, str) and optional and value.lower() in ("", "none", "null")):
        if optional:
            return None
        raise OptionError(key, f"{flag(key)} must not be empty (expected {kind.__name__})")
    text = value if isinstance(value, str) else None
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in ("true", "false", "yes", "no", "1", "0"):
                return text.lower() in ("true", "yes", "1")
            raise ValueError
        if kind is int:
            if isinstance(value, (bool, float)):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if isinstance(value, (dict, list)):
            raise TypeError
        return Path(value) if kind is Path else str(value)
    except (TypeError, ValueError):
        what = {bool: "true or false", int: "an integer", float: "a number"}.get(kind, kind.__name__)
        # text reaches here from --param NAME=VALUE (a flag's value is typed by the command line)
        raise OptionError(key, f"--param {key} expects {what}, got {value!r}") from None


def make_params(policy: str, given: dict[str, object]) -> tuple[object, list[str]]:
    """``policy``'s parameter dataclass from the given option values (those that are its fields),
    and the names of the given options it does not read."""
    cls = params_class(policy)
    kinds = field_kinds(cls)
    mine = {k: convert(k, v, *kinds[k]) for k, v in given.items() if k in kinds}
    for key, value in mine.items():   # one rule for every policy: a number parameter is finite
        if isinstance(value, float) and not math.isfinite(value):
            raise OptionError(key, f"--param {key} must be a finite number, got {value}")
    try:
        params = cls(**mine)
    except OptionError:
        raise
    except (TypeError, ValueError) as exc:
        key = next((k for k in mine if flag(k) in str(exc)), next(iter(mine), "policy"))
        raise OptionError(key, str(exc)) from None
    return params, [k for k in given if k not in kinds]


def policy(name: str, backfill: bool = False, **params: object):
    """A :class:`~dlsched.run.config.PolicyConfig` for policy ``name`` with these parameters
    (checked against the parameter class it declares)."""
    from dlsched.run.config import PolicyConfig

    built, unknown = make_params(name, params)
    if unknown:
        raise OptionError(unknown[0], f"policy {name} has no parameter {unknown[0]!r} ({declared([name])})")
    return PolicyConfig(name, built, backfill)


def all_params() -> dict[str, dict[str, tuple[type, bool]]]:
    """Every registered policy's parameter fields: policy -> field -> (type, optional). Imports
    every policy module (for listings, sweeps and tests; never on a plain run's start-up)."""
    from dlsched.registry import POLICIES, policy_params

    return {name: field_kinds(policy_params(name) or NoParams) for name in POLICIES}


def declared(policies: typing.Iterable[str]) -> str:
    """What ``policies`` declare, for an error about a parameter none of them has:
    ``las declares threshold, queues`` / ``fifo declares no parameters``."""
    parts = []
    for name in policies:
        fields = list(field_kinds(params_class(name)))
        parts.append(f"{name} declares {', '.join(fields)}" if fields else f"{name} declares no parameters")
    return "; ".join(parts)


def readers(key: str) -> list[str]:
    """The registered policies whose parameters include ``key``."""
    return [name for name, fields in all_params().items() if key in fields]


def constructor_options(policy: str, params: object, context: PolicyContext) -> dict:
    """The keywords ``policy``'s constructor takes for ``params``: its ``from_params`` when it
    declares one, else the fields as they are."""
    from dlsched.registry import POLICIES

    cls = POLICIES[policy]
    declared = params_class(policy)
    if type(params) is not declared:
        if type(params) is not NoParams:
            raise TypeError(f"policy {policy} takes {declared.__name__}, not {type(params).__name__}")
        params = declared()  # a config made without parameters: the policy's defaults
    build = getattr(cls, "from_params", None)
    if build is not None:
        return build(params, context)
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}


def parse_assignments(items: typing.Iterable[str], option: str = "--param") -> dict[str, str]:
    """``NAME=VALUE`` texts -> ``{name: value}`` (names with '-' or '_' alike)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise OptionError("param", f"{option} expects NAME=VALUE, got {item!r}")
        if name in out:
            raise OptionError("param", f"{option} {name} is given twice")
        out[name] = value.strip()
    return out

"""The options a sweep cell may set: the run options of :mod:`dlsched.run.options` (those of
``dlsched simulate``) and the fields of the policies' parameter classes.

The sweep reads the same table the command line is generated from, and every cell becomes a
:class:`~dlsched.run.config.RunConfig` through the same mapping, so an option is either
honoured exactly as ``simulate`` honours it or rejected before anything runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from dlsched.run.options import OPTIONS, policy_options

# run options a spec cannot set: ``param`` (NAME=VALUE text) is the command line's spelling of
# policy parameters, which a spec sets by their own names
NOT_SWEPT = frozenset({"param"})


@dataclass(frozen=True, slots=True)
class Option:
    """One sweepable option: the key a spec uses, its type and default (a policy parameter's is
    its class's, None where the policies declaring it disagree: each keeps its own). A value
    equal to the default is no option at all: ``{policy: fifo, lam: 0.1}`` is the cell ``{policy: fifo}``."""

    key: str
    kind: type      # int, float, bool, str or Path
    optional: bool  # None is a valid value
    default: object
    policy_param: bool = False

    def convert(self, value: object) -> object:
        """The value as ``simulate`` would receive it; ValueError says what was expected."""
        if value is None:
            if self.optional:
                return None
            raise ValueError(f"must not be empty (expected {self.kind.__name__})")
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            raise ValueError(f"expected true or false, got {value!r}")
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"expected an integer, got {value!r}")
            return value
        if self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"expected a number, got {value!r}")
            return float(value)
        if isinstance(value, (dict, list)):
            raise TypeError(f"expected a single {'path' if self.kind is Path else 'text'} value, got {value!r}")
        return str(value)


def simulate_options() -> dict[str, Option]:
    """Spec key -> Option: every run option of ``dlsched simulate`` and every policy parameter."""
    options = {k: Option(k, o.kind, o.optional, o.default, o.section == "params")
               for k, o in OPTIONS.items() if k not in NOT_SWEPT}
    for name, o in policy_options().items():  # typed, optional and defaulted as their flags
        options[name] = Option(name, o.kind, o.optional, o.default, True)
    return options


def lookup(key: str) -> Option:
    """The option a spec key names (dashes or underscores); KeyError-free: ValueError with a hint."""
    options = simulate_options()
    norm = str(key).replace("-", "_")
    if norm in options:
        return options[norm]
    by_param = {o.param: o for o in OPTIONS.values() if o.key not in NOT_SWEPT}
    if norm in by_param:
        return options[by_param[norm].key]
    close = difflib.get_close_matches(norm, list(options), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown simulate option {key!r}{hint}")

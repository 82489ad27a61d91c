"""The options a sweep cell may set: exactly those of ``dlsched simulate``, read from the command itself.

Reading the signature of the ``simulate`` callback (names, types, defaults) instead of keeping a
second list means an option added to ``simulate`` can be swept at once, and a sweep can never
accept an option ``simulate`` does not have.
"""

from __future__ import annotations

import difflib
import inspect
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import NoneType, UnionType

# simulate options that describe where/how the command reports, not what is simulated
NOT_SWEPT = frozenset({"out_dir", "timings"})


@dataclass(frozen=True, slots=True)
class Option:
    """One ``simulate`` option: the key a spec uses, the callback's parameter, its type and default."""

    key: str        # spec spelling: the long flag without dashes, '-' -> '_' (e.g. predict_resources)
    param: str      # the simulate callback's parameter name (e.g. predict)
    kind: type      # int, float, bool, str or Path
    optional: bool  # None is a valid value
    default: object

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


def _simulate_callback():
    import typer

    from dlsched.cli import sim_cmd

    app = typer.Typer()
    sim_cmd.register(app)
    for info in app.registered_commands:
        if info.callback is not None and info.callback.__name__ == "simulate":
            return info.callback
    raise RuntimeError("dlsched.cli.sim_cmd registers no 'simulate' command")


def _kind(hint: object) -> tuple[type, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, UnionType):
        inner = [a for a in args if a is not NoneType]
        return inner[0], NoneType in args
    return hint, False  # type: ignore[return-value]


@lru_cache(maxsize=1)
def simulate_options() -> dict[str, Option]:
    """Spec key -> Option, for every option of ``dlsched simulate`` that describes the simulation."""
    callback = _simulate_callback()
    hints = typing.get_type_hints(callback)
    options: dict[str, Option] = {}
    for name, parameter in inspect.signature(callback).parameters.items():
        if name in NOT_SWEPT:
            continue
        info = parameter.default
        decls = [d for d in getattr(info, "param_decls", ()) if d.startswith("--")]
        key = decls[0][2:].replace("-", "_") if decls else name
        kind, optional = _kind(hints[name])
        options[key] = Option(key, name, kind, optional, getattr(info, "default", info))
    return options


def lookup(key: str) -> Option:
    """The option a spec key names (dashes or underscores); KeyError-free: ValueError with a hint."""
    options = simulate_options()
    norm = str(key).replace("-", "_")
    if norm in options:
        return options[norm]
    by_param = {o.param: o for o in options.values()}
    if norm in by_param:
        return by_param[norm]
    close = difflib.get_close_matches(norm, list(options), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown simulate option {key!r}{hint}")

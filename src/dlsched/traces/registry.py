"""The registry of trace formats: name -> how to recognise a file and how to load it.

Each format lives in its own module and registers itself on import; :func:`formats` imports the
built-in ones on first use so that importing :mod:`dlsched.traces` stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlsched.traces.model import Trace, TraceError
from dlsched.traces.pipeline import LoadOptions

BUILTIN_MODULES = ("canonical", "helios", "helios_log", "pollux", "pai")


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One input schema. ``sniff`` gets the lower-cased header fields (empty for non-CSV) and path."""

    name: str
    description: str
    sniff: Callable[[list[str], Path], bool]
    load: Callable[[Path, LoadOptions], Trace]


_FORMATS: dict[str, TraceFormat] = {}
_loaded = False


def register(fmt: TraceFormat) -> TraceFormat:
    """Add (or replace) a format; detection tries formats in registration order."""
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> dict[str, TraceFormat]:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(f"dlsched.traces.{module}")
    return _FORMATS


def get_format(name: str, path: str | Path = "") -> TraceFormat:
    known = formats()
    if name not in known:
        raise TraceError(str(path), f"unknown trace format {name!r}; known formats: "
                                    f"{', '.join(['auto', *known])}")
    return known[name]

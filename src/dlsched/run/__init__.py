"""A run as a value: :class:`RunConfig` (what to simulate) and :func:`build_run` (what it takes).

See ``docs/architecture.md`` ("A run is a value") for how the commands use it. Names are
imported on first use, so a command that needs one piece (the option table) pays for no other.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    **{name: "dlsched.run.build" for name in ("Inputs", "Run", "build_comparison", "build_run", "load_inputs",
                                              "run_spec")},
    **{name: "dlsched.run.config" for name in ("ClusterConfig", "EnergyConfig", "EngineConfig", "ModelsConfig",
                                               "NoParams", "ObserveConfig", "OptionError", "PlacementConfig",
                                               "PolicyConfig", "RunConfig", "WorkloadConfig")},
    "policy": "dlsched.run.params",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'dlsched.run' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)

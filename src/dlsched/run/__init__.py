"""A run as a value: :class:`RunConfig` (what to simulate) and :func:`build_run` (what it takes).

See ``docs/architecture.md`` ("A run is a value") for how the commands use it.
"""

from dlsched.run.build import Inputs, Run, build_run, load_inputs, run_spec
from dlsched.run.config import (
    ClusterConfig,
    EnergyConfig,
    EngineConfig,
    ModelsConfig,
    NoParams,
    ObserveConfig,
    OptionError,
    PlacementConfig,
    PolicyConfig,
    RunConfig,
    WorkloadConfig,
)

__all__ = ["ClusterConfig", "EnergyConfig", "EngineConfig", "Inputs", "ModelsConfig", "NoParams", "ObserveConfig",
           "OptionError", "PlacementConfig", "PolicyConfig", "Run", "RunConfig", "WorkloadConfig", "build_run",
           "load_inputs", "run_spec"]

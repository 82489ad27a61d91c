"""The contracts between the drivers (simulator, live service) and what they drive: policies and
placement plug-ins. One place to read what a policy or plug-in may implement and how it is called.

* :class:`Policy`: what ``sim/engine.py`` and ``service/core.py`` call on a policy.
  :class:`PolicyBase` gives every optional hook a default (a no-op, or ``None`` for the two
  per-event hooks the engine skips on its hot path), so the drivers call hooks by their declared
  names instead of probing with ``hasattr``.
* Policies and plug-ins read the cluster through a :class:`~dlsched.kernel.view.ClusterView`
  only; one that reads an index (``view.index(name)``) declares it in ``needs_indexes`` and the
  driver makes it (:mod:`dlsched.sched.indexes`).
* Placement plug-ins implement only the phases they serve, after the Kubernetes scheduling
  framework: :class:`Scorer`, :class:`Filter`, :class:`Picker` (reserve), :class:`Permit`, plus the
  exact shortcuts :class:`FastPlacer` and :class:`RowScorer` and the kernel-observer hooks
  (:class:`PluginObserver`). :class:`~dlsched.sched.framework.PlacementPipeline` asks
  ``isinstance(plugin, Phase)`` -- Go's type assertion -- rather than probing names.

A hook is found by its name, so a misspelt one would silently never be called:
``tests/test_protocols.py`` checks every registered policy, placer, speed and failure model
against :data:`HOOKS` (names and parameters) and fails on a public method whose name is a near
miss of a hook's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Fit
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import ClusterView, VcView


@runtime_checkable
class Policy(Protocol):
    """What a driver calls on a policy (its class attributes are capability flags)."""

    name: str
    oracle: bool              # True: may read ground truth (the explicit grant)
    preemptive: bool          # may yield Preempt (the live service refuses such policies)
    requeues_running: bool    # may stop running jobs to re-place them (refused live too)
    placement_name: str
    job_submitted: Callable[[Job, float], None] | None   # None: no hook (skipped per arrival)
    job_finished: Callable[[Job, float], None] | None    # None: no hook (skipped per finish)

    def new_queue(self) -> Any:
        """A fresh queue for one VC (the kernel keeps it and pushes/removes jobs)."""
        ...

    def schedule(self, view: ClusterView, vc: VcView) -> Iterator[Decision]:
        """One pass over ``vc``: yield Start / Preempt / Postpone decisions."""
        ...

    def prepare(self, view: ClusterView) -> None:
        """Once, before the first event: the view only (no future jobs)."""
        ...

    def job_failed(self, job: Job, now: float, reason: str) -> None:
        """``job`` failed and is back in its queue (e.g. out of memory)."""
        ...

    def validate_trace(self, jobs: list[Job]) -> None:
        """Refuse a job list the policy cannot run (raise ValueError), before the run."""
        ...


class PolicyBase:
    """Defaults for every optional hook of :class:`Policy`. Subclasses define ``new_queue`` and
    ``schedule`` and override the hooks they use."""

    name = "policy"
    oracle = False
    preemptive = False
    requeues_running = False
    default_placement = "consolidate"   # what make_policy uses when no placement is named
    placer: Any = None                  # the placement pipeline (None: the policy places itself)
    placement_name = ""
    needs_indexes: tuple[str, ...] = ()  # indexes the policy reads (dlsched.sched.indexes.INDEX_KINDS)
    job_submitted: Callable[[Job, float], None] | None = None
    job_finished: Callable[[Job, float], None] | None = None
    # a preemptive policy's EvictionGuard (sched/preemption.py): the simulator charges its grace
    # period in the preemption overhead and adds its counts to the results (None: no guard)
    guard: Any = None

    def new_queue(self) -> Any:
        raise NotImplementedError(f"policy {self.name} defines new_queue()")

    def schedule(self, view: ClusterView, vc: VcView) -> Iterator[Decision]:
        raise NotImplementedError(f"policy {self.name} defines schedule()")

    def prepare(self, view: ClusterView) -> None:
        return None

    def job_failed(self, job: Job, now: float, reason: str) -> None:
        return None

    def validate_trace(self, jobs: list[Job]) -> None:
        return None


# -- placement plug-ins, one protocol per phase -------------------------------------------------
@runtime_checkable
class Scorer(Protocol):
    name: str

    def score(self, view: ClusterView, vc: VcView, job: Job, node: int) -> float: ...


@runtime_checkable
class Filter(Protocol):
    name: str

    def filter(self, view: ClusterView, vc: VcView, job: Job, node: int) -> str | None: ...


@runtime_checkable
class Picker(Protocol):
    """Reserve: choose the GPUs inside the chosen node (a mask within ``room``)."""

    def gpus(self, view: ClusterView, vc: VcView, job: Job, node: int, room: int) -> int: ...


@runtime_checkable
class Permit(Protocol):
    """May turn a fit into a postponement."""

    def permit(self, view: ClusterView, vc: VcView, job: Job, fit: Fit) -> Fit: ...


@runtime_checkable
class FastPlacer(Protocol):
    """An exact shortcut for the whole pipeline when this scorer is alone (bucket placers)."""

    def fast_place(self, view: ClusterView, vc: VcView, job: Job) -> Fit: ...


@runtime_checkable
class RowScorer(Protocol):
    """Scores every candidate node at once from the load index (equal to ``score`` per node)."""

    def score_rows(self, view: ClusterView, vc: VcView, job: Job, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class PluginObserver(Protocol):
    """A plug-in that keeps an index follows the kernel's transitions (any of the hooks)."""

    def attach(self, state: ClusterState) -> None: ...


# Optional flags a plug-in may set (read by the pipeline, the registry and the service):
# score_by_free (score depends on the node's free GPU count only), single_node_only (a job that
# fits one node waits rather than span nodes), packs (sharing: always go through the stages),
# default_speed_model (the ground truth the plug-in optimises for),
# needs_indexes (names of the indexes it reads through view.index).
PLUGIN_FLAGS = ("score_by_free", "single_node_only", "packs", "default_speed_model", "postpone", "needs_indexes")
# ... and the flags a policy may set (Policy's attributes, plus what make_policy reads)
POLICY_FLAGS = ("oracle", "preemptive", "requeues_running", "default_placement", "placement_name",
                "needs_indexes", "reserves")   # reserves: holds reservations (easy, conservative)


# -- ground truth the kernel asks (simulated backends) -------------------------------------------
@runtime_checkable
class SpeedModel(Protocol):
    def rate(self, job: Job, state: ClusterState) -> float: ...


@runtime_checkable
class FailureModel(Protocol):
    def on_start(self, job: Job, state: ClusterState, now: float) -> list[tuple[float, Job, str]]: ...

    def failed(self, job: Job, state: ClusterState, now: float, reason: str) -> None: ...


# Every hook a driver or the pipeline finds by name, with its parameters (after self). The
# conformance test holds every registered class to these.
HOOKS: dict[str, tuple[str, ...]] = {
    # policies
    "new_queue": (),
    "schedule": ("view", "vc"),
    "prepare": ("view",),
    "job_submitted": ("job", "now"),
    "job_finished": ("job", "now"),
    "job_failed": ("job", "now", "reason"),
    "validate_trace": ("jobs",),
    # placement plug-ins
    "score": ("view", "vc", "job", "node"),
    "filter": ("view", "vc", "job", "node"),
    "gpus": ("view", "vc", "job", "node", "room"),
    "permit": ("view", "vc", "job", "fit"),
    "fast_place": ("view", "vc", "job"),
    "score_rows": ("view", "vc", "job", "rows"),
    "free_fit": ("view", "vc", "job"),          # Horus's exclusive shortcut (a staticmethod)
    # kernel observers (plug-in indexes)
    "attach": ("state",),
    "submitted": ("job", "vc", "now"),
    "started": ("job", "vc", "now"),
    "stopped": ("job", "vc", "now", "why"),
    "node_changed": ("node", "now"),
    "predictions_changed": ("job",),
    # ground-truth models
    "rate": ("job", "state"),
    "on_start": ("job", "state", "now"),
    "failed": ("job", "state", "now", "reason"),
}

POLICY_HOOKS = ("new_queue", "schedule", "prepare", "job_submitted", "job_finished", "job_failed",
                "validate_trace")
PLUGIN_PHASES = (Scorer, Filter, Picker, Permit, FastPlacer, RowScorer, PluginObserver)


def phases(plugin: object) -> Iterable[str]:
    """The phases ``plugin`` serves, by protocol name (for messages and tests)."""
    return [p.__name__ for p in PLUGIN_PHASES if isinstance(plugin, p)]

"""Every speed shortcut of the decision path, where it lives, and one switch that turns them all off.

Each shortcut gives exactly the decisions of its general path, only faster; each has one home and
one switch (a module or class constant next to it). :func:`reference_paths` sets every switch to
its general path, so ``tests/test_fast_paths.py`` can run the same trace both ways and compare
decision for decision.

=============================  =========================================  ==============================
shortcut                       home (switch)                              general path
=============================  =========================================  ==============================
exclusive start / finish       ``kernel/state.py``                        ``ClusterState._allocate`` /
                               (``EXCLUSIVE_SHORTCUT_NODES``)             ``_release``
plain start / finish          ``sim/backend.py`` (``INLINE_START``)      the physics' modelled start
(no models)                                                               and finish (``sim/physics.py``)
lone bucket scorer             ``sched/framework.py``                     the pipeline's stages
(``fast_place``), Horus's      (``PlacementPipeline.fast_paths``)         (candidates, filters,
``free_fit``                                                              scores, reserve, permit)
per-GPU load index             ``sched/sharing/index.py``                 the per-node scan
                               (``PlacementPipeline.use_index``)          (``shared_gpu_use``)
vectorised gang ranking        ``sched/framework.py``                     every node scored on its own
                               (``PlacementPipeline.vector_gang``)        (``score``)
room gains + Horus's carried   ``sched/roomgains.py``, ``sched/policies/horus.py`` every pass tries every job
failures                       (``HorusPolicy.carry_failures``)
=============================  =========================================  ==============================

Pipelines read ``fast_paths`` when they are built: build the policy inside the ``with``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Shortcut:
    """One shortcut's switch: ``attribute`` of ``owner`` (``"module"`` or ``"module:Class"``)
    and the value that selects the general path."""

    name: str
    owner: str
    attribute: str
    general: object

    def target(self) -> object:
        module, _, cls = self.owner.partition(":")
        obj = importlib.import_module(module)
        return getattr(obj, cls) if cls else obj


SHORTCUTS: tuple[Shortcut, ...] = (
    Shortcut("exclusive start/finish", "dlsched.kernel.state", "EXCLUSIVE_SHORTCUT_NODES", 0),
    Shortcut("plain start/finish", "dlsched.sim.backend", "INLINE_START", False),
    Shortcut("fast_place / free_fit", "dlsched.sched.framework:PlacementPipeline", "fast_paths", False),
    Shortcut("load index", "dlsched.sched.framework:PlacementPipeline", "use_index", False),
    Shortcut("vector gang", "dlsched.sched.framework:PlacementPipeline", "vector_gang", False),
    Shortcut("carried failures", "dlsched.sched.policies.horus:HorusPolicy", "carry_failures", False),
)


@contextmanager
def reference_paths(shortcuts: tuple[Shortcut, ...] = SHORTCUTS) -> Iterator[None]:
    """Run the body with ``shortcuts`` (all of them by default) on their general paths."""
    saved = []
    try:
        for cut in shortcuts:
            target = cut.target()
            saved.append((target, cut.attribute, getattr(target, cut.attribute)))
            setattr(target, cut.attribute, cut.general)
        yield
    finally:
        for target, attribute, value in reversed(saved):
            setattr(target, attribute, value)

"""Plug-in indexes, made by the driver: one set per cluster state, declared by what reads them.

A policy or placement plug-in that reads an index through ``view.index(name)`` declares it in
``needs_indexes`` (a tuple of names of :data:`INDEX_KINDS`; a
:class:`~dlsched.sched.framework.PlacementPipeline` gathers its plug-ins' declarations and adds
``"load"`` when it shares GPUs). A driver -- the simulator's ``_build_state``, the live
service's ``SchedulerCore``, the start-time estimate's forward copy -- calls
:func:`attach_plugins` once per :class:`~dlsched.kernel.state.ClusterState`: it attaches the
placement's observer plug-ins (e.g. TOPO-AWARE's topology index), makes each declared index,
registers it as the state's observer and returns them for the
:class:`~dlsched.kernel.view.SchedulingView`. Two states never share an index, and no index
attaches itself to a state from inside a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.protocols import PluginObserver
from dlsched.sched.roomgains import RoomGains
from dlsched.sched.sharing.index import LoadIndex


def _load(state: ClusterState) -> LoadIndex | None:
    # without sharing nothing reads it (room and scores need no holders' sums): not made at all
    return LoadIndex(state) if state.cap > 1 else None


def _room_gains(state: ClusterState) -> RoomGains:
    return RoomGains()


# name -> factory(state) -> index (None: not needed on this state); read-only
INDEX_KINDS: Mapping[str, Callable[[ClusterState], Any]] = MappingProxyType({
    "load": _load,               # per-GPU predicted load of every VC (sharing placements)
    "room-gains": _room_gains,   # where each VC gained room since a mark (Horus's carried failures)
})


def _owners(policy: object) -> Iterator[object]:
    """``policy`` and its placement (a bare placement stands for itself)."""
    yield policy
    placer = getattr(policy, "placer", None)
    if placer is not None and placer is not policy:
        yield placer


def declared_indexes(policy: object) -> tuple[str, ...]:
    """The index names ``policy`` and its placement declare, in order, each once."""
    names: dict[str, None] = {}
    for owner in _owners(policy):
        for name in getattr(owner, "needs_indexes", ()):
            if name not in INDEX_KINDS:
                raise ValueError(f"{type(owner).__name__} declares unknown index {name!r} "
                                 f"(known: {', '.join(INDEX_KINDS)})")
            names[name] = None
    return tuple(names)


def attach_plugins(state: ClusterState, policy: object) -> dict[str, Any]:
    """Attach ``policy``'s placement observers to ``state`` and make the indexes it declares
    (each registered as an observer); returns name -> index for the view."""
    for owner in _owners(policy):
        for plugin in getattr(owner, "observers", ()):
            if isinstance(plugin, PluginObserver):
                plugin.attach(state)
            state.add_observer(plugin)
    made: dict[str, Any] = {}
    for name in declared_indexes(policy):
        index = INDEX_KINDS[name](state)
        if index is not None:
            state.add_observer(index)
            made[name] = index
    return made


def make_view(state: ClusterState, policy: object, compat_tick: bool = False) -> SchedulingView:
    """A driver's first steps in one call: plug-ins attached, indexes made, the view over them
    (for tools and tests that drive a state by hand)."""
    return SchedulingView(state, bool(getattr(policy, "oracle", False)), compat_tick,
                          attach_plugins(state, policy))

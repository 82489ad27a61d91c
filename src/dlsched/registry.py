"""The one registry: names -> policies, placement plug-ins, ground-truth models, energy controllers.

Adding a policy or plug-in = one file plus one line here (plus its tests). Nothing else in
dlsched chooses behaviour by a name string: the CLI, ``RunSpec`` and the live service resolve
names here and hand objects on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dlsched.core.cluster import ClusterSpec
from dlsched.sched import order_table
from dlsched.sched.framework import PlacementPipeline


class LazyTable(Mapping):
    """``name -> object`` where an entry written ``"package.module:Attribute"`` is imported on
    its first lookup: ``dlsched simulate --policy fifo`` imports FIFO's module, not the other
    policies' and placers' (about 40 ms of every command's start). Names, ``in`` and
    iteration import nothing; reading a value (``[]``, ``get``, ``items``) imports its module."""

    def __init__(self, entries: dict[str, Any]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> Any:
        value = self._entries[name]
        if isinstance(value, str):
            module, _, attribute = value.partition(":")
            value = self._entries[name] = getattr(importlib.import_module(module), attribute)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def add(self, name: str, entry: Any) -> None:
        """Register ``name`` from outside this file (a plug-in's package, a test's own policy):
        ``entry`` is the object or ``"package.module:Attribute"``. The commands, sweeps and run
        configurations see it at once: the policy flags are generated from this table."""
        if name in self._entries:
            raise ValueError(f"{name!r} is already registered")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Unregister ``name`` (what :meth:`add` added)."""
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def _topo_aware(postpone: bool) -> Callable[[], object]:
    def build():
        from dlsched.sched.placers.topo_aware import TopoAwarePlacement, TopoAwarePostponing

        return TopoAwarePostponing() if postpone else TopoAwarePlacement()
    return build


def _topology_speed(cluster: ClusterSpec):
    from dlsched.models.topology import TopologySpeed

    return TopologySpeed(cluster)


def _time_sliced(cluster: ClusterSpec):
    from dlsched.models.speed import TimeSlicedSpeed

    return TimeSlicedSpeed()


def _colocation(cluster: ClusterSpec, profiles: str | None = None):
    from dlsched.models.truth import resolve_truth

    return resolve_truth(profiles).speed_model()


def _oom(**options):
    from dlsched.models.failure import OutOfMemory

    return OutOfMemory(**options)


def _vanilla(nodes: int, options: dict, origin):
    from dlsched.energy.vanilla import VanillaDRSController
    from dlsched.sim.power import PowerManager

    boot = float(options.get("boot_delay", 300.0))
    return PowerManager(VanillaDRSController(nodes, float(options.get("idle_timeout", 1800.0)), boot))


def _ces(nodes: int, options: dict, origin):
    from dlsched.energy.controller import CESController, CESParams
    from dlsched.energy.online_forecast import OnlineDemandForecast
    from dlsched.sim.power import PowerManager

    forecast = OnlineDemandForecast(origin=origin)
    params = CESParams(boot_delay=float(options.get("boot_delay", 300.0)),
                       buffer=int(options.get("buffer", max(1, round(0.05 * nodes)))))
    return PowerManager(CESController(nodes, forecast, params), forecast)


POLICIES: Mapping[str, type] = LazyTable({
    "fifo": "dlsched.sched.policies.fifo:FifoPolicy",
    "sjf": "dlsched.sched.policies.sjf:SjfPolicy",
    "srtf": "dlsched.sched.policies.srtf:SrtfPolicy",
    "srtf-pred": "dlsched.sched.policies.srtf_pred:SrtfPredPolicy",
    "qssf": "dlsched.sched.policies.qssf:QssfPolicy",
    "las": "dlsched.sched.policies.las:LasPolicy",
    "fairshare": "dlsched.sched.policies.fairshare:FairSharePolicy",
    "horus": "dlsched.sched.policies.horus:HorusPolicy",
    "horus-f": "dlsched.sched.policies.horus:HorusFairPolicy",
    "obp": "dlsched.sched.policies.obp:ObpPolicy",
    "pab": "dlsched.sched.policies.pab:PabPolicy",
    "ffd-util": "dlsched.sched.policies.ffd_util:FfdUtilPolicy",
    "coscheml": "dlsched.sched.policies.coscheml:CoschemlPolicy",
    "binpack": "dlsched.sched.policies.binpack:BinpackPolicy",
    "loadbalance": "dlsched.sched.policies.loadbalance:LoadbalancePolicy",
    "mystic": "dlsched.sched.policies.mystic:MysticPolicy",
    "oracle-pairing": "dlsched.sched.policies.oracle_pairing:OraclePairingPolicy",
    "random-pairing": "dlsched.sched.policies.random_pairing:RandomPairingPolicy",
    "easy": "dlsched.sched.policies.easy:EasyPolicy",
    "conservative": "dlsched.sched.policies.conservative:ConservativePolicy",
})
order_table.use(POLICIES)   # easy/conservative compose a queue order named by --param order

PLACERS: Mapping[str, Callable[[], object]] = LazyTable({
    "consolidate": "dlsched.sched.placers.consolidate:ConsolidatePlacer",
    "first-fit": "dlsched.sched.placers.first_fit:FirstFitPlacer",
    "best-fit": "dlsched.sched.placers.best_fit:BestFitPlacer",
    "spread": "dlsched.sched.placers.spread:SpreadPlacer",
    "first-fit-node": "dlsched.sched.placers.first_fit_node:FirstFitNodePlacer",
    "socket-best-fit": "dlsched.sched.placers.socket_best_fit:SocketBestFitPlacer",
    "topo-aware": _topo_aware(False),
    "topo-aware-p": _topo_aware(True),
    "horus-cost": "dlsched.sched.placers.horus_cost:HorusCostScorer",
    "obp": "dlsched.sched.placers.obp:ObpPlacer",
    "binpack-mem": "dlsched.sched.placers.binpack_mem:BinpackMemPlacer",
    "ffd-util": "dlsched.sched.placers.ffd_util:FfdUtilPlacer",
})

SPEED_MODELS: dict[str, Callable[[ClusterSpec], object] | None] = {
    "none": None,
    "time-sliced": _time_sliced,
    "topology": _topology_speed,
    "colocation": _colocation,
}

FAILURE_MODELS: dict[str, Callable[..., object] | None] = {
    "none": None,
    "oom": _oom,
}


ENERGY_CONTROLLERS: dict[str, Callable[[int, dict, object], object]] = {
    "ces": _ces,
    "vanilla": _vanilla,
}


def _choices(table: dict) -> str:
    return ", ".join(table)


def make_placer(spec: str | None, share: bool = False) -> PlacementPipeline:
    """A placement pipeline from ``name`` or weighted scorers ``name:weight,name:weight`` (None,
    as ``--placement`` left out: consolidate; :func:`make_policy` uses the policy's own instead)."""
    if spec is None:
        spec = "consolidate"
    scorers = []
    for part in spec.split(","):
        name, _, weight = part.strip().partition(":")
        if name not in PLACERS:
            raise ValueError(f"unknown placement {name!r}; choose from {_choices(PLACERS)}")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"placement {part!r}: the weight after ':' must be a number") from None
        if not w > 0:
            raise ValueError(f"placement {part!r}: the weight must be > 0")
        scorers.append((PLACERS[name](), w))
    return PlacementPipeline(scorers, share=share)


def make_policy(name: str, placement: str | None = None, **options):
    """Build a policy by name with a placement by name (plus policy-specific options). Without a
    placement, the policy's own ``default_placement`` (e.g. Horus's cost), else consolidate."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {_choices(POLICIES)}") from None
    if placement is None:
        placement = getattr(cls, "default_placement", "consolidate")
    share = bool(options.pop("share", False))
    return cls(make_placer(placement, share=share), **options)


def policy_params(name: str) -> type | None:
    """The parameter dataclass policy ``name`` declares (its ``Params``; None when it declares
    none): the options the command line, sweeps and ``RunConfig`` accept for it."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {_choices(POLICIES)}") from None
    return getattr(cls, "Params", None)


def default_speed_model(placer, cluster: ClusterSpec) -> str:
    """The speed model a run gets when none is named: the one a placement plug-in asks for (its
    ``default_speed_model``: the topology placers ask for ``topology``, whose effects they
    optimise), else ``topology`` when the nodes describe their topology (``--topology``), else
    ``none``. Naming a model (``--speed-model none`` included) always wins."""
    for plugin, _ in getattr(placer, "scorers", ()):
        name = getattr(plugin, "default_speed_model", None)
        if name:
            return name
    if any(node.topology is not None for node in cluster.nodes):
        return "topology"
    return "none"


def make_speed_model(name: str, cluster: ClusterSpec, **options):
    """The ground-truth speed model ``name`` for ``cluster`` (None for ``none``); ``options`` go to
    models that take them (``colocation``: ``profiles``)."""
    try:
        factory = SPEED_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown speed model {name!r}; choose from {_choices(SPEED_MODELS)}") from None
    if factory is None:
        return None
    return factory(cluster, **options) if options else factory(cluster)


def make_failure_model(name: str, **options):
    try:
        factory = FAILURE_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown failure model {name!r}; choose from {_choices(FAILURE_MODELS)}") from None
    return factory(**options) if factory is not None else None


def make_energy_controller(name: str, nodes: int, options: dict | None = None, origin=None):
    """The power manager driving energy controller ``name`` over ``nodes`` nodes."""
    try:
        build = ENERGY_CONTROLLERS[name]
    except KeyError:
        raise ValueError(f"unknown energy policy {name!r}; choose from {_choices(ENERGY_CONTROLLERS)}") from None
    return build(nodes, options or {}, origin)

"""Policies see a view, not the state (issue 21 point 3).

* ``SchedulingView`` implements the ``ClusterView`` protocol, names and parameters, and its
  per-node facts are the state's own lists (a hot loop reads them at the state's cost);
* nothing under ``sched/`` reads ``view.state`` or keeps state in a module-level registry;
* indexes are declared by what reads them and made by the driver, one set per state.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec
from dlsched.core.job import Job
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import ClusterView, MissingIndexError, SchedulingView, VcView
from dlsched.registry import PLACERS, POLICIES, make_placer, make_policy
from dlsched.sched.indexes import INDEX_KINDS, attach_plugins, declared_indexes, make_view
from dlsched.sched.roomgains import RoomGains
from dlsched.sched.sharing.index import LoadIndex
from dlsched.sim import SimConfig, Simulator

SCHED = Path(__file__).resolve().parents[1] / "src" / "dlsched" / "sched"
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear",
            "remove", "discard", "__setitem__"}
WEAK = {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}


def _sources() -> list[Path]:
    return sorted(SCHED.rglob("*.py"))


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def module_state_problems(source: str, where: str) -> list[str]:
    """Module-level weak registries, and functions that write to a module-level name (a
    ``global`` statement, an item store, or a mutating method call on it)."""
    tree = ast.parse(source)
    glob = _module_names(tree)
    out = []
    for node in tree.body:
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in WEAK:
                out.append(f"{where}:{node.lineno}: module-level {name}")
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = _locals(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                out.append(f"{where}:{node.lineno}: global {', '.join(node.names)} in {fn.name}")
            elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del))
                  and isinstance(node.value, ast.Name) and node.value.id in glob and node.value.id not in local):
                out.append(f"{where}:{node.lineno}: {fn.name} stores into module-level {node.value.id}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name)
                  and node.func.value.id in glob and node.func.value.id not in local):
                out.append(f"{where}:{node.lineno}: {fn.name} calls {node.func.value.id}.{node.func.attr}")
    return out


def view_state_reads(source: str, where: str) -> list[str]:
    """Reads of a view's ``state`` (``view.state``, ``getattr(view, "state")``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr in ("state", "_state")
                and isinstance(node.value, ast.Name) and "view" in node.value.id):
            out.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in ("state", "_state")):
            out.append(f"{where}:{node.lineno}: getattr(..., {node.args[1].value!r})")
    return out


def test_the_checks_catch_what_they_look_for():
    old = ("import weakref\n_TRACKERS = weakref.WeakKeyDictionary()\n_SEEN = {}\n"
           "def gains(state):\n    g = _TRACKERS.get(state)\n    _TRACKERS[state] = g\n    _SEEN.setdefault(1, 2)\n"
           "def local_ok():\n    _SEEN = {}\n    _SEEN[1] = 2\n")
    assert module_state_problems(old, "m") == ["m:2: module-level WeakKeyDictionary",
                                               "m:6: gains stores into module-level _TRACKERS",
                                               "m:7: gains calls _SEEN.setdefault"]
    reads = "def score(view, node):\n    s = view.state\n    return getattr(view, 'state').cap\n"
    assert view_state_reads(reads, "m") == ["m:2: view.state", "m:3: getattr(..., 'state')"]


#: module-level writes that are no run's state, each with why
STATE_ALLOWED: dict[str, str] = {
    "order_table.py": "the registry's name -> policy class table, installed once when dlsched.registry is "
                      "imported (sched may not import the registry); it holds classes, never a run's state",
}


def test_sched_keeps_no_module_level_state():
    problems = [p for path in _sources() if path.name not in STATE_ALLOWED
                for p in module_state_problems(path.read_text(), path.name)]
    assert problems == []
    allowed = [p for path in _sources() if path.name in STATE_ALLOWED
               for p in module_state_problems(path.read_text(), path.name)]
    assert allowed == ["order_table.py:17: global _TABLE in use"]   # exactly the one install, nothing more


def test_policies_and_plugins_never_read_the_state_behind_the_view():
    reads = [r for path in _sources() for r in view_state_reads(path.read_text(), path.name)]
    assert reads == []


# -- the protocol ------------------------------------------------------------------------------
def _state(cap: int = 1, nodes: int = 2, gpus: int = 2) -> ClusterState:
    return ClusterState(ClusterSpec.from_vc_sizes({"v": nodes}, gpus, GpuType("T", 10_000)),
                        new_queue=ArrivalQueue, max_jobs_per_gpu=cap)


def test_scheduling_view_implements_cluster_view():
    state = _state(cap=2)
    view = SchedulingView(state, oracle=False)
    assert isinstance(view, ClusterView)
    declared = set(inspect.get_annotations(ClusterView))
    assert declared <= {n for n in dir(view) if not n.startswith("_")}
    for name, member in vars(ClusterView).items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        assert list(inspect.signature(getattr(SchedulingView, name)).parameters) == \
            list(inspect.signature(member).parameters), name
    assert view.max_jobs_per_gpu == 2


def test_a_vc_state_has_every_fact_of_vc_view():
    vc = _state().vcs[0]
    assert isinstance(vc, VcView)
    assert set(inspect.get_annotations(VcView)) <= set(type(vc).__slots__)


def test_view_lists_are_the_states_own_and_follow_it():
    state = _state()
    view = SchedulingView(state, oracle=False)
    for name in ("node_free", "node_mask", "node_gpus", "node_mem", "node_slot", "node_local",
                 "node_specs", "node_holders", "gpu_count"):
        assert getattr(view, name) is getattr(state, name), name
    job = Job("a", "v", 1, 0.0, 10.0)
    state.submit(job, 0.0)
    state.start(job, ((1, 0b10),), 0.0)
    assert view.node_mask[1] == 0b10 and view.node_free[1] == 1 and view.node_holders[1] == {job: 0b10}
    node = state.add_node(NodeSpec("n9", "v", 4, GpuType("T", 10_000)), 1.0)
    assert view.node_gpus[node] == 4 and view.node_free[node] == 4
    state.cordon(node, 2.0)
    assert view.node_slot[node] == -1 and view.room_mask(node) == 0


# -- indexes -----------------------------------------------------------------------------------
def _start(state: ClusterState, name: str, node: int, mask: int, mem: float = 3000.0) -> Job:
    job = Job(name, "v", mask.bit_count(), 0.0, 100.0)
    job.pred_gpu_util, job.pred_gpu_mem_mib = 40.0, mem
    state.submit(job, 0.0)
    state.start(job, ((node, mask),), 0.0, shared=True)
    return job


def test_two_states_in_one_process_do_not_share_indexes():
    policy = make_policy("horus", share=True)   # one policy object, two states (as eta's twin does)
    a, b = _state(cap=2), _state(cap=2)
    view_a, view_b = make_view(a, policy), make_view(b, policy)
    assert set(view_a.indexes) == set(view_b.indexes) == {"load", "room-gains"}
    for name in view_a.indexes:
        assert view_a.index(name) is not view_b.index(name)
    job = _start(a, "x", 0, 0b01)
    vc_a, vc_b = a.vcs[0], b.vcs[0]
    assert view_a.index("load").arrays(vc_a).mem[0, 0] == 3000.0
    assert view_b.index("load").arrays(vc_b).mem.sum() == 0.0
    mark_b = view_b.index("room-gains").mark(vc_b.vid)
    mark_a = view_a.index("room-gains").mark(vc_a.vid)
    a.finish(job, 5.0)
    assert view_a.index("room-gains").mark(vc_a.vid) != mark_a
    assert view_b.index("room-gains").mark(vc_b.vid) == mark_b
    assert view_a.index("load").arrays(vc_a).mem.sum() == 0.0


def test_the_driver_makes_declared_indexes_once_as_observers():
    state = _state(cap=2)
    before = len(state._observers)
    made = attach_plugins(state, make_policy("horus", share=True))
    assert isinstance(made["load"], LoadIndex) and isinstance(made["room-gains"], RoomGains)
    assert state._observers[before:] == list(made.values()) and len(made) == 2
    # exclusive GPUs: nothing could read the load index, so it is not made
    assert set(attach_plugins(_state(cap=1), make_policy("horus", share=True))) == {"room-gains"}
    assert attach_plugins(_state(), make_policy("fifo")) == {}


def test_an_undeclared_index_is_an_error_naming_it():
    view = make_view(_state(), make_policy("fifo"))
    with pytest.raises(MissingIndexError, match="no index 'load' on this view.*needs_indexes.*made: none"):
        view.index("load")

    class Bad:
        needs_indexes = ("lod",)

    with pytest.raises(ValueError, match="Bad declares unknown index 'lod' \\(known: load, room-gains\\)"):
        declared_indexes(Bad())


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_declares_known_indexes(name):
    for share in (False, True):
        try:
            policy = make_policy(name, share=share)
        except (TypeError, ValueError):
            continue   # a policy that cannot share
        assert set(declared_indexes(policy)) <= set(INDEX_KINDS)
        if share and getattr(policy.placer, "share", False):
            assert "load" in declared_indexes(policy)


@pytest.mark.parametrize("name", list(PLACERS))
def test_every_placement_declares_known_indexes(name):
    assert set(declared_indexes(make_placer(name))) <= set(INDEX_KINDS)


def test_the_simulator_hands_its_indexes_to_the_view():
    policy = make_policy("horus", share=True)
    jobs = [Job(f"j{i}", "v", 1, float(i), 50.0) for i in range(6)]
    for j in jobs:
        j.pred_gpu_util, j.pred_gpu_mem_mib = 30.0, 2000.0
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 1}, 2, GpuType("T", 10_000)), policy,
                    SimConfig(max_jobs_per_gpu=2, check_invariants=True))
    sim.run(jobs)
    assert set(sim.view.indexes) == {"load", "room-gains"}
    assert all(idx in sim.state._observers for idx in sim.view.indexes.values())
    assert all(j.end_time > j.start_time for j in jobs)

"""Who may reach a job's ground truth, checked statically (issue 21: no class-wide truth flag).

Truth has one door, :mod:`dlsched.core.truth`, and sits in the job's truth slots (``_duration``,
``_remaining``, ``_start_remaining``, ``_measured``) because the engine's hot loop needs them. The
rules, checked on the source of every module by :func:`violations`:

* the kernel, policies and placement (``dlsched.sched``), estimators (``dlsched.predictors``) and
  the live service (``dlsched.service``) neither import the truth module nor name a truth slot
  (as an attribute or as a string handed to ``getattr``/``attrgetter``). A policy class that
  declares ``oracle = True`` holds the grant: its body, and the module-level code of its module
  (a C getter built once), may read the slots -- a documented allowance for speed (SRTF's and
  SJF's orders are read on every pass); an oracle otherwise reads its view's truth. The listed
  exceptions below name the only truth functions those packages may import, each with its reason;
* everyone else reads truth through the truth module: only :mod:`dlsched.core.job`, the truth
  module itself, the simulated backend (``dlsched.sim``) and its ground-truth models
  (``dlsched.models``) name the slots.

A static check, because a runtime one needs a switch somewhere (the flag this replaced): the
negative tests run the checker on small sources to prove it fails.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from dlsched.core import truth
from dlsched.core.job import Job, JobState, OracleAccessError

SRC = Path(__file__).resolve().parents[1] / "src" / "dlsched"
TRUTH_MODULE = "dlsched.core.truth"
SLOTS = frozenset({"_duration", "_remaining", "_start_remaining", "_measured"})
NO_TRUTH = ("dlsched.kernel", "dlsched.sched", "dlsched.predictors", "dlsched.service")
SLOT_OWNERS = ("dlsched.core.job", TRUTH_MODULE, "dlsched.sim", "dlsched.models")

# module -> the truth functions it may import though its package may not, and why
ALLOWED_IMPORTS: dict[str, tuple[frozenset[str], str]] = {
    "dlsched.predictors.duration.observed": (
        frozenset({"revealed_duration"}),
        "the estimators' one way to a run time: a finished job's only (a per-job check)"),
}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _names_slot(value: object) -> bool:
    """A string that names a truth slot (``"_duration"``, ``"_measured.gpu_util"``)."""
    return isinstance(value, str) and value.split(".", 1)[0] in SLOTS


def _is_oracle_class(node: ast.ClassDef) -> bool:
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "oracle" for t in targets) \
                and isinstance(stmt.value, ast.Constant) and stmt.value.value is True:
            return True
    return False


def _truth_imports(node: ast.AST, package: list[str]) -> list[str] | None:
    """The names an import takes from the truth module (["*module*"]: the module itself), or None."""
    if isinstance(node, ast.Import):
        return ["*module*"] if any(a.name == TRUTH_MODULE for a in node.names) else None
    if isinstance(node, ast.ImportFrom):
        base = package[: len(package) - node.level + 1] if node.level else []
        target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
        if target == TRUTH_MODULE:
            return [a.name for a in node.names]
        if target + ".truth" == TRUTH_MODULE and any(a.name == "truth" for a in node.names):
            return ["*module*"]
    return None


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Where ``source`` (the module ``module``) breaks the rules above, as "line: what"."""
    tree = ast.parse(source)
    package = module.split(".") if is_package else module.split(".")[:-1]
    forbidden = _within(module, NO_TRUTH)
    owner = _within(module, SLOT_OWNERS)
    if owner and not forbidden:
        return []
    allowed, _ = ALLOWED_IMPORTS.get(module, (frozenset(), ""))
    oracle_module = any(isinstance(n, ast.ClassDef) and _is_oracle_class(n) for n in ast.walk(tree))
    out: list[str] = []
    # (node, granted): granted inside an oracle class, or at module level of a module that has one
    todo: list[tuple[ast.AST, bool]] = [(stmt, oracle_module and not isinstance(stmt, (ast.FunctionDef,
                                         ast.AsyncFunctionDef, ast.ClassDef))) for stmt in tree.body]
    while todo:
        node, granted = todo.pop()
        if isinstance(node, ast.ClassDef) and _is_oracle_class(node):
            granted = True
        names = _truth_imports(node, package)
        if names is not None and forbidden:
            refused = [n for n in names if n not in allowed]
            if refused:
                out.append(f"{node.lineno}: imports {', '.join(refused)} from {TRUTH_MODULE}")
        elif not granted:
            if isinstance(node, ast.Attribute) and node.attr in SLOTS:
                out.append(f"{node.lineno}: reads the truth slot .{node.attr}")
            elif isinstance(node, ast.Constant) and _names_slot(node.value):
                out.append(f"{node.lineno}: names the truth slot {node.value!r}")
            elif forbidden and isinstance(node, ast.Constant) and node.value == TRUTH_MODULE:
                out.append(f"{node.lineno}: names {TRUTH_MODULE} (an import by name)")
        todo.extend((child, granted) for child in ast.iter_child_nodes(node))
    return sorted(out, key=lambda s: int(s.split(":")[0]))


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        out.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return out


def test_no_module_reaches_truth_except_through_its_door():
    found = {}
    for module, path in _modules():
        bad = violations(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
        if bad:
            found[module] = bad
    assert found == {}


def test_every_listed_exception_still_occurs():
    """A listed exception that is no longer used fails, so the list stays true."""
    by_name = dict(_modules())
    for module, (names, _why) in ALLOWED_IMPORTS.items():
        tree = ast.parse(by_name[module].read_text(encoding="utf-8"))
        imported = {n for node in ast.walk(tree) for n in (_truth_imports(node, module.split(".")[:-1]) or ())}
        assert imported == names, module


# -- the checker can fail -----------------------------------------------------------------------

_POLICY = '''
class Peek:
    oracle = False
    def schedule(self, view, vc):
        return sorted(vc.queue, key=lambda j: j.{attr})
'''


@pytest.mark.parametrize("attr", sorted(SLOTS))
def test_the_checker_catches_a_policy_reading_a_truth_slot(attr):
    assert violations(_POLICY.format(attr=attr), "dlsched.sched.policies.peek") == \
        [f"5: reads the truth slot .{attr}"]


def test_the_checker_catches_slot_names_handed_to_getters():
    src = 'from operator import attrgetter\nkey = attrgetter("_remaining", "enq_seq")\n' \
          'def util(job):\n    return getattr(job, "_measured.gpu_util")\n'
    assert violations(src, "dlsched.service.peek") == ["2: names the truth slot '_remaining'",
                                                       "4: names the truth slot '_measured.gpu_util'"]


@pytest.mark.parametrize("line", ["import dlsched.core.truth", "from dlsched.core import truth",
                                  "from dlsched.core.truth import duration", "from ..core.truth import status"])
def test_the_checker_catches_imports_of_the_truth_module(line):
    assert violations(line + "\n", "dlsched.kernel.peek") != []
    deeper = line.replace("..core", "...core")  # the same module, seen from one package further down
    assert violations(deeper + "\n", "dlsched.predictors.duration.observed") != []  # not a listed name
    assert violations(line + "\n", "dlsched.experiments.peek") == []  # the door is open to experiments


def test_the_checker_catches_an_import_by_name():
    src = 'import importlib\nt = importlib.import_module("dlsched.core.truth")\n'
    assert violations(src, "dlsched.sched.peek") == ["2: names dlsched.core.truth (an import by name)"]


def test_a_listed_exception_is_that_name_only():
    assert violations("from dlsched.core.truth import revealed_duration\n",
                      "dlsched.predictors.duration.observed") == []
    assert violations("from dlsched.core.truth import revealed_duration\n", "dlsched.predictors.duration.online") \
        == ["1: imports revealed_duration from dlsched.core.truth"]


def test_an_oracle_class_and_its_module_level_getters_hold_the_grant():
    src = ('from operator import attrgetter\n_by = attrgetter("_remaining")\n'
           'class Srtf:\n    oracle = True\n    key_attr = "_duration"\n'
           '    def order(self, vc):\n        return [j._remaining for j in vc.queue]\n'
           'def helper(job):\n    return job._duration\n')
    assert violations(src, "dlsched.sched.policies.srtf") == ["9: reads the truth slot ._duration"]
    assert violations(src.replace("oracle = True", "oracle = False"), "dlsched.sched.policies.srtf") == [
        "2: names the truth slot '_remaining'", "5: names the truth slot '_duration'",
        "7: reads the truth slot ._remaining", "9: reads the truth slot ._duration"]


def test_outside_the_simulated_side_truth_goes_through_its_module():
    assert violations("def solo(j):\n    return j._duration\n", "dlsched.experiments.peek") == \
        ["2: reads the truth slot ._duration"]
    assert violations("def solo(j):\n    return j._duration\n", "dlsched.sim.peek") == []
    assert violations("def mem(j):\n    return j._measured.gpu_mem_mib\n", "dlsched.models.peek") == []


# -- the door itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["duration", "remaining", "gpu_util", "gpu_mem_mib", "status"])
def test_a_jobs_public_truth_names_always_raise(name):
    job = Job("j", "v", 1, 0.0, 10.0, gpu_util=50.0, gpu_mem_mib=100.0, status="COMPLETED")
    with pytest.raises(OracleAccessError, match=f"dlsched.core.truth.{name}"):
        getattr(job, name)
    with pytest.raises(OracleAccessError):
        setattr(job, name, 1.0)
    job.state = JobState.FINISHED  # finishing reveals nothing through the job either
    with pytest.raises(OracleAccessError):
        getattr(job, name)
    assert not hasattr(Job, "truth_is_hidden")


def test_the_truth_module_reads_and_writes_truth():
    job = Job("j", "v", 1, 0.0, 10.0, gpu_util=50.0, gpu_mem_mib=100.0, status="COMPLETED")
    assert (truth.duration(job), truth.remaining(job), truth.gpu_util(job), truth.gpu_mem_mib(job),
            truth.status(job)) == (10.0, 10.0, 50.0, 100.0, "COMPLETED")
    other = Job("k", "v", 1, 0.0, 20.0, gpu_util=50.0, gpu_mem_mib=100.0, status="COMPLETED")
    assert truth.measured(job) is truth.measured(other)  # shared record
    truth.set_measured(job, gpu_util=70.0)
    assert truth.gpu_util(job) == 70.0 and truth.gpu_util(other) == 50.0
    truth.set_duration(job, 30.0)
    job.reset()
    assert truth.duration(job) == truth.remaining(job) == 30.0
    twin = Job("t", "v", 1, 0.0, 999.0, gpu_util=50.0)
    truth.forecast(twin, 42.0)
    assert truth.duration(twin) == truth.remaining(twin) == 42.0 and math.isnan(truth.gpu_util(twin))


def test_a_run_time_is_revealed_by_the_jobs_finish_only():
    job = Job("j", "v", 1, 0.0, 10.0)
    for state in (JobState.CREATED, JobState.PENDING, JobState.RUNNING, JobState.ASSUMED):
        job.state = state
        with pytest.raises(OracleAccessError, match="has not finished"):
            truth.revealed_duration(job)
    job.state = JobState.FINISHED
    assert truth.revealed_duration(job) == 10.0


def test_live_jobs_carry_no_truth_and_a_policy_reading_it_fails():
    """The live service: its jobs have no truth (NaN), a policy that reaches for it off a job
    fails as in a simulation, and the service's view grants none (oracles are refused live)."""
    from dlsched.registry import make_policy
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts, PodFacts
    from dlsched.service.store import Store

    fifo = make_policy("fifo")

    class Peek(type(fifo)):
        name = "peek"

        def schedule(self, view, vc):
            self.seen = vc.queue.head().duration  # reaching for truth
            yield from super().schedule(view, vc)

    def core_with_a_pod(policy) -> SchedulerCore:
        core = SchedulerCore(policy, Store("sqlite://"), clock=lambda: 1000.0)
        core.node_seen(NodeFacts("n", 4, "default", "", False))
        core.pod_seen(PodFacts("u1", "default", "p1", 1, "", "Pending", False, 1.0, labels={}, annotations={}))
        return core

    core = core_with_a_pod(Peek(fifo.placer))
    job = core.jobs["u1"]
    assert math.isnan(truth.duration(job)) and math.isnan(truth.gpu_util(job)) and truth.status(job) == ""
    with pytest.raises(OracleAccessError, match="ground truth"):
        core.run_pass()
    with pytest.raises(OracleAccessError, match="not an oracle"):
        core.view.duration(job)
    plain = core_with_a_pod(fifo)
    assert plain.run_pass() == 1 and plain.jobs["u1"].state is JobState.ASSUMED  # the peek alone failed

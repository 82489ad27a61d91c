"""One conformance test over the whole registry: every policy, placement plug-in, speed model and
failure model implements the hooks of :mod:`dlsched.sched.protocols` by their declared names and
parameters, and defines no public method whose name is a near miss of a hook's (a misspelt hook
would silently never be called)."""

from __future__ import annotations

import difflib
import inspect

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.registry import FAILURE_MODELS, PLACERS, POLICIES, SPEED_MODELS, make_policy
from dlsched.sched.policies.fifo import FifoPolicy
from dlsched.sched.protocols import (
    HOOKS,
    PLUGIN_FLAGS,
    PLUGIN_PHASES,
    POLICY_FLAGS,
    POLICY_HOOKS,
    FailureModel,
    FastPlacer,
    Policy,
    PolicyBase,
    Scorer,
    SpeedModel,
    phases,
)

# public method names that look like a hook but are not one, with why (none today)
NOT_HOOKS: dict[str, str] = {}
FLAGS = PLUGIN_FLAGS + POLICY_FLAGS


def hook_problems(obj: object) -> list[str]:
    """What is wrong with ``obj``'s hooks: a parameter list other than the declared one, a public
    method named like a hook but not one, or a class attribute named like a flag but not one."""
    cls = obj if isinstance(obj, type) else type(obj)
    out = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(cls, name)
        if name in HOOKS:
            if value is None and name in ("job_submitted", "job_finished"):
                continue  # declared absent (PolicyBase): the engine skips the call
            if isinstance(value, property) or not callable(getattr(cls, name)):
                out.append(f"{cls.__name__}.{name} is a hook but not a method")
                continue
            params = list(inspect.signature(getattr(cls, name)).parameters)
            if not isinstance(value, staticmethod):
                params = params[1:]  # self
            if tuple(params) != HOOKS[name]:
                out.append(f"{cls.__name__}.{name}{tuple(params)}: the hook takes {HOOKS[name]}")
        elif name in NOT_HOOKS or name in FLAGS or isinstance(value, type):
            continue
        elif callable(getattr(cls, name)):
            near = difflib.get_close_matches(name, HOOKS, n=1, cutoff=0.8)
            if near:
                out.append(f"{cls.__name__}.{name}: not a hook; did you mean {near[0]}?")
        else:
            near = difflib.get_close_matches(name, FLAGS, n=1, cutoff=0.8)
            if near:
                out.append(f"{cls.__name__}.{name}: not a flag; did you mean {near[0]}?")
    return out


def _cluster() -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 2})


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_conforms(name):
    policy = make_policy(name)
    assert isinstance(policy, Policy) and isinstance(policy, PolicyBase)
    for hook in POLICY_HOOKS:
        assert hasattr(policy, hook), hook
    assert hook_problems(policy) == []
    assert isinstance(policy.oracle, bool) and isinstance(policy.preemptive, bool)
    assert policy.placement_name == policy.placer.name


@pytest.mark.parametrize("name", list(PLACERS))
def test_every_placement_plugin_conforms(name):
    plugin = PLACERS[name]()
    assert isinstance(plugin, (Scorer, FastPlacer)), phases(plugin)
    assert hook_problems(plugin) == []


@pytest.mark.parametrize("name", [n for n, f in SPEED_MODELS.items() if f is not None])
def test_every_speed_model_conforms(name):
    model = SPEED_MODELS[name](_cluster())
    assert isinstance(model, SpeedModel)
    assert hook_problems(model) == []


@pytest.mark.parametrize("name", [n for n, f in FAILURE_MODELS.items() if f is not None])
def test_every_failure_model_conforms(name):
    model = FAILURE_MODELS[name]()
    assert isinstance(model, FailureModel)
    assert hook_problems(model) == []


def test_a_misspelt_or_misshapen_hook_fails_the_check():
    class Misspelt(FifoPolicy):
        def job_finshed(self, job, now):  # never called by any driver
            pass

    class Misspelt2(FifoPolicy):
        need_indexes = ("load",)  # the driver reads needs_indexes: the index would never be made

        def job_finishd(self, job, now):
            pass

    class Misshapen(FifoPolicy):
        def job_failed(self, job, now):  # the driver passes a reason too
            pass

    class Plugin:
        name = "p"
        single_node = True  # the flag is single_node_only

        def score(self, view, vc, job, node):
            return 1.0

        def permitt(self, view, vc, job, fit):
            return fit

    assert hook_problems(Misspelt) == ["Misspelt.job_finshed: not a hook; did you mean job_finished?"]
    assert hook_problems(Misspelt2) == ["Misspelt2.job_finishd: not a hook; did you mean job_finished?",
                                        "Misspelt2.need_indexes: not a flag; did you mean needs_indexes?"]
    assert hook_problems(Misshapen) == ["Misshapen.job_failed('job', 'now'): the hook takes ('job', 'now', 'reason')"]
    assert hook_problems(Plugin) == ["Plugin.permitt: not a hook; did you mean permit?",
                                     "Plugin.single_node: not a flag; did you mean single_node_only?"]


def test_policy_base_defaults_are_no_ops():
    base = PolicyBase()
    assert base.job_submitted is None and base.job_finished is None
    assert base.prepare(None) is None and base.job_failed(None, 0.0, "") is None
    with pytest.raises(NotImplementedError):
        base.new_queue()


@pytest.mark.parametrize("proto", [Policy, *PLUGIN_PHASES, SpeedModel, FailureModel])
def test_the_protocols_declare_the_hooks_they_list(proto):
    """The typed protocols and HOOKS say the same thing: every method of a protocol is a hook with
    the declared parameters, and its view parameter is typed as the ClusterView policies read."""
    for name, member in vars(proto).items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        params = list(inspect.signature(member).parameters)[1:]
        assert tuple(params) == HOOKS[name], f"{proto.__name__}.{name}"
        if "view" in params:
            assert inspect.signature(member).parameters["view"].annotation == "ClusterView", name

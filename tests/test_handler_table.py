"""One handler table: every stimulus has a public Kernel handler, handle() dispatches to it with
the stimulus' fields, and the simulator's loop calls the handlers without event-kind strings."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel import stimuli
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sim import engine

HANDLERS = {"JobSubmitted": "on_submitted", "PassRequested": "on_pass", "BindSucceeded": "on_bound",
            "BindFailed": "on_bind_failed", "JobFinished": "on_finished", "JobFailed": "on_failed",
            "JobEvicted": "on_evicted", "JobWithdrawn": "on_withdrawn", "PredictionCorrected": "on_corrected",
            "NodeChanged": "on_node", "PowerChanged": "on_power", "TimerFired": "on_timer",
            "JobAdopted": "on_adopted", "QueuesChanged": "on_queues",
            "JobTimedOut": "on_timed_out", "GpuTypeChanged": "on_gpu_type"}


def kernel() -> Kernel:
    policy = make_policy("fifo")
    return Kernel(ClusterState(ClusterSpec.from_vc_sizes({"v": 1}), new_queue=policy.new_queue), policy,
                  assume=False)


def test_every_stimulus_has_a_public_handler_taking_its_fields_then_now():
    k = kernel()
    stimulus_types = [t for t in vars(stimuli).values() if isinstance(t, type) and t in k._handlers]
    assert sorted(t.__name__ for t in stimulus_types) == sorted(HANDLERS)
    for t in stimulus_types:
        params = list(inspect.signature(getattr(Kernel, HANDLERS[t.__name__])).parameters)
        assert params == ["self", *t._fields, "now"], t.__name__


def test_handle_and_the_direct_handlers_make_the_same_transitions():
    a, b = kernel(), kernel()
    ja, jb = Job("x", "v", 8, 0, 10), Job("x", "v", 8, 0, 10)
    a.handle(stimuli.JobSubmitted(ja), 0.0)
    a.handle(stimuli.PassRequested(), 0.0)
    a.handle(stimuli.JobFinished(ja), 10.0)
    b.on_submitted(jb, 0.0)
    b.on_pass(0.0)
    b.on_finished(jb, 10.0)
    assert ja.state is jb.state is JobState.FINISHED
    assert (ja.start_time, ja.end_time) == (jb.start_time, jb.end_time) == (0.0, 10.0)


def test_the_engine_loop_has_no_event_kind_strings_and_is_short():
    source = Path(engine.__file__).read_text()
    assert not re.search(r'"finish"|kind ==', source)
    run = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_run")
    assert run.end_lineno - run.lineno < 100

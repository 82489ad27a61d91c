"""A node's GPU type or memory changing live is a kernel stimulus (``GpuTypeChanged``, handled by
``Kernel.on_gpu_type``): the live adapter applies a memory label that arrives after the node
joined through ``Kernel.handle``, the recorder writes it as a stimulus line, and ``replay
--stimuli`` applies it at the same moment, so a sharing policy's nominations replay exactly.
Before, the adapter changed the state behind the entry point and the replay kept the node's
first figure: it co-located a pod the service had refused for memory."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stimuli import GpuTypeChanged
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.feed import replay_stimuli
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.record import Recorder
from dlsched.service.store import Store

PREDS = {"r128": (98.4, 16_445.0), "r32": (90.3, 5_862.0)}   # ResNet-50 at batch 128 / 32


def test_the_kernel_applies_a_gpu_type_change_and_decides_the_vc_again():
    policy = make_policy("fifo")
    st = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=2), new_queue=policy.new_queue)
    kernel = Kernel(st, policy)
    assert not kernel.pending_pass
    kernel.handle(GpuTypeChanged(0, GpuType("small", 8_192)), 5.0)
    assert st.node_mem[0] == 8_192 and st.node_specs[0].gpu_type == GpuType("small", 8_192)
    assert kernel.pending_pass   # more or less memory: the VC is decided again


def test_a_memory_label_after_the_node_joined_is_recorded_and_replays(tmp_path):
    path = tmp_path / "log.jsonl"
    clock = iter(range(1000, 10**6)).__next__

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = PREDS[job.model_name]

    core = SchedulerCore(make_policy("horus", share=True), Store("sqlite://"), max_jobs_per_gpu=2, clock=clock,
                         predict=predict, recorder=Recorder(path))
    core.node_seen(NodeFacts("g", 1, "default", "", False))          # the default V100: 32 GiB
    core.node_seen(NodeFacts("g", 1, "default", "", False, gpu_mem_mib=20_480))   # labelled late: 20 GiB

    def pod(uid: str, model: str) -> PodFacts:
        return PodFacts(uid, "default", uid, 1, created=1.0, annotations={"dlsched.io/model": model})

    core.pod_seen(pod("big", "r128"))
    assert core.run_pass() == 1
    core.pod_seen(pod("small", "r32"))
    core.run_pass()   # 16,445 + 5,862 = 22,307 > 20,480: small waits
    assert core.jobs["small"].state is JobState.PENDING
    core.recorder.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    changed = [e for e in lines if e.get("stimulus") == "GpuTypeChanged"]
    assert [(e["node"], e["gpu_mem_mib"]) for e in changed] == [("g", 20_480)]
    agreement = replay_stimuli(path, make_policy)
    # on the node's first figure (32,768 MiB) the replay would nominate small beside big
    assert agreement.recorded == agreement.replayed == [("big", "g", [0])] and agreement.rate == 1.0

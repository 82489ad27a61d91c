"""Replay of stimuli: a service log's recorded stimuli fed through the kernel's entry point.

The live core hands the kernel typed stimuli (``service/core.py``) and the recorder writes each
one as a ``stimulus`` line (:func:`dlsched.service.record.stimulus_fields`). This module rebuilds
them, in order, and hands them to a fresh :class:`~dlsched.kernel.entry.Kernel` (``assume=True``,
as live) with the recorded policy or another; the kernel's ``Bind`` actions are then compared with
the nominations the service made (its ``start`` lines and the nominations it had to refuse, its
``refused`` lines), one by one: same pod, node and GPUs, in the same order.

What a replay cannot know: the nodes kube-scheduler offered a pod (its selectors and taints),
which restrict live placements; a log of pods that were offered every node replays exactly.
Pods bound outside the service (``adopted`` lines) are booked as they stood, as the service did
(a borrowed one as a loan of its own queue). The queue configuration the service enforced
(``queues`` lines, written when a ConfigMap version installs or removes a queue manager) is
enforced from the same moment, so borrowed nominations and reclaims replay too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, gpu_type
from dlsched.core.job import Job
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stimuli import (
    Bind,
    BindFailed,
    BindSucceeded,
    JobEvicted,
    JobFailed,
    JobFinished,
    JobSubmitted,
    JobWithdrawn,
    NodeChanged,
    PassRequested,
    PredictionCorrected,
    TimerFired,
)
from dlsched.service.record import read_events

DECIDES = ("PassRequested", "TimerFired")   # stimuli that run a policy pass


@dataclass
class Agreement:
    """How the replayed nominations compare with the recorded ones."""

    policy: str
    stimuli: int
    recorded: list[tuple[str, str, list[int]]]
    replayed: list[tuple[str, str, list[int]]]
    first_difference: dict | None = field(default=None)

    @property
    def agreeing(self) -> int:
        """Nominations equal in both, position by position, up to the first difference."""
        if self.first_difference is None:
            return len(self.recorded)
        return int(self.first_difference["index"])

    @property
    def rate(self) -> float:
        total = max(len(self.recorded), len(self.replayed))
        return 1.0 if total == 0 else self.agreeing / total


def _gpu(name: object, mem: object, fallback: GpuType) -> GpuType:
    try:
        gtype = gpu_type(str(name))
    except (ValueError, TypeError):
        gtype = fallback
    if isinstance(mem, (int, float)) and mem > 0 and mem != gtype.memory_mib:
        gtype = replace(gtype, memory_mib=int(mem))
    return gtype


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def _set_predictions(job: Job, e: dict) -> None:
    job.pred_gpu_util = _num(e.get("pred_gpu_util"))
    job.pred_gpu_mem_mib = _num(e.get("pred_gpu_mem_mib"))
    job.pred_duration = _num(e.get("pred_duration"))


def _new_job(e: dict) -> Job:
    model = str(e.get("model") or "")
    job = Job(str(e["uid"]), str(e["vc"]), int(e["gpus"]), float(e.get("submit_time") or 0.0), math.nan,
              user=str(e.get("user") or ""), name=str(e.get("name") or ""),
              model_name="" if model.endswith(".onnx") else model,
              onnx_ref=model if model.endswith(".onnx") else "", batch_size=int(e.get("batch_size") or 0))
    _set_predictions(job, e)
    return job


class _Feeder:
    """Rebuilds each recorded stimulus on its own kernel and collects the Bind actions."""

    def __init__(self, policy, cap: int, default_gpu: GpuType) -> None:
        self.state = ClusterState(ClusterSpec([], {}), new_queue=policy.new_queue, max_jobs_per_gpu=cap)
        for plugin in getattr(getattr(policy, "placer", None), "observers", ()):
            if hasattr(plugin, "attach"):
                plugin.attach(self.state)
            self.state.add_observer(plugin)
        self._one_node(policy)
        self.kernel = Kernel(self.state, policy, assume=True)
        self.kernel.prepare()
        self.default_gpu = default_gpu
        self.jobs: dict[str, Job] = {}
        self.binds: list[tuple[str, str, list[int]]] = []

    @staticmethod
    def _one_node(policy) -> None:
        """The live rule that a pod runs on one node (``service.core.one_node``), on this placer."""
        from dlsched.service.core import one_node

        placer = getattr(policy, "placer", None)
        inner = getattr(placer, "place", None)
        if inner is not None:
            placer.place = lambda view, vc, job: one_node(inner(view, vc, job), job)

    def stimulus(self, e: dict) -> None:
        kind, at = e["stimulus"], float(e["at"])
        job = self.jobs.get(str(e.get("uid")))
        if kind == "JobSubmitted":
            job = self.jobs[str(e["uid"])] = _new_job(e)
            s = JobSubmitted(job)
        elif kind == "NodeChanged":
            if e["change"] == "added":
                spec = NodeSpec(str(e["node"]), str(e["vc"]), int(e["gpus"]),
                                _gpu(e.get("gpu_type"), e.get("gpu_mem_mib"), self.default_gpu))
                s = NodeChanged("added", spec=spec)
            else:
                s = NodeChanged(str(e["change"]), self.state.node_index[str(e["node"])])
        elif kind in DECIDES:
            s = PassRequested() if kind == "PassRequested" else TimerFired(int(e["vid"]))
        elif job is None:
            raise ValueError(f"a {kind} for job {e.get('uid')} that was never submitted")
        elif kind == "PredictionCorrected":
            _set_predictions(job, e)
            s = PredictionCorrected(job)
        elif kind in ("BindFailed", "JobFailed", "JobWithdrawn"):
            s = {"BindFailed": BindFailed, "JobFailed": JobFailed, "JobWithdrawn": JobWithdrawn}[kind](
                job, str(e.get("why") or ""))
        elif kind in ("BindSucceeded", "JobFinished", "JobEvicted"):
            s = {"BindSucceeded": BindSucceeded, "JobFinished": JobFinished, "JobEvicted": JobEvicted}[kind](job)
        else:
            raise ValueError(f"unknown stimulus {kind!r}")
        actions = self.kernel.handle(s, at)
        ids = self.state.node_ids
        for a in actions:
            if type(a) is Bind:
                (idx, mask), = a.placement[:1]
                self.binds.append((a.job.job_id, ids[idx], [g for g in range(mask.bit_length()) if mask >> g & 1]))

    def queues(self, e: dict) -> None:
        """The service started (or stopped) enforcing a queue configuration."""
        from dlsched.traces.cluster_queues import parse_queues_text

        text = str(e.get("toml") or "")
        self.kernel.use_queues(parse_queues_text(text, "the log's queues line") if text else (), float(e["at"]))

    def adopted(self, e: dict) -> None:
        """A pod bound outside the service: its start booked as it stood (as the core does)."""
        st, at = self.state, float(e["at"])
        job, idx = self.jobs[str(e["uid"])], st.node_index[str(e["node"])]
        mask = sum(1 << g for g in e["gpus"])
        reclose = st.node_cordoned[idx]
        if reclose:
            st.uncordon(idx, at)
        if e.get("borrowed") and self.kernel.quotas is not None:   # a loan of its own queue
            st.start_borrowed(job, st.vcs[st.node_vc[idx]], ((idx, mask),), at)
            self.kernel.quotas.adopt(job)
        else:
            st.start(job, ((idx, mask),), at, shared=bool(st.node_mask[idx] & mask), confirm=True)
        if reclose:
            st.cordon(idx, at)
        self.kernel.mark(st.node_vc[idx])


def replay_stimuli(path: str | Path, make_policy: Callable, policy: str | None = None,
                   placement: str | None = None) -> Agreement:
    """Feed the log's stimuli through ``Kernel.handle``; compare the Bind actions with the
    service's nominations. ``make_policy`` is the registry's (the caller's layer builds policies
    by name). ValueError when the log has no stimuli or cannot be fed."""
    events = read_events(path)
    config = next((e for e in events if e["kind"] == "config"), {})
    same = policy is None
    name = policy or str(config.get("policy") or "fifo")
    if placement is None and same:
        placement = str(config.get("placement") or "") or None
    cap = int(config.get("max_jobs_per_gpu") or 1)
    pol = make_policy(name, placement, backfill=bool(config.get("backfill")), share=cap > 1)
    feeder = _Feeder(pol, cap, _gpu(config.get("default_gpu", "V100"), None, GpuType()))
    recorded: list[tuple[str, str, list[int]]] = []
    count = 0
    for e in events:
        kind = e["kind"]
        if kind == "stimulus":
            count += 1
            try:
                feeder.stimulus(e)
            except (KeyError, TypeError) as exc:
                raise ValueError(f"{path}: stimulus {count} ({e.get('stimulus')}) cannot be rebuilt: "
                                 f"missing or bad {exc}") from None
        elif kind == "adopted":
            feeder.adopted(e)
        elif kind == "queues":
            feeder.queues(e)
        elif kind in ("start", "refused") and not e.get("adopted"):
            recorded.append((str(e["uid"]), str(e["node"]), list(e["gpus"])))
    if not count:
        raise ValueError(f"{path}: the log has no stimulus lines (recorded before stimuli were logged)")
    out = Agreement(pol.name, count, recorded, feeder.binds)
    for i in range(max(len(recorded), len(feeder.binds))):
        want = recorded[i] if i < len(recorded) else None
        got = feeder.binds[i] if i < len(feeder.binds) else None
        if want != got:
            out.first_difference = {"index": i, "recorded": want, "replayed": got}
            break
    return out


def describe(nomination: tuple[str, str, list[int]] | None) -> str:
    """One nomination as text: 'pod -> node GPUs [..]', or 'nothing'."""
    if nomination is None:
        return "nothing"
    uid, node, gpus = nomination
    return f"{uid} -> {node} GPUs {gpus}"

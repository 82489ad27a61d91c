"""Replay of stimuli: a service log's recorded stimuli fed through the kernel's entry point.

The live adapter hands the kernel typed stimuli (``service/adapter.py``) and the recorder writes each
one as a ``stimulus`` line (:func:`dlsched.service.record.stimulus_fields`). This module rebuilds
them, in order, and hands them to a fresh :class:`~dlsched.kernel.entry.Kernel` (``assume=True``,
as live) with the recorded policy or another; the kernel's ``Bind`` actions are then compared with
the nominations the service made (its ``start`` lines and the nominations it had to refuse, its
``refused`` lines), one by one: same pod, node and GPUs, in the same order; its ``Evict`` actions
of running jobs with the evictions the service requested (its ``evict`` lines), by pod in order.
The kernel is built by the live service's own set-up code
(:func:`dlsched.service.kernel_setup.live_kernel`) and the log is read and checked by the one
reader (:mod:`dlsched.service.log`): a damaged log, or a stimulus the kernel refuses, is an
error naming the log's file and line.

What a replay cannot know: the nodes kube-scheduler offered a pod (its selectors and taints),
which restrict live placements; a log of pods that were offered every node replays exactly.
Pods bound outside the service (``JobAdopted`` stimuli; ``adopted`` lines in logs recorded
before adoption was a stimulus, fed as one) are booked as they stood by the kernel's handler,
as the service did (a borrowed one as a loan of its own queue). A change of the queue configuration is
a stimulus too (``QueuesChanged``, handled by ``Kernel.on_queues`` in both places; logs recorded
before it was have only ``queues`` lines, fed as one), enforced from the same moment, so
borrowed nominations and reclaims replay too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.job import Job, JobState
from dlsched.kernel.state import StateError
from dlsched.kernel.stimuli import Bind, Evict
from dlsched.service.kernel_setup import live_kernel
from dlsched.service.log import EventLog, read_log
from dlsched.service.record import stimulus_from_fields

Nomination = tuple[str, str, list[int]]
_ENDS = ("JobEvicted", "JobFinished", "JobFailed", "JobWithdrawn", "JobTimedOut")   # an eviction in flight is over


@dataclass
class Agreement:
    """How the replayed nominations and evictions compare with the recorded ones."""

    policy: str
    stimuli: int
    recorded: list[Nomination]
    replayed: list[Nomination]
    first_difference: dict | None = field(default=None)
    recorded_evictions: list[str] = field(default_factory=list)
    replayed_evictions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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

    @property
    def evictions_agreeing(self) -> int:
        """Evictions equal in both, in order, up to the first difference."""
        n = 0
        for want, got in zip(self.recorded_evictions, self.replayed_evictions, strict=False):
            if want != got:
                break
            n += 1
        return n

    @property
    def evictions_agree(self) -> bool:
        return self.recorded_evictions == self.replayed_evictions


class _Feeder:
    """Rebuilds each recorded stimulus on the live set-up's kernel and collects its actions."""

    def __init__(self, policy, cap: int, log: EventLog) -> None:
        # the live service's own set-up (plug-ins, indexes, the one-node rule with its gang
        # exception, the prepare hook): no copy here that could drift from it
        self.kernel, _ = live_kernel(policy, cap, {})
        self.state = self.kernel.state
        self.log = log
        self.jobs: dict[str, Job] = {}
        self.binds: list[Nomination] = []
        self.evictions: list[str] = []
        self._inflight: set[str] = set()

    def stimulus(self, e: dict) -> None:
        kind, at = e["stimulus"], float(e["at"])
        s = stimulus_from_fields(e, self.jobs, self.state, self.log.gpu)
        if kind in _ENDS:
            self._inflight.discard(str(e.get("uid")))
        actions = self.kernel.handle(s, at)
        ids = self.state.node_ids
        for a in actions:
            kind = type(a)
            if kind is Bind:
                (idx, mask), = a.placement[:1]
                self.binds.append((a.job.job_id, ids[idx], [g for g in range(mask.bit_length()) if mask >> g & 1]))
            elif kind is Evict and a.job.state is JobState.RUNNING and a.job.job_id not in self._inflight:
                # the service evicts a running pod once (an assumed one's nomination just goes back)
                self._inflight.add(a.job.job_id)
                self.evictions.append(a.job.job_id)

    def queues(self, e: dict) -> None:
        """A ``queues`` line of a log recorded before a change of queues was a stimulus: fed as
        the ``QueuesChanged`` the service hands the kernel now (the same handler)."""
        fields = {"stimulus": "QueuesChanged", "toml": e.get("toml") or ""}
        self.kernel.handle(stimulus_from_fields(fields, self.jobs, self.state, self.log.gpu), float(e["at"]))

    def adopted(self, e: dict) -> None:
        """An ``adopted`` line of a log recorded before adoption was a stimulus: fed as the
        ``JobAdopted`` the service hands the kernel now (the same handler)."""
        uid = str(e["uid"])
        if uid not in self.jobs:
            raise ValueError(f"adopts {uid!r}, which no earlier JobSubmitted submitted")
        borrowed = bool(e.get("borrowed")) and self.kernel.quotas is not None   # a loan of its own queue
        fields = {"stimulus": "JobAdopted", "uid": uid, "node": e["node"], "gpus": e["gpus"], "borrowed": borrowed}
        self.kernel.handle(stimulus_from_fields(fields, self.jobs, self.state, self.log.gpu), float(e["at"]))


def replay_stimuli(path: str | Path, make_policy: Callable, policy: str | None = None,
                   placement: str | None = None) -> Agreement:
    """Feed the log's stimuli through ``Kernel.handle``; compare the Bind and Evict actions with
    the service's nominations and evictions. ``make_policy`` is the registry's (the caller's layer
    builds policies by name). ValueError naming the file and line when the log cannot be fed."""
    from dlsched.traces.model import TraceError

    log = read_log(path)
    config = log.config
    same = policy is None
    name = policy or str(config.get("policy") or "fifo")
    if placement is None and same:
        placement = str(config.get("placement") or "") or None
    cap = int(config.get("max_jobs_per_gpu") or 1)
    try:
        pol = make_policy(name, placement, backfill=bool(config.get("backfill")), share=cap > 1)
    except (ValueError, KeyError) as exc:
        if not same:
            raise
        raise ValueError(f"{log.where}: line {log.lines[0] if log.events else 1} (config): the recorded policy "
                         f"{name} with placement {placement or 'its own'} cannot be rebuilt ({exc})") from None
    feeder = _Feeder(pol, cap, log)
    # logs recorded since adoption is a stimulus have a JobAdopted line after each 'adopted' one
    adoption_lines = not any(e.get("stimulus") == "JobAdopted" for e in log.events)
    # ... and a QueuesChanged line before each 'queues' one (which then only says what was enforced)
    queue_lines = not any(e.get("stimulus") == "QueuesChanged" for e in log.events)
    recorded: list[Nomination] = []
    evicted: list[str] = []
    count = 0
    for i, e in enumerate(log.events):
        kind = e["kind"]
        try:
            if kind == "stimulus":
                count += 1
                feeder.stimulus(e)
            elif kind == "adopted" and adoption_lines:
                feeder.adopted(e)
            elif kind == "queues" and queue_lines:
                feeder.queues(e)
        except TraceError as exc:   # the queues' TOML, edited by hand
            raise ValueError(f"{log.place(i)}: {exc}") from None
        except (StateError, ValueError, KeyError, TypeError, IndexError) as exc:
            # a log the kernel cannot follow (edited, cut in the middle, from another version)
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{log.place(i)}: the kernel cannot follow it: {what}") from None
        if kind in ("start", "refused") and not e.get("adopted"):
            recorded.append((str(e["uid"]), str(e["node"]), list(e["gpus"])))
        elif kind in ("evict", "limit_due"):   # limit_due: an Evict at a time limit left to the kubelet
            evicted.append(str(e["uid"]))
    if not count:
        raise ValueError(f"{log.where}: the log has no stimulus lines (recorded before stimuli were logged)")
    out = Agreement(pol.name, count, recorded, feeder.binds, recorded_evictions=evicted,
                    replayed_evictions=feeder.evictions, notes=list(log.notes))
    for i in range(max(len(recorded), len(feeder.binds))):
        want = recorded[i] if i < len(recorded) else None
        got = feeder.binds[i] if i < len(feeder.binds) else None
        if want != got:
            out.first_difference = {"index": i, "recorded": want, "replayed": got}
            break
    return out


def describe(nomination: Nomination | None) -> str:
    """One nomination as text: 'pod -> node GPUs [..]', or 'nothing'."""
    if nomination is None:
        return "nothing"
    uid, node, gpus = nomination
    return f"{uid} -> {node} GPUs {gpus}"

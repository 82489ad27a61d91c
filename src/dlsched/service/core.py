"""The live service's scheduler: the facade that the HTTP app, the runtime, the extender, the
start-time estimates and the what-if use, around the adapter's parts.

Everything the service learns becomes a typed stimulus handed to the kernel's one entry point
(:meth:`dlsched.kernel.entry.Kernel.handle`, ``assume=True``), and the actions that come back are
carried out as nominations, waiting reasons, timers and evictions. The parts, one job each:

- :mod:`~dlsched.service.adapter`: pods, nodes, binds -> stimuli (and the parts' host);
- :mod:`~dlsched.service.adoption`: a pod seen bound, confirmed or adopted;
- :mod:`~dlsched.service.podbook`: pod uid <-> job, waiting, parked, ended ... tables;
- :mod:`~dlsched.service.nominations`: slots, the store's write, nudges;
- :mod:`~dlsched.service.gangs`: N pods <-> one kernel job;
- :mod:`~dlsched.service.passes`: passes and timers, their actions carried out;
- :mod:`~dlsched.service.live_evictions`: preemptions through the Eviction API;
- :mod:`~dlsched.service.readings`: the node agent's readings (corrections, OOM failover);
- :mod:`~dlsched.service.answers` and :mod:`~dlsched.service.reasons`: the extender's answers.

The service never writes a job's ground-truth slots nor reaches into a placer. All methods take
one lock: the kernel is single-threaded by design.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dlsched.core.job import Job
from dlsched.kernel.state import StateError
from dlsched.service.adapter import Adapter
from dlsched.service.answers import MAX_SCORE, PRIORITY_TOP, Answers
from dlsched.service.answers import priority as _priority  # the name the extender's tests know
from dlsched.service.evictions import Intent
from dlsched.service.gangs import is_gang_id
from dlsched.service.live_queues import QueueSetting
from dlsched.service.nominations import NUDGE_AGAIN_S, NUDGE_TRIES, BindError
from dlsched.service.passes import Passes
from dlsched.service.pods import NodeFacts, PodFacts, VcMapping
from dlsched.service.readings import Readings
from dlsched.service.store import Store
from dlsched.service.views import queue_rows, snapshot

NOT_HELD = "filter calls not held: nominated on an offered node while others were unseen"

if TYPE_CHECKING:
    import numpy as np


class SchedulerCore:
    """Pods -> jobs, passes -> nominations, binds -> confirmed starts; one lock around it all.

    Seams a driver may set: ``nudge(pod, node, gpus, True)`` (tell kube-scheduler to retry a pod
    it was told to wait), ``evictor(intent)`` (the Eviction API caller), ``may_nominate()``
    (leader election: False nominates nothing), ``serving`` (True once extender calls are
    answered), and ``on_nomination(pod, node, gpus)``: called under the lock for every
    nomination -- a pod on its own, and each pod of a gang -- after its store write, with the
    node's name and the GPU indices as text ("0,1"); the scheduler-mode driver binds from it;
    ``commit_behind()``: commits the rows a watch event left behind the lock (default: at once,
    ``Store.write_behind``; the scheduler mode's binder hands them to its committer thread).
    """

    def __init__(self, policy, store: Store, vc_mapping: VcMapping | None = None, max_jobs_per_gpu: int = 1,
                 clock: Callable[[], float] = time.time, default_gpu=None,
                 predict: Callable[[Job], None] | None = None, recorder=None,
                 described: dict | None = None) -> None:
        # described: the service's configuration (ServiceConfig.describe()), kept in the log's config line
        self.check_policy(policy)
        self.policy = policy
        self.lock = threading.RLock()
        self.adapter = ad = Adapter(policy, store, vc_mapping or VcMapping(), max_jobs_per_gpu, clock,
                                    default_gpu, predict, recorder)
        self.passes_part = Passes(ad)
        self.answers = Answers(ad, self.passes_part)
        self.readings = Readings(ad, predict)
        self.queue_setting = QueueSetting(ad)   # queues that borrow (kernel/quotas.py)
        book = ad.book
        # the public tables (the same objects the parts update)
        self.store, self.vcs, self.default_gpu, self.predict, self.recorder = store, ad.vcs, ad.default_gpu, predict, recorder
        self.kernel, self.state, self.view, self.decider = ad.kernel, ad.state, ad.view, ad.kernel.decider
        self.jobs, self.pods, self.waiting, self.parked = book.jobs, book.pods, book.waiting, book.parked
        self.gone_nodes, self.ended, self.observed, self.key_uid = book.gone_nodes, book.ended, book.observed, book.key_uid
        self.unseen, self.offered, self.last_outcome, self.zero_gpu = book.unseen, book.offered, book.last_outcome, book.zero_gpu
        self.slots, self.startup_nudges, self.timers = ad.noms.slots, ad.noms.startup_nudges, self.passes_part.timers
        self.counters, self.gangs, self.evictions = ad.counters, ad.gangs, ad.evictions.book
        self.filter_outcomes, self.recent_filters = self.answers.filter_outcomes, self.answers.recent_filters
        self.keyed = ad.reasons.keyed
        self.commit_behind: Callable[[], object] = store.write_behind
        if not ad.restricted:
            self.counters["placements not restricted to offered nodes"] += 1
        from dlsched.service.eta import LiveEta

        self.eta = ad.reasons.eta = LiveEta(self)   # forward-simulation start estimates for queue() (docs/eta.md)
        ad.record("config", **{**(described or {}), "policy": policy.name,
                               "placement": getattr(policy, "placement_name", ""),
                               "backfill": bool(getattr(policy, "backfill", False)),
                               "max_jobs_per_gpu": max_jobs_per_gpu, "default_gpu": self.default_gpu.name})

    # -- the seams a driver sets ------------------------------------------------------------
    @property
    def nudge(self) -> Callable[[PodFacts, str, str, bool], None] | None:
        return self.adapter.noms.nudge

    @nudge.setter
    def nudge(self, fn: Callable[[PodFacts, str, str, bool], None] | None) -> None:
        self.adapter.noms.nudge = fn

    @property
    def on_nomination(self) -> Callable[[PodFacts, str, str], None] | None:
        return self.adapter.noms.on_nomination

    @on_nomination.setter
    def on_nomination(self, fn: Callable[[PodFacts, str, str], None] | None) -> None:
        self.adapter.noms.on_nomination = fn

    @property
    def evictor(self) -> Callable[[Intent], None] | None:
        return self.adapter.evictions.evictor

    @evictor.setter
    def evictor(self, fn: Callable[[Intent], None] | None) -> None:
        self.adapter.evictions.evictor = fn

    @property
    def may_nominate(self) -> Callable[[], bool]:
        return self.passes_part.may_nominate

    @may_nominate.setter
    def may_nominate(self, fn: Callable[[], bool]) -> None:
        self.passes_part.may_nominate = fn

    @property
    def default_grace(self) -> int:
        """Seconds of an eviction's grace period for a pod without ``dlsched.io/grace-seconds``."""
        return self.adapter.evictions.default_grace

    @default_grace.setter
    def default_grace(self, seconds: int) -> None:
        self.adapter.evictions.default_grace = seconds

    @property
    def serving(self) -> bool:
        return self.adapter.noms.serving

    @serving.setter
    def serving(self, on: bool) -> None:
        self.adapter.noms.serving = on

    @property
    def clock(self) -> Callable[[], float]:
        return self.adapter.clock

    @clock.setter
    def clock(self, fn: Callable[[], float]) -> None:
        self.adapter.clock = fn

    @property
    def passes(self) -> int:
        """Policy passes run (a VC decided counts once)."""
        return self.adapter.passes

    @property
    def _now(self) -> float:
        return self.adapter.last_now

    # -- queues that borrow ---------------------------------------------------------------------
    @property
    def quotas(self):
        """The kernel's queue manager (None: every VC's pods run on its own nodes only)."""
        return self.kernel.quotas

    @property
    def queue_specs(self) -> tuple:
        return self.queue_setting.specs

    @property
    def borrowing_refused(self) -> str:
        return self.queue_setting.refused

    def set_queues(self, specs: tuple) -> str:
        """Enforce ``specs`` (a queue configuration); returns '' or why borrowing stays off
        although the queues allow it (:meth:`QueueSetting.apply`)."""
        with self.lock:
            return self.queue_setting.apply(specs)

    @staticmethod
    def check_policy(policy) -> None:
        """Live scheduling has no ground truth: an oracle is refused. A preemptive policy runs
        (its Preempt becomes an eviction through the Eviction API; docs/service.md)."""
        if getattr(policy, "oracle", False):
            hint = (" (srtf-pred is SRTF by predicted remaining time)"
                    if getattr(policy, "preemptive", False) else "")
            estimates = getattr(policy, "estimates", None)
            if getattr(estimates, "kind", "") == "truth":   # an oracle by its parameter, not by its kind
                hint = " (--param estimate=truth; use limit, prediction or capped live)"
            raise ValueError(f"policy {policy.name} is an oracle (it reads the true durations or co-location "
                             f"speeds a simulation knows): a live cluster has no such ground truth{hint}")

    def now(self) -> float:
        """Wall-clock seconds, never going backwards (the kernel's clock only moves forward)."""
        return self.adapter.now()

    # -- nodes and pods --------------------------------------------------------------------
    def node_seen(self, node: NodeFacts) -> None:
        with self.lock:
            self.adapter.node_seen(node)

    def node_gone(self, name: str) -> None:
        """A node was deleted: closed at once, removed once its pods are gone."""
        with self.lock:
            self.adapter.node_gone(name)

    def pod_seen(self, pod: PodFacts) -> None:
        """Any news about a pod (watch event, start-up list, or the pod inside a filter call)."""
        with self.lock:
            self.adapter.pod_seen(pod)
        self.commit_behind()   # a confirm's rows, committed outside the lock (store.py)

    def pod_offered(self, pod: PodFacts) -> str:
        """A pod inside a filter call (:meth:`Adapter.pod_offered`); returns why it is refused, or ''."""
        with self.lock:
            return self.adapter.pod_offered(pod)

    def expire_unseen(self, ttl: float) -> int:
        """Pods known from filter calls only and not shown by the API server within ``ttl``
        seconds are dropped with what they hold; a pass follows. Returns how many."""
        with self.lock:
            old = self.adapter.expire_unseen(ttl)
            if old:
                self.passes_part.run_pass()
            return old

    def pod_gone(self, uid: str) -> None:
        with self.lock:
            self.adapter.pod_gone(uid)
        self.commit_behind()   # its release, committed outside the lock (store.py)

    # -- passes and timers -------------------------------------------------------------------
    def run_pass(self) -> int:
        """One policy pass over every changed VC, its actions carried out; returns the number of
        new nominations."""
        with self.lock:
            return self.passes_part.run_pass()

    def next_timer(self) -> float | None:
        """When the earliest timer is due (service clock), or None."""
        with self.lock:
            return self.passes_part.next_timer()

    def fire_timers(self) -> int:
        """Every timer due by now fired (``TimerFired``); the runtime's timer thread calls it."""
        with self.lock:
            return self.passes_part.fire_timers()

    # -- live preemption -------------------------------------------------------------------
    def load_evictions(self, rows: list[dict]) -> None:
        """At start-up, before the pods are listed: the store's eviction intents."""
        with self.lock:
            self.adapter.evictions.load(rows)

    def resume_evictions(self) -> tuple[int, int]:
        """After the pods are listed: pending intents resumed or closed; (resumed, closed)."""
        with self.lock:
            return self.adapter.evictions.resume()

    def eviction_sent(self, intent: Intent, outcome: str) -> None:
        """The evictor's report: the Eviction API accepted (or the pod was gone)."""
        with self.lock:
            self.adapter.evictions.sent(intent, outcome)

    # -- nudges ---------------------------------------------------------------------------------
    def due_nudges(self, again_after: float = NUDGE_AGAIN_S, tries: int = NUDGE_TRIES) -> int:
        """Nudge every nominated pod whose last extender call this process did not answer (a
        start-up, a new leader), once the service does; again after ``again_after`` seconds
        without a filter call, ``tries`` times in all; gang pods by their gang. Returns the nudges sent."""
        noms = self.adapter.noms
        if noms.nudge is None or not noms.serving:
            return 0
        with self.lock:
            now = self.now()
            gangs = self.gangs
            sent = noms.due_nudges(now, lambda uid: is_gang_id(uid) or gangs.owns(uid), again_after, tries)
            return sent + gangs.due_nudges(now, again_after, tries)   # gang hook: its pods

    def nudge_wanted(self, uid: str, node: str) -> bool:
        """Whether a queued nudge is still worth its API write: the pod is still nominated on
        ``node`` and kube-scheduler was not told "nominated" since (its bind is then on its way)."""
        with self.lock:
            if uid not in self.jobs and self.gangs.owns(uid):   # gang hook: nominated through its gang
                return self.gangs.nudge_wanted(uid, node)
            return self.adapter.noms.nudge_wanted(uid, node)

    # -- the extender's questions ---------------------------------------------------------------
    def filter(self, pod: PodFacts, node_names: list[str]) -> tuple[list[str], dict[str, str]]:
        """(nodes that pass, node -> reason for each rejected one)."""
        passed, why = self.verdict(pod, node_names)
        keep = set(passed)
        return passed, {n: why for n in node_names if n not in keep}

    def unknown_nodes(self, node_names: list[str]) -> bool:
        """Whether kube-scheduler offers a node this process has not seen yet (its node watch
        lags the scheduler's: nodes just added). Read without the lock: a hint, not a decision.
        The names the state lacks are kept with the list (:meth:`Answers.unknown_offered`): a
        look-up per name cost half a millisecond a call at 5,000 nodes."""
        skip = self.adapter.book.not_awaited
        return any(n not in skip for n in self.answers.unknown_offered(node_names))

    def nominated_offered(self, pod: PodFacts, node_names: list[str]) -> bool:
        """Whether the pod is nominated already on one of the offered nodes
        (:meth:`Answers.nominated_offered`): its filter call is answered at once, though other
        offered nodes are not seen yet. Held, it would stop kube-scheduler's one scheduling loop
        for nothing: a drain measured 10-17 calls held 45-47 ms each."""
        with self.lock:
            nominated = self.answers.nominated_offered(pod, node_names)
            if nominated:
                self.adapter.counters[NOT_HELD] += 1
            return nominated

    def held_filter(self, node_names: list[str], arrived: bool) -> None:
        """A filter call was held for unknown nodes (counted); when they did not arrive in time,
        their names are not waited for again (a node the watch never shows must not hold every
        call), until the watch shows them."""
        with self.lock:
            counters = self.adapter.counters
            counters["filter calls held for nodes the watch had not shown"] += 1
            if not arrived:
                counters["filter calls held in vain (the nodes never arrived)"] += 1
                known, skip = self.state.node_index, self.adapter.book.not_awaited
                skip.update(n for n in node_names if n not in known)

    def verdict(self, pod: PodFacts, node_names: list[str]) -> tuple[list[str], str]:
        """The filter's answer: (nodes that pass, the one reason every other node fails with)."""
        with self.lock:
            return self.answers.verdict(pod, node_names)

    def priorities(self, pod: PodFacts, node_names: list[str]) -> np.ndarray:
        """The score of each of ``node_names``, an int array (:meth:`Answers.priorities`)."""
        with self.lock:
            return self.answers.priorities(pod, node_names)

    def policy_scores(self, job: Job) -> dict[str, int]:
        """The placement's scores for ``job`` as extender priorities 1..9 (:meth:`Answers.policy_scores`)."""
        return self.answers.policy_scores(job)

    def why_waiting(self, uid: str) -> str:
        return self.adapter.why_waiting(uid)

    def begin_bind(self, uid: str, node: str) -> tuple[PodFacts, list[int] | None]:
        """Check a bind against the nomination; returns the pod and its GPU indices (None: a
        pending pod that requests no GPU, bound untouched)."""
        with self.lock:
            return self.adapter.begin_bind(uid, node)

    def end_bind(self, uid: str, node: str, error: str, commit: bool = True) -> None:
        """The API server answered the bind: confirm the start, or forget it (GPUs return). The
        bind's rows are committed after the lock is let go (Store.write_behind): a flushed commit
        under it held back every filter and every other bind; a crash before the commit leaves
        the pod to start-up's adoption of bound pods (docs/service.md). ``commit`` False: the
        caller commits them later (``store.write_behind``)."""
        with self.lock:
            self.adapter.end_bind(uid, node, error)
        if commit:
            self.store.write_behind()

    def observe(self, uid: str, util: float, mem_mib: float, warmup: float, speed: float = float("nan"),
                commit: bool = True) -> str:
        """A node agent's reading of a running pod (:meth:`Readings.observe`); returns what happened.
        A memory correction it made is committed to the store after the lock is let go
        (service/memory_kept.py); ``commit`` False: the caller commits it (``write_memory``)."""
        with self.lock:
            what = self.readings.observe(uid, util, mem_mib, warmup, speed)
        if commit:
            self.write_memory()
        return what

    def write_memory(self) -> int:
        """Commit the memory corrections and calibration peaks made since the last commit."""
        return self.adapter.memory.write()

    def load_memory(self) -> tuple[int, int]:
        """At start-up (or on becoming leader), before the pods are listed: the store's memory
        corrections wait for their pods, its peaks go into the calibration; (corrections, peaks)."""
        with self.lock:
            return self.adapter.memory.load()

    def settle_memory(self) -> int:
        """After the pods are listed: the corrections of pods not seen go; returns how many."""
        with self.lock:
            return self.adapter.memory.settle(set(self.jobs) | set(self.parked) | set(self.key_uid.values()))

    # -- the operator's view -----------------------------------------------------------------
    def snapshot(self) -> dict:
        with self.lock:
            return snapshot(self.adapter)

    def queue(self) -> list[dict]:
        etas = self.eta.etas()   # refreshed when the state changed; the forward run holds no lock
        with self.lock:
            return queue_rows(self.adapter, etas)


__all__ = ["MAX_SCORE", "NUDGE_AGAIN_S", "NUDGE_TRIES", "PRIORITY_TOP", "BindError", "SchedulerCore", "StateError",
           "_priority"]

"""The small interface the live adapter's parts (gangs, evictions, the reasons a pod waits) are
given: the pod book, the nominations, the kernel's state and the few adapter operations they
need, by public names. :class:`dlsched.service.adapter.Adapter` implements it; the parts type
against this protocol, so that they import neither the adapter nor each other's privates."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from dlsched.core.job import Job
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stimuli import Stimulus
from dlsched.kernel.view import SchedulingView
from dlsched.service.memory_kept import MemoryKept
from dlsched.service.nominations import Nominations
from dlsched.service.podbook import PodBook
from dlsched.service.pods import PodFacts, VcMapping
from dlsched.service.store import Store


class LiveHost(Protocol):
    """What a part of the live adapter may use of it (all under the service's one lock)."""

    book: PodBook
    noms: Nominations
    kernel: Kernel
    state: ClusterState
    view: SchedulingView
    store: Store
    policy: Any
    counters: Counter[str]
    passes: int
    last_now: float   # the clock at the latest now(), read without advancing it
    vcs: VcMapping
    evictions: Any   # service.live_evictions.LiveEvictions
    limits: Any      # service.live_limits.LiveLimits
    memory: MemoryKept   # corrected memory and calibration peaks, kept in the store

    def now(self) -> float: ...

    def handle(self, stimulus: Stimulus, now: float | None = None) -> list: ...

    def record(self, kind: str, **fields: object) -> None: ...

    def mark(self, vid: int) -> None: ...

    def new_job(self, pod: PodFacts, vc: str) -> Job: ...

    def submit(self, pod: PodFacts) -> None: ...

    def end(self, job: Job, pod: PodFacts, why: str) -> None: ...

    def forget(self, job: Job, why: str) -> None: ...

    def why_waiting(self, uid: str) -> str: ...

    def rank(self, job: Job) -> tuple: ...

"""Live preemption, the API side: eviction intents carried out through the Eviction API.

The core records each intent in the store (state ``pending``) before it reaches this thread, so
the API calls stay off the core's lock and a ``kill -9`` anywhere leaves the intent to be
completed at the next start, never decided twice. Outcomes: accepted (the pod checkpoints for its
grace period), gone (404, or the pod's uid changed: nothing to evict), a PodDisruptionBudget's 429
or any other error (tried again after ``retry_s``, counted). An accepted eviction gets a
``Preempted`` event on the pod, as kube-scheduler's preemption writes one.

Fault injection for the crash test: ``DLSCHED_FAULT=kill-before-evict`` makes the process
``SIGKILL`` itself after an intent is written and before its API call.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from dlsched.service.evictions import Intent

log = logging.getLogger("dlsched.service")
FAULT_ENV = "DLSCHED_FAULT"
RETRY_S = 2.0


class Evictor:
    """A thread that carries out eviction intents in order, retrying those the API server refuses."""

    def __init__(self, evict: Callable[[Intent], str], report: Callable[[Intent, str], None],
                 event: Callable[[Intent], str] | None = None, retry_s: float = RETRY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._evict = evict        # the bridge's call: 'accepted', 'gone', 'retry: WHY' or 'error: WHY'
        self._report = report      # the core's eviction_sent (marks the intent done)
        self._event = event        # writes the Preempted event ('' or the error)
        self.retry_s = retry_s
        self.clock = clock
        self._due: list[tuple[float, int, Intent]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.stats: dict[str, int] = {"accepted": 0, "gone": 0, "retried": 0, "pdb_refusals": 0, "events": 0,
                                      "event_failures": 0}

    def submit(self, intent: Intent) -> None:
        """Queue an intent (already durable in the store); called under the core's lock."""
        with self._cond:
            heapq.heappush(self._due, (self.clock(), next(self._seq), intent))
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._due)

    def run(self, done: threading.Event) -> None:
        """Carry out intents until ``done`` is set."""
        while not done.is_set():
            intent = self._next(done)
            if intent is not None:
                self.step(intent)

    def _next(self, done: threading.Event) -> Intent | None:
        with self._cond:
            while not done.is_set():
                now = self.clock()
                if self._due and self._due[0][0] <= now:
                    return heapq.heappop(self._due)[2]
                wait = 0.25 if not self._due else min(0.25, self._due[0][0] - now)
                self._cond.wait(wait)
        return None

    def step(self, intent: Intent) -> str:
        """One try at ``intent``; returns the outcome."""
        if os.environ.get(FAULT_ENV) == "kill-before-evict":
            log.warning("%s=kill-before-evict: killing this process before evicting %s/%s", FAULT_ENV,
                        intent.namespace, intent.name)
            os.kill(os.getpid(), signal.SIGKILL)
        outcome = self._evict(intent)
        if outcome in ("accepted", "gone"):
            self.stats[outcome] += 1
            if outcome == "accepted" and self._event is not None:
                error = self._event(intent)
                self.stats["event_failures" if error else "events"] += 1
            self._report(intent, outcome)
            return outcome
        self.stats["retried"] += 1
        if outcome.startswith("retry: 429"):
            self.stats["pdb_refusals"] += 1
        log.info("eviction of %s/%s not done (%s); retrying in %.0f s", intent.namespace, intent.name, outcome,
                 self.retry_s)
        with self._cond:
            heapq.heappush(self._due, (self.clock() + self.retry_s, next(self._seq), intent))
        return outcome

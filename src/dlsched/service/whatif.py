"""What-if on the live state (``GET /api/v1/whatif``): the pending pods' estimated starts under
the running policy and under another one built from the registry (:mod:`dlsched.sched.whatif`).
Both copies are taken under the core's lock, the two forward runs happen outside it; one what-if
at a time (a second caller is told to retry)."""

from __future__ import annotations

import threading

from dlsched.sched.whatif import compare_runs, snapshots


def split_params(items: list[str], what: str = "param") -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``; ValueError naming the item that is not KEY=VALUE."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{what} {item!r}: want KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


class WhatIfBusy(RuntimeError):
    """Another what-if is running."""


class LiveWhatIf:
    """What-ifs of a :class:`~dlsched.service.core.SchedulerCore`, with its ETA estimator's durations."""

    def __init__(self, core) -> None:
        self.core = core
        self.runs = 0
        self._busy = threading.Lock()

    def compare(self, other_policy) -> dict:
        """The per-pod table and the per-queue and overall summaries (JSON-ready)."""
        if not self._busy.acquire(blocking=False):
            raise WhatIfBusy("another what-if is running: retry in a moment")
        try:
            core = self.core
            base = core.eta.estimator
            with core.lock:
                now = core.now()
                current, other = snapshots(base, other_policy, core.state, now)
                names = {uid: pod.key for uid, pod in core.pods.items() if uid in core.jobs}
            result = compare_runs(current.run(), other.run(), base.policy.name, other_policy.name)
            self.runs += 1
            return result.as_dict(names)
        finally:
            self._busy.release()

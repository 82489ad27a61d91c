"""What-if on the live state (``GET /api/v1/whatif``, ``POST /api/v1/whatif`` with queues): the
pending pods' estimated starts under the running policy and queues and under another policy built
from the registry, other queues (a ``[[queues]]`` TOML body, as in the cluster file), or both
(:mod:`dlsched.sim.whatif`). Both copies are taken under the core's lock, the two forward runs
happen outside it; one what-if at a time (a second caller is told to retry)."""

from __future__ import annotations

import threading

from dlsched.sim.whatif import compare_runs, describe_queues, snapshots


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

    def compare(self, other_policy=None, queues=None, queues_label: str | None = None) -> dict:
        """The per-pod table and the per-queue and overall summaries (JSON-ready). ``other_policy``
        None: the running one; ``queues`` (QueueSpecs) None: the running queues. ValueError when
        the queues do not fit the live VCs (a queue that names none) or the policy."""
        if not self._busy.acquire(blocking=False):
            raise WhatIfBusy("another what-if is running: retry in a moment")
        try:
            core = self.core
            base = core.eta.estimator
            with core.lock:
                now = core.now()
                current, other = snapshots(base, other_policy, core.state, now, queues)
                names = {uid: pod.key for uid, pod in core.pods.items() if uid in core.jobs}
            if queues is not None and queues_label is None:
                queues_label = describe_queues(queues)
            other_name = base.policy.name if other_policy is None else other_policy.name
            result = compare_runs(current.run(), other.run(), base.policy.name, other_name, queues_label)
            self.runs += 1
            return result.as_dict(names)
        finally:
            self._busy.release()

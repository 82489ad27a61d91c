"""Queues that borrow, live: the queue ConfigMap's specs (service/queues.py) enforced by a
queue manager the kernel builds on the live state (the ``QueuesChanged`` stimulus,
``Kernel.on_queues``), or refused with the reason; the stimulus is recorded like every other, so
that a replay enforces the same queues from the same moment through the same handler."""

from __future__ import annotations

from dlsched.kernel.stimuli import QueuesChanged
from dlsched.service.host import LiveHost


class QueueSetting:
    """The configured queue specs and why borrowing is off although they allow it ('' when on
    or when they do not allow it)."""

    def __init__(self, host: LiveHost) -> None:
        self.host = host
        self.specs: tuple = ()
        self.refused = ""

    def apply(self, specs: tuple) -> str:
        """Enforce ``specs``: when some queue may borrow, the kernel gets a queue manager built on
        the live state (loans re-derived from what runs where); otherwise none. Returns '' or why
        borrowing stays off although the queues allow it: as in the simulator, borrowing needs an
        ordering policy that does not preempt on its own (reclaims are the manager's
        preemptions) and exclusive GPUs."""
        from dlsched.kernel.queue_tree import borrowing_blocker
        from dlsched.kernel.quotas import borrowing_possible
        from dlsched.traces.cluster_queues import queues_to_toml

        host = self.host
        policy = host.policy
        self.specs = tuple(specs)
        self.refused = ""
        if self.specs and borrowing_possible(self.specs):
            blocker = borrowing_blocker(policy, host.state.cap, f"--max-jobs-per-gpu 1, not {host.state.cap}")
            if blocker:
                self.refused = f"{blocker}: borrowing and reclaim are off"
        enforced = self.specs if not self.refused else ()
        # a stimulus like any other (recorded, so a replay applies it through the same handler)
        host.handle(QueuesChanged(enforced))
        manager = host.kernel.quotas
        if host.kernel.queues_refused:   # specs that do not fit the state: none enforced
            self.refused = f"{host.kernel.queues_refused}: borrowing and reclaim are off"
        if manager is not None:
            host.counters["queue managers built"] += 1
        host.record("queues", toml=queues_to_toml(enforced) if manager is not None else "")
        return self.refused

"""Cycle actions: decisions the driver runs after the policy's passes, above the kernel.

They call the policy's placer, so they are policy and cannot live in ``kernel/`` (layer 1); the
kernel keeps the books they read and write (``kernel/quotas.py``'s :class:`QuotaManager`).
Today: the queues' borrowing (:mod:`.borrow`) and reclaim (:mod:`.reclaim`), run in that order
by :func:`rebalance`. Reservations and deadlines are the next files of this kind.
"""

from __future__ import annotations

from dlsched.sched.actions.head import head_of
from dlsched.sched.actions.rebalance import rebalance

__all__ = ["head_of", "rebalance"]

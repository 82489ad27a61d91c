"""Shortest job first with the true duration (an oracle baseline, non-preemptive)."""

from __future__ import annotations

from dlsched.sched.ordering import OrderingPolicy


class SjfPolicy(OrderingPolicy):
    name = "sjf"
    oracle = True  # the grant: reads the true duration
    key_attr = "_duration"  # the truth slot, read in C: an oracle class may (tests/test_truth_access.py)

"""First in, first out: order of submission."""

from __future__ import annotations

from dlsched.sched.ordering import OrderingPolicy


class FifoPolicy(OrderingPolicy):
    name = "fifo"
    key_attr = "submit_time"

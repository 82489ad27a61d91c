"""Name -> policy class. One line per policy."""

from __future__ import annotations

from dlsched.placement import make_placer
from dlsched.policies.fifo import FifoPolicy
from dlsched.policies.qssf import QssfPolicy
from dlsched.policies.sjf import SjfPolicy
from dlsched.policies.srtf import SrtfPolicy

POLICIES: dict[str, type] = {
    "fifo": FifoPolicy,
    "sjf": SjfPolicy,
    "srtf": SrtfPolicy,
    "qssf": QssfPolicy,
}


def make_policy(name: str, placement: str = "consolidate", **options):
    """Build a policy by name with a placer by name (plus policy-specific options)."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
    return cls(make_placer(placement), **options)

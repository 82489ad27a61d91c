"""Scheduling policies: queue ordering (+ optional preemption) combined with a placer.

Add one: a file with the policy class and one line in :mod:`dlsched.policies.registry`.
"""

from dlsched.policies.registry import POLICIES, make_policy

__all__ = ["POLICIES", "make_policy"]

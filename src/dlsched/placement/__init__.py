"""Placement: given a job and the free GPUs of its VC, choose nodes and GPUs (or none).

Placement is a separate piece from queue ordering so that any placement combines with any
ordering policy. Add one: a file with a class implementing :class:`~dlsched.placement.base.Placer`
and one line in :mod:`dlsched.placement.registry`.
"""

from dlsched.placement.registry import PLACERS, make_placer

__all__ = ["PLACERS", "make_placer"]

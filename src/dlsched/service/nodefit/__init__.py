"""Scheduler mode's node checks: what kube-scheduler v1.20 checked before it asked the extender,
made by dlsched over the API's JSON (pods and nodes as the API server returns them). Pure
functions and a table; no I/O. See docs/service.md, "Scheduler mode: the node checks".
"""

from dlsched.service.nodefit.fit import CHECKS, FitResult, NodeTable, feasible, group_by_node
from dlsched.service.nodefit.quantity import QuantityError, parse_quantity
from dlsched.service.nodefit.report import (
    condition_patch,
    failed_scheduling_event,
    fit_message,
    scheduled_event,
    unschedulable_condition,
    unsupported_message,
)
from dlsched.service.nodefit.unsupported import unsupported

__all__ = ["CHECKS", "FitResult", "NodeTable", "QuantityError", "condition_patch", "failed_scheduling_event",
           "feasible", "fit_message", "group_by_node", "parse_quantity", "scheduled_event", "unschedulable_condition",
           "unsupported", "unsupported_message"]

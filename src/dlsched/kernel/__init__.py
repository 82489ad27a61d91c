"""The scheduling kernel shared by every backend (simulator, live service, replay).

``ClusterState`` owns cluster occupancy and changes it only through explicit transitions;
``Decider`` (``kernel/decide.py``) runs a policy's pass and carries out its decisions as those
transitions, and ``Kernel.handle`` (``kernel/entry.py``) maps a stimulus to them. Policies decide
on a read-only ``SchedulingView``.
"""

from dlsched.kernel.decisions import Decision, Fit, Placement, Postpone, Preempt, Start, Status
from dlsched.kernel.state import ClusterState, StateError, VcState
from dlsched.kernel.view import OracleAccessError, SchedulingView

__all__ = ["ClusterState", "Decision", "Fit", "OracleAccessError", "Placement", "Postpone", "Preempt",
           "SchedulingView", "Start", "StateError", "Status", "VcState"]

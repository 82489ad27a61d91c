"""The scheduling kernel shared by every backend (simulator, live service, replay).

``ClusterState`` owns cluster occupancy and changes it only through explicit transitions;
``Decider`` (``kernel/decide.py``) runs a policy's pass and carries out its decisions as those
transitions, and ``Kernel``'s handlers (``kernel/entry.py``: ``on_submitted`` ... ``on_timer``,
which ``Kernel.handle`` dispatches to and the simulator calls directly) map a stimulus to them.
Policies decide on a read-only ``SchedulingView``.
"""

from dlsched.kernel.decisions import Decision, Fit, Placement, Postpone, Preempt, Start, Status
from dlsched.kernel.state import ClusterState, StateError, VcState
from dlsched.kernel.view import OracleAccessError, SchedulingView

__all__ = ["ClusterState", "Decision", "Fit", "OracleAccessError", "Placement", "Postpone", "Preempt",
           "SchedulingView", "Start", "StateError", "Status", "VcState"]

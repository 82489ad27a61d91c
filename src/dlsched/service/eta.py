"""Live start-time estimates for ``GET /api/v1/queue``: the simulator's forward run on the live state.

:class:`LiveEta` is a kernel observer of the service's :class:`~dlsched.kernel.state.ClusterState`:
every transition (submit, start, finish, forget, withdraw, node change) bumps a version. ``etas()``
returns the cached ETAs while the version is unchanged and the cache is younger than ``max_age``
seconds (a running job that outlives its prediction moves the estimates as time passes);
predictions are scaled by the finished pods' run time over their predictions (a
:class:`~dlsched.sched.eta.Calibration`, from 50 finished pods on);
otherwise it refreshes: the state is copied under the service lock
(:meth:`~dlsched.sched.eta.EtaEstimator.snapshot`) and the forward run happens outside it, so filter
and bind requests never wait for a refresh. One refresh at a time; a caller that finds one
under way gets the last ETAs. The filter's reason for a waiting pod quotes the last refresh's ETA
(:meth:`reason`), never refreshing.
"""

from __future__ import annotations

import math
import threading

from dlsched.sched.eta import Calibration, EtaEstimator


class LiveEta:
    """Cached forward-simulation ETAs of the pending pods of a :class:`SchedulerCore`."""

    def __init__(self, core, max_age: float = 30.0, overrun: float = 0.5) -> None:
        self.core = core
        self.max_age = max_age
        self.calibration = Calibration()   # finished pods' run times over their predictions
        self.estimator = EtaEstimator(core.policy, overrun=overrun, calibration=self.calibration)
        self.version = 0
        self.refreshes = 0
        self.unpredicted = 0          # pending or running jobs of the last refresh without a prediction
        self._etas: dict[str, float] = {}
        self._stamp: tuple[int, float] = (-1, -math.inf)
        self._busy = threading.Lock()
        core.state.add_observer(self)

    # kernel observer: any change of the state makes the cached estimates stale
    def submitted(self, job, vc, now: float) -> None:
        self.version += 1

    def started(self, job, vc, now: float) -> None:
        self.version += 1

    def stopped(self, job, vc, now: float, why: str) -> None:
        self.version += 1
        if why == "finish":
            self.calibration.observe(job.pred_duration, now - job.start_time)

    def node_changed(self, node: int, now: float) -> None:
        self.version += 1

    def reason(self, uid: str, now: float) -> str:
        """``"; estimated start in ..."`` for a pod's filter reason, from the last refresh only (a
        dict lookup: the filter path never pays for a forward run); "" without an estimate."""
        t = self._etas.get(uid)
        if t is None or t == math.inf:
            return ""
        left = max(0.0, t - now)
        when = f"{left / 60:.0f} min" if left < 7200 else f"{left / 3600:.1f} h"
        return f"; estimated start in {when} (forward simulation, {self.estimator.policy.name})"

    def etas(self) -> dict[str, float]:
        """Pod uid -> estimated start (the service clock's seconds; ``inf``: not in the forward run)."""
        core = self.core
        with core.lock:
            now = core.now()
            version = self.version
            fresh = self._stamp[0] == version and now - self._stamp[1] < self.max_age
            if fresh or not self._busy.acquire(blocking=False):
                return self._etas
            try:
                run = self.estimator.snapshot(core.state, now)
            except BaseException:
                self._busy.release()
                raise
        try:
            result = run.run()   # no lock: the copy is this refresh's own
            self._etas = result.by_id()
            self._stamp = (version, now)
            self.unpredicted = result.unpredicted
            self.refreshes += 1
            return self._etas
        finally:
            self._busy.release()

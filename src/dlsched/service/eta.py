"""Live start-time estimates for ``GET /api/v1/queue``: the simulator's forward run on the live state.

:class:`LiveEta` is a kernel observer of the service's :class:`~dlsched.kernel.state.ClusterState`:
every transition (submit, start, finish, forget, withdraw, node change) bumps a version. ``etas()``
returns the cached ETAs while the version is unchanged and the cache is younger than ``max_age``
seconds (a running job that outlives its prediction moves the estimates as time passes);
predictions are scaled by the finished pods' run time over their predictions (a
:class:`~dlsched.sim.eta.Calibration`, from 50 finished pods on);
otherwise it refreshes: the state is copied under the service lock
(:meth:`~dlsched.sim.eta.EtaEstimator.snapshot`) and the forward run happens outside it, so filter
and bind requests never wait for a refresh. One refresh at a time; a caller that finds one
under way gets the last ETAs. The filter's reason for a waiting pod quotes the last refresh's ETA
(:meth:`reason`), never refreshing.

:class:`EtaRefresher` is the service's timer (started by ``LiveService.start``): every
``interval`` seconds it asks for the ETAs (a forward run only when the state changed or the cache
aged) and hands the pending pods' estimates to an :class:`EtaAnnotator`, which writes the
``dlsched.io/eta`` annotation only where the estimate moved by more than ``threshold`` seconds
since it last wrote it (bounding API writes; every write, skip and failure is counted).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

from dlsched.core.job import JobState
from dlsched.sim.eta import Calibration, EtaEstimator

log = logging.getLogger("dlsched.service")
ETA_ANNOTATION = "dlsched.io/eta"
NEVER = "never (no start in the forward simulation)"


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
        self.last_refresh_at: float | None = None   # service clock of the last refresh
        self.last_refresh_ms = 0.0                  # wall time of its forward run
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
            began = time.perf_counter()
            result = run.run()   # no lock: the copy is this refresh's own
            self.last_refresh_ms = (time.perf_counter() - began) * 1000.0
            self.last_refresh_at = now
            self._etas = result.by_id()
            self._stamp = (version, now)
            self.unpredicted = result.unpredicted
            self.refreshes += 1
            return self._etas
        finally:
            self._busy.release()


def eta_text(t: float, now: float) -> str:
    """The annotation's value: the estimated start in ISO 8601 (UTC) and seconds from ``now``
    (``2026-11-27T00:10:00Z in 600s``); :data:`NEVER` when the forward run never starts the pod."""
    if t == math.inf:
        return NEVER
    iso = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{iso} in {max(0.0, t - now):.0f}s"


def _moved(last: float, t: float, threshold: float) -> bool:
    if last == t:
        return False
    if math.isinf(last) or math.isinf(t):
        return True
    return abs(t - last) > threshold


class EtaAnnotator:
    """Writes ``dlsched.io/eta`` on pending pods whose estimate moved by more than ``threshold``
    seconds since it was last written (or was never written). ``write(pod, text) -> error`` does
    the API call ('' on success). A pod never annotated whose estimate is less than ``soon``
    seconds away, or that was created less than ``soon`` seconds ago, is left alone (it is about
    to be nominated and bound, or may well be: issue 33, point 5), and a
    pod is asked ``pending(uid)`` again just before its write. Counts: ``written``, ``unchanged``
    (moved less than the threshold: no write), ``no_estimate`` (``never`` where nothing was written),
    ``imminent``, ``not_pending``, ``failed``."""

    def __init__(self, write: Callable[[object, str], str], threshold: float = 60.0, soon: float = 0.0,
                 pending: Callable[[str], bool] | None = None) -> None:
        if not threshold >= 0:
            raise ValueError(f"ETA annotation threshold must be >= 0 seconds, got {threshold}")
        if not soon >= 0:
            raise ValueError(f"ETA 'soon' horizon must be >= 0 seconds, got {soon}")
        self.write = write
        self.threshold = float(threshold)
        self.soon = float(soon)   # an estimate closer than this is not written: the pod starts first
        self.pending = pending    # uid -> still pending, asked again just before each write
        self.written: dict[str, float] = {}   # uid -> the ETA last written
        self.counts: Counter[str] = Counter()

    def sync(self, pending: list[tuple[object, float]], now: float) -> int:
        """Annotate the (pod facts, ETA) pairs that moved; forget pods no longer pending. Returns
        the number of writes tried."""
        tried = 0
        for pod, t in pending:
            last = self.written.get(pod.uid)
            if last is not None and not _moved(last, t, self.threshold):
                self.counts["unchanged"] += 1
                continue
            if last is None and math.isinf(t):
                # no estimate (nothing starts it in the forward run): the absent annotation says so;
                # ``never`` is written only over an estimate written before, which it makes stale
                self.counts["no_estimate"] += 1
                continue
            if last is None and (t - now < self.soon or now - (getattr(pod, "created", 0.0) or 0.0) < self.soon):
                # about to start (the forward run starts it before the next tick), or created less
                # than a tick ago (most such pods bind before the annotation could be read, and the
                # write would race their bind): a pod that waits is annotated at a later tick
                self.counts["imminent"] += 1
                continue
            if self.pending is not None and not self.pending(pod.uid):
                self.counts["not_pending"] += 1   # nominated or bound since the estimates were read
                continue
            tried += 1
            error = self.write(pod, eta_text(t, now))
            if error:
                self.counts["failed"] += 1
                log.info("ETA annotation of %s failed: %s", pod.key, error)
            else:
                self.counts["written"] += 1
                self.written[pod.uid] = t
        keep = {pod.uid for pod, _ in pending}
        for uid in [u for u in self.written if u not in keep]:
            del self.written[uid]
        return tried


def pending_etas(core, etas: dict[str, float]) -> list[tuple[object, float]]:
    """(pod facts, ETA) of the core's pods that are still pending, read under its lock; a pod
    that holds a reservation (``easy``, ``conservative``) has it as its ETA."""
    from dlsched.service.reserved import reserved_start

    with core.lock:
        out = []
        for uid, t in etas.items():
            job = core.jobs.get(uid)
            if job is not None and job.state is JobState.PENDING and uid in core.pods:
                reserved = reserved_start(core.policy, job)
                out.append((core.pods[uid], t if reserved is None else reserved))
        return out


def still_pending(core) -> Callable[[str], bool]:
    """``pending(uid)``: whether the core still has the pod pending (not nominated, not bound)."""
    def pending(uid: str) -> bool:
        with core.lock:
            job = core.jobs.get(uid)
            return job is not None and job.state is JobState.PENDING
    return pending


def kube_writer(api) -> Callable[[object, str], str]:
    """``write(pod, text)`` for :class:`EtaAnnotator` through the API server: a JSON patch of the
    annotation with the uid / not-bound tests of the GPU annotation (a pod bound meanwhile keeps
    its last ETA; the 422 is a failure, not retried)."""
    from kubernetes.client.exceptions import ApiException

    from dlsched.service.kube import _read, annotation_patch

    def write(pod, text: str) -> str:
        for has_map in (bool(pod.annotations), not pod.annotations):
            try:
                patch = annotation_patch(pod.uid, ETA_ANNOTATION, text, has_map)
                _read(api.patch_namespaced_pod(pod.name, pod.namespace, patch, _preload_content=False))
                return ""
            except ApiException as exc:
                if exc.status != 422:
                    return f"({exc.status}) {exc.reason}"
            except Exception as exc:  # noqa: BLE001 - an ETA annotation is best effort
                return str(exc)
        return "(422) the pod is bound already or has another uid"
    return write


class EtaRefresher:
    """The ETA timer: :meth:`tick` every ``interval`` seconds refreshes the estimates when the state
    changed (the forward run outside the core's lock, :meth:`LiveEta.etas`) and, after a refresh,
    annotates the pending pods."""

    def __init__(self, eta: LiveEta, interval: float = 5.0, annotator: EtaAnnotator | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"ETA refresh interval must be > 0 seconds, got {interval}")
        self.eta = eta
        self.interval = float(interval)
        self.annotator = annotator
        self.ticks = 0
        self.errors = 0
        self._synced = 0   # the refresh whose estimates the annotator last saw

    def tick(self) -> bool:
        """One round; True when it refreshed the estimates."""
        self.ticks += 1
        before = self.eta.refreshes
        etas = self.eta.etas()
        refreshed = self.eta.refreshes != before
        if self.annotator is not None and self.eta.refreshes != self._synced:   # also a refresh the queue API made
            self._synced = self.eta.refreshes
            core = self.eta.core
            self.annotator.sync(pending_etas(core, etas), core.now())
        return refreshed

    def run(self, done: threading.Event) -> None:
        """Tick until ``done`` is set; an error is logged and counted, never fatal."""
        while not done.wait(self.interval):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the timer must outlive a bad refresh
                self.errors += 1
                log.exception("ETA refresh failed")

    def stats(self) -> dict:
        eta = self.eta
        out = {"interval_s": self.interval, "ticks": self.ticks, "errors": self.errors, "refreshes": eta.refreshes,
               "last_refresh_at": eta.last_refresh_at, "last_refresh_ms": round(eta.last_refresh_ms, 3),
               "unpredicted": eta.unpredicted, "calibration_factor": eta.calibration.factor}
        if self.annotator is not None:
            out["annotations"] = {"threshold_s": self.annotator.threshold, "written": self.annotator.counts["written"],
                                  "unchanged": self.annotator.counts["unchanged"],
                                  "no_estimate": self.annotator.counts["no_estimate"],
                                  "imminent": self.annotator.counts["imminent"],
                                  "not_pending": self.annotator.counts["not_pending"],
                                  "failed": self.annotator.counts["failed"]}
        return out

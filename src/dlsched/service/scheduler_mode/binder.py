"""The scheduler mode's binds: every nomination (``SchedulerCore.on_nomination``, called under
the core's lock) is queued here and bound by worker threads through the extender's own bind
path (``LiveService.bind``: ``begin_bind``, a Binding that carries the ``dlsched.io/gpus``
annotation -- v1.20 copies a Binding's annotations to the pod in the same write as its node --,
``end_bind``). So a bound pod costs one API write. Just before its Binding the pod is checked
against its node once more (a pod bound meanwhile may have taken the room) and its room is
reserved; a pod that no longer fits has its nomination forgotten and is decided again on the
nodes that now pass.

A gang's pods are bound each from its own thread: the gang's permit stage (service/gangs.py)
waits for all of them and the last binds the gang, all or nothing.

A worker does not wait for the bind's rows to be committed: the service's committer thread
(:mod:`dlsched.service.group_commit`) commits them (``Store.write_behind``, durable) in groups.
Measured (bench_scheduler_mode.py, drain): the synchronous commit was more than half a worker's busy time, and the pods waited in
the binder's queue for it. A crash before the commit leaves the pod to start-up's adoption of
bound pods, as a crash between the Binding and the commit always did. The watch's own commits
(a bound pod's echo, a finished pod's release: ``SchedulerCore.commit_behind``) go to the same
thread: a py-spy profile of a drain had the pod watch's per-event commits at 30 of 107 samples.
"""

from __future__ import annotations

import logging
import queue
import threading

from dlsched.service.pods import PodFacts

log = logging.getLogger("dlsched.service")
# Bindings in flight at once (each is one HTTP round trip; kube.CONNECTION_POOL is 64). Measured
# (docs/service.md, "Bindings in flight"): 32 or up to 64 in flight in a drain emptied the
# binder's queue but the loaded API server's round trip doubled, pods/s did not rise and
# dlsched's CPU per bound pod did; kube-scheduler has no cap, its Bindings cost the API server less.
WORKERS = 16
RETRY_MIN_S = 0.5    # a pod whose Binding failed is held out of placement this long, doubling per failure
RETRY_MAX_S = 30.0


class Binder:
    """Queue of nominations -> Bindings (see the module doc)."""

    def __init__(self, service, workers: int = WORKERS) -> None:
        self.service = service
        self.bridge = service.bridge
        self.workers = workers
        self.counts = {"queued": 0, "bound": 0, "failed": 0, "refit": 0}
        self.failures: dict[str, int] = {}   # uid -> Bindings that failed in a row
        self._queue: queue.SimpleQueue = queue.SimpleQueue()

    def submit(self, pod: PodFacts, node: str, gpus: str) -> None:
        """``SchedulerCore.on_nomination``: queue the Binding (no API call under the core's lock)."""
        self.counts["queued"] += 1
        self.bridge.stages.mark(pod.uid, 1)
        self._queue.put((pod, node))

    def start(self, done: threading.Event) -> None:
        for i in range(self.workers):
            threading.Thread(target=self._run, args=(done,), name=f"bind-{i}", daemon=True).start()
        # the binds' rows and the watch's echoes of them (and releases) are committed by the
        # service's group committer (service/group_commit.py; docs/service.md, "The pod watch's commits")
        self.service.start_committer()

    def _run(self, done: threading.Event) -> None:
        while not done.is_set():
            try:
                pod, node = self._queue.get(timeout=1.0)
            except queue.Empty:
                continue
            self.bridge.stages.mark(pod.uid, 2)
            if self.service.core.gangs.owns(pod.uid):   # the permit waits for the gang's other pods
                threading.Thread(target=self.bind_one, args=(pod, node), name="bind-gang", daemon=True).start()
            else:
                self.bind_one(pod, node)

    def bind_one(self, pod: PodFacts, node: str) -> str:
        """Check, reserve, bind; '' or why the pod was not bound."""
        core = self.service.core
        why = self.bridge.reserve(pod.uid, node)
        if why:
            self.counts["refit"] += 1
            error = f"node {node} no longer fits the pod: {why}"
            log.info("%s: %s; decided again", pod.key, error)
            self.bridge.refit(pod.uid, full=True)
            if pod.gpus == 0:   # no kernel job: placed again by the bridge on a node that passes
                self.bridge._place_plain(pod.uid)
            elif not core.gangs.owns(pod.uid):
                core.end_bind(pod.uid, node, error)   # the GPUs return; a gang's permit times out instead
            core.run_pass()
            return error
        self.bridge.stages.mark(pod.uid, 3)
        try:
            error = self.service.bind(pod.namespace, pod.name, pod.uid, node)
        except Exception as exc:  # noqa: BLE001 - a worker must survive; the GPUs return
            error = f"bind failed: {exc}"
            core.end_bind(pod.uid, node, error)
        if error:
            self.bridge.unreserve(pod.uid)
            self.counts["failed"] += 1
            self._hold(pod, error)
        else:
            self.failures.pop(pod.uid, None)
            self.counts["bound"] += 1
            self.bridge.stages.mark(pod.uid, 4)
        return error

    def _hold(self, pod: PodFacts, error: str) -> None:
        """A failed Binding (a refusal, RBAC, the API server away): the pod is offered no node
        for a back-off that doubles per failure in a row (RETRY_MIN_S .. RETRY_MAX_S), then
        checked again; without it the next pass would nominate it at once, and a Binding the
        API server keeps refusing would be sent in a tight loop."""
        n = self.failures[pod.uid] = self.failures.get(pod.uid, 0) + 1
        if len(self.failures) > 100_000:
            self.failures.pop(next(iter(self.failures)))
        wait = min(RETRY_MAX_S, RETRY_MIN_S * 2 ** (n - 1))
        log.warning("Binding of %s failed (%d in a row): %s; tried again in %.1f s", pod.key, n, error, wait)
        self.bridge._offer(pod.uid, frozenset())
        core = self.service.core

        def again() -> None:
            if self.service._done.is_set():   # the service stopped meanwhile
                return
            self.bridge.refit(pod.uid)
            if pod.gpus == 0:
                self.bridge._place_plain(pod.uid)
            core.run_pass()
        timer = threading.Timer(wait, again)
        timer.daemon = True
        timer.start()

"""One running service: the core, its durable store and (when connected) the API server bridge.

Start-up order matters for crash safety: the store is opened, the API server's nodes and pods
are listed into the core (bound pods first: their GPUs are taken from their annotations), the
store's assignment table is reconciled with that truth, and only then do the watches and the
HTTP server start.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from dlsched.service.core import BindError, SchedulerCore
from dlsched.service.pods import BATCH_ANNOTATION, GPU_RESOURCE, MODEL_ANNOTATION, VC_LABEL

log = logging.getLogger("dlsched.service")
TIMER_POLL_S = 0.25   # the longest the timer thread sleeps before it looks at the timers again
REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def resource_predictor(gpu: str, model_dir: Path | None = None) -> Callable:
    """``predict(job)``: the shipped resource predictor fills a job's predicted GPU utilisation and
    memory from its model annotation (what GPU-sharing placements need). Graph analyses are
    cached per model; a model outside the zoo is read only as an .onnx file in ``model_dir``."""
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    predictor = load_default()
    if predictor is None:
        raise RuntimeError("--predict-resources: no resource predictor is installed "
                           "(train one with `dlsched predictor train`)")

    @lru_cache(maxsize=256)
    def resolve(ref: str):
        if ref.endswith(".onnx"):
            name = Path(ref).name
            if model_dir is None or not REF_RE.match(name) or not (model_dir / name).is_file():
                return None
            ref = str(model_dir / name)
        elif not REF_RE.match(ref):
            return None
        return graph_resolver(ref)

    from dlsched.predictors.resources.stack_calibration import StackCalibration

    calibration = StackCalibration()   # per (GPU type, stack): learnt from the agents' peaks

    def predict(job) -> None:
        job.stack = job.stack or "unknown"   # a live cluster's stack is unknown unless its pods say
        fill_job_predictions([job], predictor, resolve, gpu=gpu, calibration=calibration)
    predict.calibration = calibration
    return predict


@dataclass
class LiveService:
    """What the HTTP app needs: the core, the bridge (None in unit tests), the operator token."""

    core: SchedulerCore
    bridge: object | None = None
    token: str = ""
    scheduler_name: str = "default-scheduler"
    model_dir: Path | None = None
    observe_after: float = 60.0   # seconds a pod runs before agent readings replace its predictions
    stats: dict = field(default_factory=lambda: {"binds": 0, "bind_failures": 0})
    agents: dict = field(default_factory=dict)   # node -> the last inventory its agent posted
    elector: object | None = None   # a LeaderElector with two or more replicas (see attach_elector)
    started: bool = False           # start() has reconciled: the core may answer extender calls
    forwarding: dict = field(default_factory=lambda: {"forwarded": 0, "refused": 0})   # as a follower
    unseen_ttl: float = 30.0   # seconds a pod known from filter calls only may hold a nomination
    nudge: bool = True         # annotate a pod nominated after kube-scheduler was told to wait (a nudge)
    eta_interval: float = 5.0    # seconds between ETA timer ticks (a refresh only when the state changed); 0: off
    eta_threshold: float = 60.0  # seconds an ETA must move before its pod's dlsched.io/eta is written again
    eta_timer: object | None = None   # the EtaRefresher, once started
    policy_factory: Callable | None = None   # (name, params, placement) -> policy, for GET /api/v1/whatif
    queues_configmap: str = "dlsched/dlsched-queues"   # NAMESPACE/NAME of the queue ConfigMap ('' : none)
    queues_interval: float = 10.0    # seconds between reads of it
    queues: object | None = None     # the LiveQueues (docs/queues.md)
    _queues_polling: bool = False    # its poller thread runs
    evictor: object | None = None    # the Evictor (service/evictor.py), once started
    config: dict = field(default_factory=dict)   # the effective configuration (ServiceConfig.describe())
    mode: str = "extender"   # or "scheduler": dlsched binds the pods of its own scheduler name (scheduler_mode/)
    binder: object | None = None   # the scheduler mode's Binder, once started
    committer: object | None = None   # the GroupCommitter of the binds' rows, once started (both modes)
    gpu_binding: object | None = None   # --gpu-binding envvar-configmap: a GpuBinding (service/gpu_binding/)
    gpu_waits: object | None = None   # the scheduler mode's GpuWaitReporter, once started
    socket_fence: object | None = None   # with leader election: the SocketFence on the API client (service/fence.py)
    _nudges: queue.SimpleQueue = field(default_factory=queue.SimpleQueue, repr=False)
    _annotated: dict = field(default_factory=dict, repr=False)   # uid -> (node, GPU text) a nudge wrote
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def start(self) -> dict:
        """Reconcile with the API server and start watching; returns what reconciliation found.
        With leader election this runs when the replica becomes leader, not before: its core is
        then built from the API server and the shared store at that moment."""
        kept = self.core.load_memory()   # before the pods: a known pod's job gets its corrected memory
        if self.bridge is None:
            self.started = True
            return {}
        self.core.load_evictions(self.core.store.eviction_rows())   # before the pods: their deletions are evictions
        self.read_queues_once()   # before the pods: a borrowed pod found bound is adopted as a loan
        node_rv, pod_rv, holding = self.bridge.reconcile()
        dropped = self.core.store.reset_assignments(holding, self.core.now())
        memory_gone = self.core.settle_memory()
        if self.gpu_binding is not None:   # the reservations that exist and the GPUs bound pods hold
            self.gpu_binding.recover()
            self.gpu_binding.start(self._done)
        from dlsched.service.gang_recovery import recover

        gangs = recover(self)   # gang hook: a gang left partly bound is completed or released
        resumed = self.start_evictor()
        self.start_committer()
        if self.mode == "scheduler":   # every nomination becomes a Binding (no extender, no nudges)
            self.start_binder()
        elif self.nudge and hasattr(self.bridge, "touch"):
            self.core.nudge = lambda pod, node, gpus, waited: self._nudges.put((pod, node, gpus, waited))
            threading.Thread(target=self._nudger, name="nudge", daemon=True).start()
        self.core.run_pass()
        self.bridge.start(node_rv, pod_rv)
        threading.Thread(target=self._expirer, name="expire", daemon=True).start()
        self.start_eta_timer()
        if self.mode == "scheduler":
            self.start_gpu_waits()
        self.start_queues()
        self.start_timers()
        self.core.serving = True   # pods seen until now are nudged once nominated (core.due_nudges)
        self.started = True
        return {"pods_holding_gpus": len(holding), "stale_assignments_dropped": dropped, "gangs": gangs,
                "eviction_intents_resumed": resumed[0], "eviction_intents_closed": resumed[1],
                "memory_corrections_read": kept[0], "memory_peaks_read": kept[1],
                "memory_corrections_of_gone_pods": memory_gone}

    def start_committer(self) -> None:
        """Both modes: binds and the pod watch leave their rows to one thread that commits them
        in groups (service/group_commit.py) instead of a flushed commit each."""
        if self.committer is None:
            from dlsched.service.group_commit import GroupCommitter

            self.committer = GroupCommitter(self.core.store)
            self.committer.start(self._done)
            self.core.commit_behind = self.committer.request

    def start_binder(self) -> None:
        """The scheduler mode's bind workers (service/scheduler_mode/binder.py), told of every
        nomination by the core."""
        if self.binder is None:
            from dlsched.service.scheduler_mode.binder import Binder

            self.binder = Binder(self)
            self.core.on_nomination = self.binder.submit
            self.bridge.binder = self.binder   # pods that request no GPU are bound by it too
            self.binder.start(self._done)

    def start_gpu_waits(self) -> None:
        """Scheduler mode: a pod that passes the node checks but waits for GPUs gets
        ``PodScheduled=False`` with its queue position and ETA, on the ETA timer's interval, once
        per change (service/scheduler_mode/waiting.py)."""
        if self.gpu_waits is not None or self.eta_interval <= 0 or not hasattr(self.bridge, "report_waiting"):
            return
        from dlsched.service.scheduler_mode.waiting import GpuWaitReporter

        bridge = self.bridge
        self.gpu_waits = reporter = GpuWaitReporter(lambda: self.core.queue(), lambda uid: self.core.offered.get(uid),
                                                    bridge.report_waiting, bridge.last_report, self.core.policy.name,
                                                    self.eta_threshold, lambda: self.core.now())

        def run() -> None:
            while not self._done.wait(self.eta_interval):
                try:
                    reporter.tick()
                except Exception:  # noqa: BLE001 - the reports must outlive a bad round
                    log.exception("GPU-wait reports failed")
        threading.Thread(target=run, name="gpu-waits", daemon=True).start()

    def mode_state(self) -> dict:
        """How this service reaches Kubernetes, for GET /api/v1/state: the mode, and in scheduler
        mode its binds, node checks and watches."""
        binding = {"gpu_binding": self.gpu_binding.state() if self.gpu_binding is not None else
                   {"mode": "annotation", "note": "dlsched.io/gpus records dlsched's choice; the node's device "
                    "plugin picks the GPUs unless it reads the annotation"}}
        if self.mode != "scheduler":
            return {"mode": self.mode, "scheduler_name": self.scheduler_name, **binding}
        describe = getattr(self.bridge, "describe", None)
        out = describe() if describe is not None else {"mode": "scheduler", "scheduler_name": self.scheduler_name}
        if self.binder is not None:
            out["binder"] = dict(self.binder.counts)
        if self.gpu_waits is not None:
            out["waiting_for_gpus"] = self.gpu_waits.stats()
        return {**out, **binding}

    def start_evictor(self) -> tuple[int, int]:
        """The thread that carries out eviction intents (service/evictor.py), then the intents a
        killed process left pending; returns (resumed, closed)."""
        if getattr(self.bridge, "evict", None) is not None and self.evictor is None:
            from dlsched.service.evictor import Evictor

            self.evictor = Evictor(self.bridge.evict, self.core.eviction_sent,
                                   getattr(self.bridge, "preempted_event", None))
            self.core.evictor = self.evictor.submit
            threading.Thread(target=self.evictor.run, args=(self._done,), name="evict", daemon=True).start()
        return self.core.resume_evictions()

    # -- leader election -------------------------------------------------------------------
    def attach_elector(self, elector) -> None:
        """Only the lease holder nominates (the core's passes) and binds (:meth:`bind`)."""
        self.elector = elector
        self.core.may_nominate = lambda: elector.is_leader
        if self.bridge is not None and getattr(self.bridge, "api", None) is not None:
            from dlsched.service.kube import FencedApi

            # every API write (pod patch, Binding, Eviction, event, pod deletion) checks the renew
            # deadline at the moment it is sent: the workers that annotate, nudge and evict too
            self.bridge.api = FencedApi(self.bridge.api, lambda: elector.is_leader)
            api_client = getattr(self.bridge.api, "api_client", None)   # reads pass through FencedApi
            if api_client is not None and hasattr(api_client, "rest_client"):
                from dlsched.service.fence import SocketFence

                # and again as the bytes leave (service/fence.py): a pause between the call's
                # check and the socket write must not let the write out on resuming
                self.socket_fence = SocketFence(lambda: elector.is_leader)
                self.socket_fence.install(api_client)

    def leading(self) -> bool:
        """True when this replica answers extender calls itself: it holds the lease (always, without
        leader election) and has rebuilt its state since it took it."""
        return self.started and (self.elector is None or self.elector.is_leader)

    def leadership(self) -> dict:
        """Who leads, as /api/v1/state, /api/v1/leader and the metrics show it."""
        if self.elector is None:
            return {"leader_election": False, "is_leader": True, "ready": self.started}
        fence = self.socket_fence
        return {"leader_election": True, **self.elector.status(), "ready": self.leading(),
                "calls_forwarded": self.forwarding["forwarded"], "calls_refused": self.forwarding["refused"],
                "writes_stopped_at_socket": fence.refused if fence is not None else 0}

    def _nudger(self) -> None:
        """Annotates a pod nominated after kube-scheduler was told to wait with its node and GPUs
        (API calls stay outside the core's lock; the uid / not-bound preconditions of the bind's
        patch): the pod update moves it out of kube-scheduler's unschedulable queue (the nudge),
        and its bind then needs the Binding call alone. Only such pods: annotating every
        nomination ahead of its bind was tried, and under load the writes queued behind each
        other, landed after the binds and slowed the API server (82 of 100 came too late). Also
        a pod whose last call this process did not answer (core.due_nudges). A queued nudge is
        dropped when the pod was bound, forgotten or moved, or told "nominated", meanwhile."""
        while not self._done.is_set():
            try:
                pod, node, gpus, _ = self._nudges.get(timeout=1.0)
            except queue.Empty:
                continue
            if not self.core.nudge_wanted(pod.uid, node):
                # bound, forgotten or moved meanwhile, or kube-scheduler was told "nominated" since
                # (its bind is on its way): the write would change nothing or be refused (422)
                self.stats["nudges_skipped"] = self.stats.get("nudges_skipped", 0) + 1
                continue
            error = self.bridge.touch(pod.namespace, pod.name, pod.uid, node, gpus)
            if not error:
                self._annotated[pod.uid] = (node, gpus)
                if len(self._annotated) > 100_000:
                    self._annotated.pop(next(iter(self._annotated)))
            else:
                self._annotated.pop(pod.uid, None)
                log.info("nudge of %s failed: %s", pod.key, error)
            key = "nudges_failed" if error else "nudges"
            self.stats[key] = self.stats.get(key, 0) + 1

    def start_eta_timer(self) -> None:
        """The ETA timer (docs/eta.md): refreshes off the request path and annotates pending pods
        through the bridge (its ``write_eta``, else a patch through its ``api``)."""
        if self.eta_interval <= 0 or self.eta_timer is not None:
            return
        from dlsched.service.eta import EtaAnnotator, EtaRefresher, kube_writer, still_pending

        write = getattr(self.bridge, "write_eta", None)
        if write is None and getattr(self.bridge, "api", None) is not None:
            write = kube_writer(self.bridge.api)
        annotator = EtaAnnotator(write, self.eta_threshold, soon=self.eta_interval,
                                 pending=still_pending(self.core)) if write is not None else None
        self.eta_timer = EtaRefresher(self.core.eta, self.eta_interval, annotator)
        threading.Thread(target=self.eta_timer.run, args=(self._done,), name="eta", daemon=True).start()

    def live_queues(self):
        """The queue configuration (a ConfigMap's, once :meth:`start_queues` ran; else none)."""
        if self.queues is None:
            from dlsched.service.queues import LiveQueues

            self.queues = LiveQueues(self.core)
        return self.queues

    def read_queues_once(self) -> None:
        """Read the queue ConfigMap once, before the pods are listed at start-up: its namespaces
        map the pending pods found, and with borrowing on a pod found bound on another queue's
        node is adopted as that queue's loan (not as a job of the node's VC). A failed read is
        counted; the poller tries again."""
        api = getattr(self.bridge, "api", None)
        if not self.queues_configmap or api is None or self.queues is not None:
            return
        from dlsched.service.queues import LiveQueues, kube_reader, kube_warner, parse_ref

        ns, name = parse_ref(self.queues_configmap)
        self.queues = LiveQueues(self.core, ns, name, kube_reader(api, ns, name), kube_warner(api, ns, name),
                                 self.queues_interval)
        try:
            self.queues.poll()
        except Exception as exc:  # noqa: BLE001 - the API server may be away for a while
            self.queues.counts["read_failed"] += 1
            log.warning("queue ConfigMap %s/%s not read at start: %s", ns, name, exc)

    def start_queues(self) -> None:
        """Read the queue ConfigMap every ``queues_interval`` seconds (through the bridge's api)."""
        self.read_queues_once()
        if self.queues is None or self.queues.read is None or self._queues_polling:
            return
        self._queues_polling = True
        threading.Thread(target=self.queues.run, args=(self._done,), name="queues", daemon=True).start()

    def _expirer(self) -> None:
        """Drops, every second, nominations of pods the API server has not shown in time, and
        nudges the nominated pods whose last extender call this process did not answer (seen at
        start-up or when it became leader: kube-scheduler may have parked them for 60 s)."""
        while not self._done.wait(1.0):
            self.core.expire_unseen(self.unseen_ttl)
            if self.nudge and self.leading():
                self.core.due_nudges()

    # -- the policy's timers (Timer -> TimerFired) -----------------------------------------
    def start_timers(self) -> threading.Thread:
        """Start the thread that fires the policy's wake-up requests (:meth:`_fire_timers`)."""
        thread = threading.Thread(target=self._fire_timers, name="timers", daemon=True)
        thread.start()
        return thread

    def _fire_timers(self, poll: float = TIMER_POLL_S) -> None:
        """A policy's ``view.wake_at`` comes back from a pass as a Timer action, which the core
        keeps as a timer; this thread hands it to the kernel as TimerFired when due (a pass over
        that VC even with nothing new). It sleeps until the earliest timer, at most ``poll``
        seconds, so a timer added meanwhile is late by no more than that."""
        core = self.core
        while not self._done.is_set():
            due = core.next_timer()
            now = core.now()
            if due is not None and due <= now and core.fire_timers():
                continue
            wait = poll if due is None or due <= now else min(poll, due - now)   # a follower: poll
            if self._done.wait(wait):
                return

    def stop(self) -> None:
        self._done.set()
        webhook = getattr(self.gpu_binding, "webhook", None)
        if webhook is not None:
            webhook.stop()
        if self.elector is not None:
            self.elector.stop(release=True)
        if self.bridge is not None:
            self.bridge.stop()
        if self.core.recorder is not None:
            self.core.recorder.close()

    # -- extender bind ------------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str, commit: bool = True) -> str:
        """Bind through the API server; '' on success, else the error (the GPUs are returned).
        The bind's rows are committed by the group committer once it runs (:meth:`start_committer`),
        else before returning; ``commit`` False: left for the caller's own :meth:`Store.write_behind`."""
        if self.elector is not None and not self.elector.is_leader:
            return "this dlsched replica does not hold the leader lease: not binding"
        if self.core.gangs.owns(uid):   # gang hook: the permit stage, all of the gang or none (service/gangs.py)
            return self.core.gangs.bind(self, namespace, name, uid, node)
        try:
            pod, gpus = self.core.begin_bind(uid, node)
        except BindError as exc:
            return str(exc)
        if (pod.uid, pod.namespace, pod.name) != (uid, namespace, name):
            return f"uid {uid} is pod {pod.key}, not {namespace}/{name}"
        if self.bridge is None:
            error = "no API server connected"
        elif gpus is None:   # requests no GPU: bound untouched (no annotation, nothing held)
            error = self.bridge.bind(namespace, name, uid, node, None)
            if not error:
                self.core.zero_gpu.pop(uid, None)
            self.stats["binds" if not error else "bind_failures"] += 1
            return error
        else:
            ahead = self._annotated.pop(uid, None) == (node, ",".join(map(str, gpus)))
            # the uid is the API server's own for this name (its watch showed the pod), or the
            # pending pod with this uid was annotated when nudged: the Binding alone, which writes
            # the annotation with the node and refuses a bound pod. A pod known from filter calls
            # only gets the patch that tests its uid first.
            seen = uid not in self.core.unseen and self.core.key_uid.get(pod.key) == uid
            if ahead or seen:
                error = self.bridge.bind(namespace, name, uid, node, gpus, annotate=False)
            else:
                error = self.bridge.bind(namespace, name, uid, node, gpus, bool(pod.annotations))
        grouped = commit and self.committer is not None
        self.core.end_bind(uid, node, error, commit and not grouped)
        if grouped:
            self.committer.request()
        self.stats["binds" if not error else "bind_failures"] += 1
        return error

    # -- node agent -----------------------------------------------------------------------
    def observe(self, node: str, readings: list[tuple]) -> dict:
        """Feed an agent's readings ``(uid, util, mem[, speed])`` to the core; counts what happened."""
        nan = float("nan")
        out: dict[str, int] = {}
        for uid, util, mem, *rest in readings:
            speed = rest[0] if rest and rest[0] is not None else nan
            what = self.core.observe(uid, nan if util is None else util, nan if mem is None else mem,
                                     self.observe_after, speed, commit=False)
            out[what] = out.get(what, 0) + 1
        self.core.write_memory()   # the post's memory corrections, in one transaction
        return {"node": node, **out}

    # -- operator API ---------------------------------------------------------------------
    def submit_pod(self, namespace: str, name: str, gpus: int, image: str, vc: str | None, model: str | None,
                   batch_size: int | None) -> dict:
        """Create a pod for this scheduler through the API server (it then flows like any pod)."""
        if self.bridge is None:
            raise LookupError("no API server connected: start the service with --kubeconfig or --api-server")
        meta: dict = {"name": name, "namespace": namespace, "annotations": {}, "labels": {}}
        if vc:
            meta["labels"][VC_LABEL] = vc
        if model:
            meta["annotations"][MODEL_ANNOTATION] = model
        if batch_size:
            meta["annotations"][BATCH_ANNOTATION] = str(batch_size)
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"schedulerName": self.scheduler_name, "containers": [{
                    "name": "main", "image": image,
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}}}]}}
        return self.bridge.create_pod(namespace, body)

    def predict(self, model: str, batch_size: int, gpu: str) -> dict:
        """Predicted GPU utilisation and memory of a model at a batch size (the shipped predictor)."""
        from dlsched.core.cluster import gpu_type
        from dlsched.core.job import Job
        from dlsched.predictors.resources.default import load_default
        from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

        try:
            gpu = gpu_type(gpu).name
        except ValueError as exc:
            raise ValueError(f"gpu: {exc}") from None
        if not REF_RE.match(model) or ".." in model:
            raise ValueError("model must be a zoo model name or an .onnx file name (letters, digits, '_', '-', '.')")
        ref = model
        if model.endswith(".onnx"):
            if self.model_dir is None:
                raise ValueError("ONNX files are served only with --model-dir")
            path = self.model_dir / model
            if not path.is_file():
                raise LookupError(f"no model file {model} in the model directory")
            ref = str(path)
        predictor = load_default()
        if predictor is None:
            raise LookupError("no resource predictor is installed (train one with `dlsched predictor train`)")
        job = Job("predict", "default", 1, 0.0, float("nan"), onnx_ref=ref if ref.endswith(".onnx") else "",
                  model_name="" if ref.endswith(".onnx") else ref, batch_size=batch_size)
        if not fill_job_predictions([job], predictor, graph_resolver, gpu=gpu):
            raise LookupError(f"model {model!r} could not be resolved or analysed")
        nan = job.pred_gpu_util != job.pred_gpu_util
        return {"model": model, "batch_size": batch_size, "gpu": gpu,
                "gpu_util": None if nan else job.pred_gpu_util,
                "gpu_mem_mib": None if job.pred_gpu_mem_mib != job.pred_gpu_mem_mib else job.pred_gpu_mem_mib}

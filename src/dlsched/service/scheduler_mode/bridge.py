"""The API-server bridge of the scheduler mode: the extender's :class:`KubeBridge` (list,
reconcile, Bindings, evictions) plus what kube-scheduler did for the extender: it keeps the raw
nodes and the pods bound on each (whatever scheduler placed them), checks every pending pod of
dlsched's own (``spec.schedulerName``) against the nodes, restricts the pod's placement to the
nodes that pass (``SchedulerCore.offered``, the mechanism kube-scheduler's offered nodes use),
and reports a pod no node passes as kube-scheduler does: ``PodScheduled=False`` /
``Unschedulable`` with the reason, and a ``FailedScheduling`` event: once per pod and message
(none while the pod already carries it), queued one per pod and written at a capped rate
(``scheduler_mode/reports.py``). Pods of any other scheduler are read, never written.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from dlsched.core.job import JobState
from dlsched.service.kube import KubeBridge, _read
from dlsched.service.scheduler_mode import fit
from dlsched.service.scheduler_mode.reports import ReportQueue
from dlsched.service.scheduler_mode.stages import StageTimes
from dlsched.service.scheduler_mode.watch import watch_kind

log = logging.getLogger("dlsched.service")
REPORT_AGAIN_S = 60.0   # a pod's same Unschedulable message is written again after this long


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _terminal(obj: dict) -> bool:
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed") or bool(_meta(obj).get("deletionTimestamp"))


def _node_key(obj: dict) -> tuple:
    """What the node checks read of a node: a heartbeat that changes none of it is no news."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return (repr(sorted((_meta(obj).get("labels") or {}).items())), bool(spec.get("unschedulable")),
            repr(spec.get("taints") or []), repr(sorted((status.get("allocatable") or {}).items())), repr(ready))


def carries(pod: dict, message: str) -> bool:
    """Whether ``pod`` (as the watch last showed it) already has ``PodScheduled=False`` /
    ``Unschedulable`` with ``message``: writing it again would change nothing (kube-scheduler
    does not re-patch an unchanged condition either)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable" and c.get("message") == message
    return False


def status_echo(old: dict, new: dict) -> bool:
    """Whether a pending pod's ``new`` copy differs from ``old`` only in what neither the core nor
    the node checks read: its resourceVersion, managedFields and conditions (PodScheduled not
    True). What dlsched's own Unschedulable report looks like coming back through the watch."""
    if old.get("spec") != new.get("spec"):
        return False
    om, nm = _meta(old), _meta(new)
    if any(om.get(k) != nm.get(k) for k in om.keys() | nm.keys() if k not in ("resourceVersion", "managedFields")):
        return False
    was, now = old.get("status") or {}, new.get("status") or {}
    if any(was.get(k) != now.get(k) for k in was.keys() | now.keys() if k != "conditions"):
        return False
    return not any(isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "True"
                   for c in now.get("conditions") or [])


def _since(pod: dict) -> str | None:
    """The pod's PodScheduled lastTransitionTime when it is already False (kept on a new message)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c.get("lastTransitionTime")
    return None


def condition_patch(pod: dict, uid: str, condition: dict) -> list[dict]:
    """The JSON patch that sets ``condition`` (PodScheduled) on ``pod`` as the watch last showed
    it, tested to be pod ``uid``, not bound, and with the conditions where that copy had them."""
    ops: list[dict] = [{"op": "test", "path": "/metadata/uid", "value": uid},
                       {"op": "test", "path": "/spec/nodeName", "value": None}]
    conditions = (pod.get("status") or {}).get("conditions")
    if not conditions:
        return ops + [{"op": "test", "path": "/status/conditions", "value": None},
                      {"op": "add", "path": "/status/conditions", "value": [condition]}]
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            return ops + [{"op": "test", "path": f"/status/conditions/{i}/type", "value": condition["type"]},
                          {"op": "replace", "path": f"/status/conditions/{i}", "value": condition}]
    return ops + [{"op": "test", "path": "/status/conditions", "value": conditions},
                  {"op": "add", "path": "/status/conditions/-", "value": condition}]


class SchedulerBridge(KubeBridge):
    """:class:`KubeBridge` for ``--mode scheduler`` (see the module doc)."""

    def __init__(self, api, core, scheduler_name: str = "dlsched", default_vc: str = "default") -> None:
        super().__init__(api, core, scheduler_name, default_vc)
        self.cache_lock = threading.Lock()
        self.nodes: dict[str, dict] = {}                  # name -> node object
        self.node_keys: dict[str, tuple] = {}             # name -> what the checks read of it
        self.on_node: dict[str, dict[str, dict]] = {}     # node -> uid -> bound, running pod
        self.bound_at: dict[str, str] = {}                # uid -> its node (bound pods)
        self.assumed: dict[str, tuple[str, dict]] = {}    # uid -> (node, pod): being bound by dlsched
        self.pending: dict[str, dict] = {}                # uid -> a pending pod of dlsched's
        self.reported: dict[str, tuple[str, float]] = {}  # uid -> (message, when) last written
        self.counts: dict[str, int] = {"unschedulable_reported": 0, "report_failures": 0, "reports_too_late": 0,
                                       "refits": 0, "gpu_unbindable_excluded": 0,
                                       "reports_unchanged": 0, "reports_dropped": 0, "status_echoes": 0}
        self.watch_counts: dict[str, int] = {}
        self._reports = ReportQueue()                     # one report per pod, written at a capped rate
        self.binder = None   # the Binder (runtime.start_binder): binds the pods that request no GPU too
        self.events_api = None   # EventsV1Api, made on the first events.k8s.io/v1 event
        self.shape_of: dict[str, str] = {}                # uid -> what the checks read of the pending pod
        self._static: dict[str, tuple[int, frozenset[str], str]] = {}   # shape -> (node_gen, nodes, message)
        self.node_gen = 0                                 # bumped whenever a node's checked parts change
        self.stages = StageTimes()                        # where each bind's time went (GET /api/v1/state)
        self._pass_wanted = threading.Event()             # a watch event came: the pass thread runs a pass
        self.passes_run = 0                               # passes the watch events asked for (coalesced)

    # -- node checks ------------------------------------------------------------------------
    def _pods_by_node(self, names) -> dict[str, list[dict]]:
        """Under cache_lock: the pods that take room on each of ``names`` (bound and being bound)."""
        out = {n: list(self.on_node.get(n, {}).values()) for n in names}
        for node, pod in self.assumed.values():
            if node in out:
                out[node].append(pod)
        return out

    def _shape(self, uid: str, pod: dict) -> str:
        """Under cache_lock: what the checks read of a pod (its namespace and spec): replicas of
        one job share it, and are checked once for all of them."""
        key = self.shape_of.get(uid)
        if key is None:
            key = self.shape_of[uid] = json.dumps([_meta(pod).get("namespace"), pod.get("spec")],
                                                  sort_keys=True, default=str)
        return key

    def _verdict(self, uid: str, pod: dict, full: bool) -> tuple[frozenset[str], str]:
        """Under cache_lock: the nodes the pod passes and, when none, why. Not ``full``: without
        the room other pods take (the nodes' static checks, cached per shape until a node
        changes); that room is checked for the one nominated node before its Binding
        (:meth:`reserve`), and a pod that finds none there is checked ``full``."""
        missing = fit.unsupported(pod)
        if missing:
            return frozenset(), fit.unsupported_text(missing, self.scheduler_name)
        key = self._shape(uid, pod)
        if not full:
            cached = self._static.get(key)
            if cached is not None and cached[0] == self.node_gen:
                return cached[1], cached[2]
        result = fit.feasible(pod, list(self.nodes.values()), self._pods_by_node(self.nodes) if full else {},
                              self.gpu_binding is not None)
        verdict = frozenset(result.nodes), result.message
        self.counts["gpu_unbindable_excluded"] += sum("gpu-binding" in c for c in result.failed_checks.values())
        if not full:
            self._static[key] = (self.node_gen, *verdict)
            if len(self._static) > 10_000:
                self._static.clear()
        return verdict

    def refit(self, uid: str, full: bool = False) -> None:
        """Check the pending pod ``uid`` against every node (``full``: with the room the pods on
        them take; see :meth:`_verdict`); its placement is restricted to those that pass, and a
        pod no node passes is reported Unschedulable."""
        with self.cache_lock:
            pod = self.pending.get(uid)
            if pod is None:
                return
            allowed, message = self._verdict(uid, pod, full)
        self.counts["refits"] += 1
        self._offer(uid, allowed)
        if not allowed:
            self._report(uid, pod, message or f"0/{len(self.nodes)} nodes are available")

    def _recheck_node(self, name: str, freed: bool = False) -> None:
        """Node ``name`` changed (its static checks are read again for every pending pod), or
        ``freed`` room (a pod that lost it for want of room gets it back if it fits now); one
        check per shape of pending pod."""
        changes: list[tuple[str, frozenset[str]]] = []
        with self.cache_lock:
            node = self.nodes.get(name)
            by_node = self._pods_by_node([name]) if node is not None and freed else {}
            verdicts: dict[str, bool] = {}
            made: dict[int, frozenset[str]] = {}   # id(old set) -> new set: pods that shared one share the next
            empty: frozenset[str] = frozenset()
            for uid, pod in self.pending.items():
                have = self.core.offered.get(uid, empty)
                if freed and name in have:
                    continue
                key = self._shape(uid, pod)
                ok = verdicts.get(key)
                if ok is None:
                    ok = verdicts[key] = (node is not None and not fit.unsupported(pod)
                                          and bool(fit.feasible(pod, [node], by_node, self.gpu_binding is not None).nodes))
                if ok != (name in have) and (ok or not freed):
                    new = made.get(id(have))
                    if new is None:
                        new = made[id(have)] = have | {name} if ok else have - {name}
                    changes.append((uid, new))
        self._offer_many(changes)
        for uid, allowed in changes:
            if allowed and uid in self.core.zero_gpu:
                self._place_plain(uid)

    def _place_plain(self, uid: str) -> None:
        """A pending pod of dlsched's that requests no GPU is no kernel job (nothing to decide
        about GPUs): it is bound to the node that passes with the fewest pods (ties by name)."""
        from dlsched.service.pods import PodError, pod_facts

        allowed = self.core.offered.get(uid)
        with self.cache_lock:
            pod = self.pending.get(uid)
            if pod is None or not allowed or self.binder is None or uid in self.assumed:
                return
            node = min(allowed, key=lambda n: (len(self.on_node.get(n, {})), n))
        try:
            facts = pod_facts(pod)
        except PodError:
            return
        if facts.gpus == 0:
            self.binder.submit(facts, node, "")

    def _offer(self, uid: str, allowed: frozenset[str]) -> None:
        self._offer_many([(uid, allowed)])

    def _offer_many(self, changes: list[tuple[str, frozenset[str]]]) -> None:
        """Restrict each pod's placement to its nodes (under the core's lock, once for all)."""
        if not changes:
            return
        core = self.core
        with core.lock:
            marked: set[int] = set()
            for uid, allowed in changes:
                core.offered[uid] = allowed
                job = core.jobs.get(uid)
                if job is not None and job.state is JobState.PENDING and job.vc_state.vid not in marked:
                    marked.add(job.vc_state.vid)
                    core.kernel.mark(job.vc_state.vid)   # other nodes now: worth another pass

    def reserve(self, uid: str, node: str, pod: dict | None = None) -> str:
        """Before a Binding: '' when the pod still fits ``node`` (its room then counted as taken
        until the watch shows it bound), else why not (a pod bound meanwhile took the room)."""
        with self.cache_lock:
            pod = pod or self.pending.get(uid)
            target = self.nodes.get(node)
            if pod is None or target is None:
                return f"node {node} is gone" if target is None else ""
            self.assumed.pop(uid, None)   # a reservation of its own from an earlier try is not room taken
            result = fit.feasible(pod, [target], self._pods_by_node([node]), self.gpu_binding is not None)
            if not result.nodes:
                return fit.reason_of(result, node) or f"the pod no longer fits {node}"
            self.assumed[uid] = (node, pod)
            return ""

    def unreserve(self, uid: str) -> None:
        with self.cache_lock:
            self.assumed.pop(uid, None)

    # -- pods that wait for GPUs (scheduler_mode/waiting.py) ----------------------------------
    def report_waiting(self, uid: str, message: str) -> bool:
        """Queue ``PodScheduled=False`` with ``message`` for a pending pod that waits for GPUs;
        False when it is no longer pending or being bound."""
        with self.cache_lock:
            pod = self.pending.get(uid)
            if pod is None or uid in self.assumed:
                return False
            self.reported[uid] = (message, time.monotonic())   # as given: the reporter compares it
            text = message + self._unbindable_note(pod)
        if carries(pod, text):
            self.counts["reports_unchanged"] += 1
        else:
            self._reports.put(uid, pod, text, waiting=True)
        return True

    def _unbindable_note(self, pod: dict) -> str:
        """Under cache_lock: for a pod the GPU-binding webhook mutated, the nodes its node checks
        leave out because their set-up cannot bind its GPU choice ('' : none, or no GPU binding)."""
        from dlsched.service.gpu_binding.setups import fit_reason
        from dlsched.service.pods import MOVED_CONFIGMAP_ANNOTATION

        if self.gpu_binding is None or MOVED_CONFIGMAP_ANNOTATION not in (_meta(pod).get("annotations") or {}):
            return ""
        out = sorted(name for name, node in self.nodes.items() if fit_reason(node))
        if not out:
            return ""
        shown = ", ".join(out[:5]) + (f" and {len(out) - 5} more" if len(out) > 5 else "")
        return f"; {len(out)} node(s) left out: their GPU set-up cannot bind dlsched's GPU choice ({shown})"

    def last_report(self, uid: str) -> str:
        """The message last queued for the pod's condition ('' : none)."""
        last = self.reported.get(uid)
        return last[0] if last is not None else ""

    # -- Unschedulable reports ---------------------------------------------------------------
    def _report(self, uid: str, pod: dict, message: str) -> None:
        now = time.monotonic()
        last = self.reported.get(uid)
        if last is not None and last[0] == message and now - last[1] < REPORT_AGAIN_S:
            return
        self.reported[uid] = (message, now)
        if carries(pod, message):
            self.counts["reports_unchanged"] += 1   # already on the pod (a restart, a new leader)
            return
        self._reports.put(uid, pod, message)

    def _stale(self, uid: str, message: str, waiting: bool) -> bool:
        """Whether a queued report no longer holds: its pod bound, nominated or gone, or given
        nodes meanwhile (a report of the node checks), or none (one that waits for GPUs). Such
        a report is dropped, and forgotten as reported, so that the same message is queued
        again should it hold again."""
        job = self.core.jobs.get(uid)
        if uid in self.pending and uid not in self.assumed and (job is None or job.state is JobState.PENDING) \
                and bool(self.core.offered.get(uid)) == waiting:
            return False
        self.counts["reports_dropped"] += 1
        with self.cache_lock:
            if self.reported.get(uid, ("",))[0] == message:
                del self.reported[uid]
        return True

    def _reporter(self) -> None:
        """Writes the queued reports (off the watch threads), oldest first at the queue's rate:
        the status condition, then the event. What no longer holds is dropped, before and after
        the wait for the rate; what the pod already carries is not written again."""
        while not self._stop.is_set():
            item = self._reports.get(timeout=1.0)
            if item is None:
                continue
            uid, pod, message, waiting = item
            if self._stale(uid, message, waiting) or not self._reports.take_token(self._stop) \
                    or self._stale(uid, message, waiting):
                continue
            pod = self.pending.get(uid) or pod   # the watch's newest copy
            if carries(pod, message):
                self.counts["reports_unchanged"] += 1
                continue
            meta = _meta(pod)
            ns, name = meta.get("namespace") or "default", meta.get("name")
            condition = fit.unschedulable_condition(message)
            condition["lastTransitionTime"] = _since(pod) or condition["lastTransitionTime"]
            try:
                if not self._write_condition(ns, name, uid, condition):
                    self.counts["reports_too_late"] += 1   # bound (or replaced) meanwhile: nothing written
                    continue
                self._post_event(ns, fit.failed_scheduling_event(pod, message, self.scheduler_name))
                self.counts["unschedulable_reported"] += 1
            except Exception as exc:  # noqa: BLE001 - a report is best effort; the pod keeps waiting
                self.counts["report_failures"] += 1
                log.info("Unschedulable report of %s/%s failed: %s", ns, name, exc)

    def _write_condition(self, ns: str, name: str, uid: str, condition: dict) -> bool:
        """``PodScheduled=False`` on the pending pod ``uid`` by a JSON patch whose tests make the
        API server refuse it (422) once the pod is bound or is another pod: a report in flight
        while a Binding lands never turns a bound pod's ``PodScheduled=True`` back to False. The
        watch's copy of the pod gives the condition's place; when it is stale the pod is read
        once and the patch sent again. False: the pod was bound or replaced meanwhile."""
        from kubernetes.client.exceptions import ApiException

        pod = self.pending.get(uid)
        for attempt in (0, 1):
            if pod is None:
                return False
            try:
                _read(self.api.patch_namespaced_pod_status(name, ns, condition_patch(pod, uid, condition),
                                                           _preload_content=False))
                return True
            except ApiException as exc:
                if exc.status != 422 or attempt:
                    if exc.status == 422:
                        return False
                    raise
            pod = json.loads(_read(self.api.read_namespaced_pod(name, ns, _preload_content=False)) or "{}")
            if (pod.get("spec") or {}).get("nodeName") or _meta(pod).get("uid") != uid:
                return False
        return False

    def _post_event(self, namespace: str, body: dict) -> None:
        """POST an event in the API group its body names: core ``v1`` or ``events.k8s.io/v1``
        (through the same write fence as every other write of a replica)."""
        if body.get("apiVersion") != "events.k8s.io/v1":
            _read(self.api.create_namespaced_event(namespace, body, _preload_content=False))
            return
        if self.events_api is None:
            from kubernetes import client

            from dlsched.service.kube import FencedApi

            events = client.EventsV1Api(self.api.api_client)
            fence = getattr(self.api, "_may_write", None)   # a FencedApi: leader election
            self.events_api = FencedApi(events, fence) if fence is not None else events
        _read(self.events_api.create_namespaced_event(namespace, body, _preload_content=False))

    # -- events -------------------------------------------------------------------------------
    def _node_event(self, kind: str, obj: dict) -> None:
        name = _meta(obj).get("name")
        changed = False
        if isinstance(name, str):
            with self.cache_lock:
                if kind == "DELETED":
                    changed = self.nodes.pop(name, None) is not None
                    self.node_keys.pop(name, None)
                else:
                    key = _node_key(obj)
                    changed = self.node_keys.get(name) != key
                    self.nodes[name], self.node_keys[name] = obj, key
                self.node_gen += changed
        if changed:
            self.stages.node_changed()
        super()._node_event(kind, obj)
        if changed:
            self._recheck_node(name)

    def _pod_event(self, kind: str, obj: dict) -> bool:
        """The watch's news of a pod; False when it is no news to the core (no pass wanted)."""
        meta, spec = _meta(obj), obj.get("spec") or {}
        uid, node = meta.get("uid"), spec.get("nodeName") or ""
        if not isinstance(uid, str):
            super()._pod_event(kind, obj)
            return True
        gone = kind == "DELETED" or _terminal(obj)
        mine = spec.get("schedulerName") == self.scheduler_name
        freed, new = "", False
        if kind == "MODIFIED" and mine and not node and not gone:
            with self.cache_lock:
                old = self.pending.get(uid)
                if old is not None and status_echo(old, obj):   # a report of ours (or a condition) came back
                    self.pending[uid] = obj
                    self.counts["status_echoes"] += 1
                    return False
        with self.cache_lock:
            old = self.bound_at.pop(uid, None)
            if old is not None:
                self.on_node.get(old, {}).pop(uid, None)
            if node and not gone:
                self.bound_at[uid] = node
                self.on_node.setdefault(node, {})[uid] = obj
                self.assumed.pop(uid, None)
            elif old is not None:
                freed = old
            if gone:
                self.assumed.pop(uid, None)
            if mine and not node and not gone:
                new = uid not in self.pending
                self.pending[uid] = obj
            else:
                self.pending.pop(uid, None)
                self.reported.pop(uid, None)
                self.shape_of.pop(uid, None)
        if new:
            self.stages.seen(uid)
            self.refit(uid)   # before the core sees the pod: its first pass is already restricted
        super()._pod_event(kind, obj)
        if new and uid in self.core.zero_gpu:
            self._place_plain(uid)
        if freed:
            self._recheck_node(freed, freed=True)
        return True

    # -- watching -------------------------------------------------------------------------------
    def start(self, node_rv: str, pod_rv: str) -> None:
        for kind, rv in (("nodes", node_rv), ("pods", pod_rv)):
            t = threading.Thread(target=self._watch, args=(kind, rv), name=f"watch-{kind}", daemon=True)
            t.start()
            self._threads.append(t)
        threading.Thread(target=self._reporter, name="unschedulable", daemon=True).start()
        threading.Thread(target=self._passer, name="pass", daemon=True).start()

    def _passer(self) -> None:
        """Runs the passes the watch events ask for, one at a time: the events that arrive while a
        pass runs are decided together by the next one (a burst of 500 pod creations is a few
        passes, not 500), and the watch threads never wait for the core's lock on a pass."""
        while not self._stop.is_set():
            if not self._pass_wanted.wait(1.0):
                continue
            self._pass_wanted.clear()
            try:
                self.core.run_pass()
                self.passes_run += 1
            except Exception:  # noqa: BLE001 - the pass thread must outlive a bad pass
                log.exception("pass failed")

    def _watch(self, kind: str, rv: str) -> None:
        handler = self._node_event if kind == "nodes" else self._pod_event

        wanted = self._pass_wanted

        def handle(event_type: str, obj: dict) -> None:
            news = handler(event_type, obj)
            if news is not False and not wanted.is_set():   # set already: the pass to come decides this too
                wanted.set()          # decided by the pass thread, with whatever else came meanwhile

        def relist() -> str:
            self.resyncs += 1
            return self._resync(kind)

        watch_kind(self._lister(kind), rv, handle, relist, self._stop, self.watch_counts)

    def _resync(self, kind: str) -> str:
        """List ``kind`` again: the caches are rebuilt from the listing (the core diffs it)."""
        with self.cache_lock:
            if kind == "nodes":
                self.nodes.clear()
                self.node_keys.clear()
                self.node_gen += 1
            else:
                self.on_node.clear()
                self.bound_at.clear()
                self.pending.clear()
        return super()._resync(kind)

    def describe(self) -> dict:
        """The mode's figures for the state view."""
        with self.cache_lock:
            return {"mode": "scheduler", "scheduler_name": self.scheduler_name, "node_checks": fit.nodefit.__name__,
                    "nodes": len(self.nodes),
                    "pending_pods": len(self.pending), "being_bound": len(self.assumed),
                    "unschedulable": sum(1 for u in self.pending if not self.core.offered.get(u)),
                    **self.counts, "watch": dict(self.watch_counts), "resyncs": self.resyncs,
                    "passes": self.passes_run,
                    "reports_queued": len(self._reports), "reports_replaced": self._reports.replaced,
                    "stages": self.stages.summary()}

"""Queues from Kubernetes: the ConfigMap convention (docs/queues.md#live-queues-from-a-configmap).

ConfigMap ``dlsched-queues`` (``--queues-configmap NAMESPACE/NAME``) holds, under the key
``queues.toml``, the ``[[queues]]`` tables of the cluster file (same keys, same checks except
against nodes, plus ``namespaces``). :class:`LiveQueues` reads it at start and every
``interval`` seconds after (a new ``resourceVersion`` is parsed; the same one is not). Invalid
content never replaces the last good configuration: it is counted, kept as ``error`` and
reported once per version as a Warning Event on the ConfigMap. A ConfigMap that is deleted (or
loses its key) clears the configuration.

What a configuration does live: ``namespaces`` map pods of those namespaces to the queue's VC
(a pod's ``dlsched.io/vc`` label still wins; pods already queued keep their VC). When some queue
may borrow, the core installs the kernel's queue manager (``SchedulerCore.set_queues``, the
simulator's ``kernel/quotas.py``): a VC's blocked head may be nominated on another VC's idle
node within the borrow / lend limits, and a lender whose head is blocked by borrowed GPUs gets
them back through the ordinary eviction path (intent in the store, the Eviction API with the
pod's grace period, a ``Preempted`` event). A new configuration rebuilds the manager with its
loans re-derived from what runs where. As in the simulator, borrowing needs an ordering policy
that does not preempt on its own and exclusive GPUs; otherwise the configuration still maps
namespaces, borrowing stays off, and the report and a Warning event say why.
``GET /api/v1/queues`` reports each VC's guarantee (its nodes' GPUs, per type) and use beside
the configured limits, the GPUs it borrows and lends now, its reclaims, and every loan.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from dlsched.core.job import JobState
from dlsched.kernel.quotas import QueueSpec
from dlsched.traces.cluster_queues import parse_queues_text
from dlsched.traces.model import TraceError

log = logging.getLogger("dlsched.service")
KEY = "queues.toml"


def parse_ref(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); ValueError naming the text."""
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ValueError(f"--queues-configmap {text!r}: want NAMESPACE/NAME (e.g. dlsched/dlsched-queues)")
    return ns, name


class LiveQueues:
    """The live queue configuration of a core, from a ConfigMap."""

    def __init__(self, core, namespace: str = "dlsched", name: str = "dlsched-queues",
                 read: Callable[[], dict | None] | None = None,
                 warn: Callable[[str, str], None] | None = None, interval: float = 10.0) -> None:
        self.core = core
        self.namespace, self.name = namespace, name
        self.read = read           # () -> the ConfigMap as JSON, None when it does not exist
        self.warn = warn           # (message, reason) -> a Warning Event on the ConfigMap
        self.interval = interval
        self.specs: tuple[QueueSpec, ...] = ()
        self.version: str | None = None     # resourceVersion of the last configuration applied
        self.seen: str | None = None        # resourceVersion of the last ConfigMap read
        self.loaded_at: float | None = None
        self.error = ""                     # why the last version read was refused ('' when it was not)
        self.counts: Counter[str] = Counter()
        self.base_namespaces = dict(core.vcs.namespaces)   # --vc-map: a configuration adds to it

    def apply_text(self, text: str, version: str) -> bool:
        """Parse and apply ``text``; on error keep the last good configuration. True when applied."""
        self.seen = version
        try:
            specs = parse_queues_text(text, f"ConfigMap {self.namespace}/{self.name} key {KEY}")
            owners: dict[str, str] = {}
            for q in specs:
                for ns in q.namespaces:
                    if owners.setdefault(ns, q.name) != q.name:
                        raise TraceError(f"ConfigMap {self.namespace}/{self.name} key {KEY}",
                                         f"namespace {ns} is in queues {owners[ns]} and {q.name}")
        except TraceError as exc:
            log.warning("queues not updated: %s", exc)
            self._warn(f"dlsched kept its last good queue configuration: {exc}", "InvalidQueues")
            # made visible last, so that a reader who sees the error also sees whether its event was written
            self.counts["invalid"] += 1
            self.error = str(exc)
            return False
        self._install(specs, version)
        return True

    def _install(self, specs: tuple[QueueSpec, ...], version: str | None) -> None:
        mapping = dict(self.base_namespaces)
        for q in specs:
            mapping.update({ns: q.name for ns in q.namespaces})
        with self.core.lock:
            self.core.vcs.namespaces = mapping
            refused = self.core.set_queues(specs)
        self.specs, self.version, self.error = specs, version, ""
        self.loaded_at = self.core.now()
        self.counts["loaded"] += 1
        if refused:
            log.warning("queues: %s", refused)
            self._warn(f"dlsched applied the queue configuration but not its borrowing: {refused}", "BorrowingOff")

    def _warn(self, message: str, reason: str) -> None:
        """A Warning event on the ConfigMap (best effort, counted)."""
        if self.warn is None:
            return
        try:
            self.warn(message[:1000], reason)
            self.counts["events"] += 1
        except Exception as err:  # noqa: BLE001 - an event is best effort
            self.counts["events_failed"] += 1
            log.info("queue event not written: %s", err)

    def poll(self) -> None:
        """Read the ConfigMap once: apply a new version, clear the configuration when it is gone."""
        obj = self.read() if self.read is not None else None
        if obj is None or KEY not in (obj.get("data") or {}):
            if self.version is not None or self.specs:
                self._install((), None)
                self.counts["removed"] += 1
            self.seen, self.error = None, ""
            return
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if version and version == self.seen:
            return
        self.apply_text(str(obj["data"][KEY]), version)

    def run(self, done: threading.Event) -> None:
        """Poll until ``done``; a failed read is counted and retried at the next interval."""
        while True:
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the API server may be away for a while
                self.counts["read_failed"] += 1
                log.warning("queue ConfigMap %s/%s not read: %s", self.namespace, self.name, exc)
            if done.wait(self.interval):
                return

    def report(self) -> dict:
        """``GET /api/v1/queues``: the configuration, its source and state, and per VC its guarantee
        (own nodes' GPUs, per type) and use (GPUs its pods hold, on its own nodes or borrowed),
        pending and running pods, the GPUs it borrows and lends now and its reclaims; whether
        borrowing is enforced (or why not), every loan and the reclaims in flight."""
        core = self.core
        by_name = {q.name: q for q in self.specs}
        with core.lock:
            st = core.state
            quotas = core.quotas
            known = len(quotas.specs) if quotas is not None else 0
            rows = []
            for vc in st.vcs:
                by_type: dict[str, int] = {}
                for node in vc.nodes:
                    if not st.node_removed[node]:
                        t = st.node_specs[node].gpu_type.name
                        by_type[t] = by_type.get(t, 0) + st.node_gpus[node]
                used = sum(j.gpus for j in vc.running)
                q = by_name.get(vc.name)
                row = {"name": vc.name, "configured": q is not None, "guarantee_gpus": sum(by_type.values()),
                       "guarantee_by_type": by_type, "used_gpus": used,
                       "running": sum(1 for j in vc.running if j.state is JobState.RUNNING),
                       "assumed": sum(1 for j in vc.running if j.state is JobState.ASSUMED),
                       "pending": vc.pending,
                       "borrow_limit": q.borrow_limit if q else None, "lend_limit": q.lend_limit if q else None,
                       "parent": q.parent if q else None, "namespaces": list(q.namespaces) if q else []}
                if vc.vid < known:
                    row.update(borrowed_gpus=quotas.out_total[vc.name], lent_gpus=quotas.in_total[vc.name],
                               borrowed_starts=quotas.borrow_starts[vc.vid], reclaims=quotas.reclaims[vc.vid],
                               reclaimed=quotas.reclaimed[vc.vid])
                rows.append(row)
            loans, reclaiming = [], []
            if quotas is not None:
                for job, host in quotas.loans():
                    pod = core.pods.get(job.job_id)
                    loans.append({"pod": pod.key if pod else job.job_id, "queue": job.vc_state.name,
                                  "lender": host.name, "node": st.node_ids[job.placement[0][0]], "gpus": job.gpus,
                                  "state": job.state.name.lower(), "evicting": job in quotas.evicting,
                                  "outside_tree": job in quotas.stranded})
                for job, lender in quotas.evicting.items():
                    pod = core.pods.get(job.job_id)
                    reclaiming.append({"pod": pod.key if pod else job.job_id, "queue": job.vc_state.name,
                                       "for_queue": lender.name, "gpus": job.gpus})
            borrowing = {"enforced": quotas is not None, "refused": core.borrowing_refused or None,
                         "loans": loans, "reclaims_in_flight": reclaiming}
            mapping = dict(core.vcs.namespaces)
        inner = {q.parent for q in self.specs if q.parent is not None}   # cohorts have no nodes of their own
        waiting = [q.name for q in self.specs if q.name not in inner and q.name not in {r["name"] for r in rows}]
        return {"source": {"configmap": f"{self.namespace}/{self.name}", "key": KEY,
                           "resource_version": self.version, "loaded_at": self.loaded_at},
                "error": self.error or None, "counts": dict(self.counts), "queues": rows,
                "configured_without_nodes": waiting, "namespace_to_vc": mapping, "borrowing": borrowing}


def kube_reader(api, namespace: str, name: str) -> Callable[[], dict | None]:
    """``read()`` through the API server: the ConfigMap as JSON, None on 404."""
    from kubernetes.client.exceptions import ApiException

    from dlsched.service.kube import _read

    def read() -> dict | None:
        try:
            return json.loads(_read(api.read_namespaced_config_map(name, namespace, _preload_content=False)))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
    return read


def kube_warner(api, namespace: str, name: str) -> Callable[[str], None]:
    """``warn(message, reason)``: a Warning Event on the ConfigMap (reason InvalidQueues: the
    content was refused; BorrowingOff: applied, but its borrowing cannot be enforced)."""
    def warn(message: str, reason: str = "InvalidQueues") -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": namespace},
                "reason": reason, "message": message, "type": "Warning",
                "source": {"component": "dlsched"}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        api.create_namespaced_event(namespace, body)
    return warn

"""Queues from Kubernetes: the ConfigMap convention (docs/queues.md#live-queues-from-a-configmap).

ConfigMap ``dlsched-queues`` (``--queues-configmap NAMESPACE/NAME``) holds, under the key
``queues.toml``, the ``[[queues]]`` tables of the cluster file (same keys, same checks except
against nodes, plus ``namespaces``). :class:`LiveQueues` reads it at start and every
``interval`` seconds after (a new ``resourceVersion`` is parsed; the same one is not). Invalid
content never replaces the last good configuration: it is counted, kept as ``error`` and
reported once per version as a Warning Event on the ConfigMap. A ConfigMap that is deleted (or
loses its key) clears the configuration.

What a configuration does live: ``namespaces`` map pods of those namespaces to the queue's VC
(a pod's ``dlsched.io/vc`` label still wins; pods already queued keep their VC).
``GET /api/v1/queues`` reports each VC's guarantee (its nodes' GPUs, per type) and use beside
the configured limits. Borrowing and reclaim are not enforced live: they need preemption of
running pods, which the service does not do yet.
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
NOT_ENFORCED = ("borrow_limit, lend_limit and parent are reported, not enforced: borrowing and reclaim need the "
                "live service to preempt pods, which it does not do yet; a VC's pods run on its own nodes only")


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
                 warn: Callable[[str], None] | None = None, interval: float = 10.0) -> None:
        self.core = core
        self.namespace, self.name = namespace, name
        self.read = read           # () -> the ConfigMap as JSON, None when it does not exist
        self.warn = warn           # (message) -> a Warning Event on the ConfigMap
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
            if self.warn is not None:
                try:
                    self.warn(f"dlsched kept its last good queue configuration: {exc}"[:1000])
                    self.counts["events"] += 1
                except Exception as err:  # noqa: BLE001 - an event is best effort
                    self.counts["events_failed"] += 1
                    log.info("queue event not written: %s", err)
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
        self.specs, self.version, self.error = specs, version, ""
        self.loaded_at = self.core.now()
        self.counts["loaded"] += 1

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
        (own nodes' GPUs, per type) and use (GPUs its pods hold), pending and running pods."""
        core = self.core
        by_name = {q.name: q for q in self.specs}
        with core.lock:
            st = core.state
            rows = []
            for vc in st.vcs:
                by_type: dict[str, int] = {}
                for node in vc.nodes:
                    if not st.node_removed[node]:
                        t = st.node_specs[node].gpu_type.name
                        by_type[t] = by_type.get(t, 0) + st.node_gpus[node]
                used = sum(j.gpus for j in vc.running)
                q = by_name.get(vc.name)
                rows.append({"name": vc.name, "configured": q is not None, "guarantee_gpus": sum(by_type.values()),
                             "guarantee_by_type": by_type, "used_gpus": used,
                             "running": sum(1 for j in vc.running if j.state is JobState.RUNNING),
                             "assumed": sum(1 for j in vc.running if j.state is JobState.ASSUMED),
                             "pending": vc.pending,
                             "borrow_limit": q.borrow_limit if q else None, "lend_limit": q.lend_limit if q else None,
                             "parent": q.parent if q else None, "namespaces": list(q.namespaces) if q else []})
            mapping = dict(core.vcs.namespaces)
        waiting = [q.name for q in self.specs if q.name not in {r["name"] for r in rows}]
        return {"source": {"configmap": f"{self.namespace}/{self.name}", "key": KEY,
                           "resource_version": self.version, "loaded_at": self.loaded_at},
                "error": self.error or None, "counts": dict(self.counts), "queues": rows,
                "configured_without_nodes": waiting, "namespace_to_vc": mapping, "not_enforced": NOT_ENFORCED}


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
    """``warn(message)``: a Warning Event (reason InvalidQueues) on the ConfigMap."""
    def warn(message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": namespace},
                "reason": "InvalidQueues", "message": message, "type": "Warning",
                "source": {"component": "dlsched"}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        api.create_namespaced_event(namespace, body)
    return warn

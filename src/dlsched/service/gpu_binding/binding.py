"""``--gpu-binding envvar-configmap`` at the bind seam (``KubeBridge.bind`` calls
:meth:`GpuBinding.before_binding` after its uid check and before the Binding, and
:meth:`GpuBinding.after_binding` with the Binding's outcome), plus the keeper that deletes
reservation pods whose GPU no pod of dlsched's holds any more.

Order for a pod the webhook mutated, on a node where the choice binds: (1) its GPUs are entered
as held, (2) a reservation pod per GPU not held yet is created, (3) its ConfigMap is written,
(4) the Binding. A failure in (2) or (3) fails the bind (the GPUs return to the kernel; the
scheduler mode tries again after its back-off). Where the choice cannot bind (a node set-up of
``setups.unbindable``), the bind is refused; a pod the webhook did not mutate is bound as
before. Both are reported: ``GET /api/v1/state`` (``mode.gpu_binding``), the dashboard and a
``GpuChoiceNotBound`` event on the pod, never silently.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

from dlsched.service.gpu_binding import identity, setups
from dlsched.service.gpu_binding.configmap import configmap_body
from dlsched.service.gpu_binding.mutation import CONFIGMAP_ANNOTATION
from dlsched.service.gpu_binding.reservations import (
    GPU_ANNOTATION,
    NODE_ANNOTATION,
    RESERVATION_LABEL,
    reservation_name,
    reservation_pod,
)
from dlsched.service.gpu_binding.setups import SETUP_LABEL

log = logging.getLogger("dlsched.service")
NOT_BOUND_EVENT = "GpuChoiceNotBound"
CONFIGMAP_SELECTOR = f"app.kubernetes.io/managed-by=dlsched,{SETUP_LABEL}=envvar"   # configmap.py's labels
NOT_BOUND_KEPT = 100   # the latest pods whose choice did not bind, shown in the state
KEEP_INTERVAL_S = 1.0  # how often reservations of freed GPUs are looked for
READBACK_WAIT_S = 30.0  # on a shared node with a reporting agent: how long a bind waits for the devices


class GpuBinding:
    """See the module doc."""

    def __init__(self, bridge, core, nodes_of, namespace: str = "dlsched", scheduler_name: str = "dlsched",
                 image: str = "registry.k8s.io/pause:3.9") -> None:
        self.bridge = bridge         # its ``api`` (fenced under leader election) makes every write
        self.core = core
        self.nodes_of = nodes_of    # node name -> node object (or None): the set-up checks read it
        self.namespace = namespace
        self.scheduler_name = scheduler_name
        self.image = image
        self.webhook = None          # the WebhookServer, when this process serves it
        self.registration = ""       # 'created' / 'replaced' / '' (registered by the operator)
        self.lock = threading.Lock()  # held around reservation writes: a delete never races a create
        self.held: dict[str, tuple[str, tuple[int, ...]]] = {}   # pod uid -> (node, GPUs) it holds
        self.entered: dict[str, int] = {}   # pod uid -> when (self.seq) it was entered as held
        self.seq = 0
        self.reserved: set[tuple[str, int]] = set()              # reservation pods that exist
        self.configmaps: dict[str, tuple[str, str]] = {}         # pod uid -> (namespace, name) of its ConfigMap
        self.not_bound: OrderedDict[str, dict] = OrderedDict()   # uid -> {pod, node, gpus, reason}
        self.unverified: dict[str, int] = {}   # node -> device-plugin pods of other schedulers at the last bind
        self.devices: dict[str, dict[str, tuple[str, ...]]] = {}   # node -> reservation pod -> device IDs (agent)
        self.awaiting: dict[str, tuple[str, tuple[int, ...], float]] = {}   # uid -> (node, GPUs, since): readback
        self.counts = {"configmaps_written": 0, "reservations_created": 0, "reservations_deleted": 0,
                       "binds_refused": 0, "unmutated_binds": 0, "write_failures": 0,
                       "configmaps_deleted": 0, "orphan_configmaps_found": 0,
                       "readbacks": 0, "identity_verified_binds": 0, "readback_waits": 0, "readback_timeouts": 0}

    @property
    def api(self):
        return self.bridge.api

    # -- start-up --------------------------------------------------------------------------
    def recover(self) -> None:
        """After the pods are listed: the reservation pods that exist, and the GPUs the bound,
        mutated pods hold (from their ``dlsched.io/gpus``), so that none is deleted wrongly."""
        from dlsched.service.kube import _json

        listing = _json(self.api.list_namespaced_pod(self.namespace, label_selector=f"{RESERVATION_LABEL}=gpu",
                                                     _preload_content=False))
        for obj in listing.get("items") or []:
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            try:
                self.reserved.add((ann[NODE_ANNOTATION], int(ann[GPU_ANNOTATION])))
            except (KeyError, ValueError):
                continue
        with self.core.lock:
            for uid, pod in self.core.pods.items():
                gpus = pod.annotations.get("dlsched.io/gpus", "")
                if pod.node_name and CONFIGMAP_ANNOTATION in pod.annotations and gpus:
                    try:
                        self.held[uid] = (pod.node_name, tuple(int(g) for g in gpus.split(",")))
                    except ValueError:
                        continue
        self._recover_configmaps()

    def _recover_configmaps(self) -> None:
        """The ConfigMaps dlsched wrote (its labels, every namespace): each is entered under its
        owner pod's uid, so that ``keep`` deletes those whose pod no longer holds GPUs (the pod
        went while no leader ran; a cluster without a garbage collector keeps them for ever)."""
        from dlsched.service.kube import _json

        listing = _json(self.api.list_config_map_for_all_namespaces(label_selector=CONFIGMAP_SELECTOR,
                                                                    _preload_content=False))
        with self.lock:
            for obj in listing.get("items") or []:
                meta = obj.get("metadata") or {}
                owners = [o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]
                key = owners[0] if owners and owners[0] else f"orphan:{meta.get('namespace')}/{meta.get('name')}"
                if key not in self.held:
                    self.counts["orphan_configmaps_found"] += 1
                self.configmaps[key] = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def start(self, done: threading.Event) -> None:
        threading.Thread(target=self._keep, args=(done,), name="gpu-reservations", daemon=True).start()

    # -- the bind seam -----------------------------------------------------------------------
    def before_binding(self, namespace: str, name: str, uid: str, node: str, gpus: list[int]) -> str:
        """Steps (1)-(3) of the module doc; '' or why the pod must not be bound."""
        pod = self.core.pods.get(uid)
        annotations = pod.annotations if pod is not None else {}
        configmap = annotations.get(CONFIGMAP_ANNOTATION, "")
        if not configmap:
            self.counts["unmutated_binds"] += 1
            self._not_bound(namespace, name, uid, node, gpus, "the admission webhook did not mutate the pod (it "
                            "still requests nvidia.com/gpu): the device plugin picks its GPUs, not dlsched")
            return ""
        node_obj = self.nodes_of(node)
        why = setups.unbindable(node_obj)
        if why:
            self.counts["binds_refused"] += 1
            self._not_bound(namespace, name, uid, node, gpus, why + "; not bound there")
            return f"GPU choice cannot bind on node {node}: {why}"
        others = self._device_plugin_pods(node)
        with self.lock:
            self.held[uid] = (node, tuple(gpus))
            self.seq += 1
            self.entered[uid] = self.seq
            try:
                for g in gpus:
                    if (node, g) not in self.reserved:
                        self._create_reservation(node, g)
                visible, unknown = identity.visible_devices(node, gpus, self.devices.get(node, {}))
                if others and unknown and node in self.devices:   # an agent reads back there: wait for it
                    since = self.awaiting.get(uid, (node, (), time.monotonic()))[2]
                    if time.monotonic() - since < READBACK_WAIT_S:
                        self.awaiting[uid] = (node, tuple(gpus), since)   # its reservations are kept meanwhile
                        self.held.pop(uid, None)
                        self.entered.pop(uid, None)
                        self.counts["readback_waits"] += 1
                        return (f"waiting for the node agent's read-back of the devices the reservations of GPU(s) "
                                f"{','.join(map(str, unknown))} on {node} got (other schedulers' pods hold GPUs there)")
                    self.counts["readback_timeouts"] += 1
                self.awaiting.pop(uid, None)
                if not setups.plugin_binds(node_obj):
                    self._write_configmap(namespace, configmap, name, uid, node, gpus, visible)
            except Exception as exc:  # noqa: BLE001 - any API failure fails the bind; the GPUs return
                self.held.pop(uid, None)
                self.entered.pop(uid, None)
                self.counts["write_failures"] += 1
                return f"GPU binding failed before the Binding: {exc}"
        if others and unknown:   # the count is held; which device each reservation got is the plugin's
            self.unverified[node] = others
            log.warning("node %s: %d pod(s) of other schedulers hold GPUs through the device plugin: the "
                        "reservations hold the count, not necessarily the devices dlsched chose", node, others)
        else:
            self.unverified.pop(node, None)
            self.counts["identity_verified_binds"] += bool(others)
        return ""

    def record_devices(self, node: str, devices: dict[str, list[str]]) -> int:
        """The node agent's read-back (PodResources API): reservation pod name -> the device IDs
        the kubelet gave it, for ``node``; replaces what was known. Returns how many were kept."""
        from dlsched.service.gpu_binding.reservations import RESERVATION_PREFIX

        kept = {name: tuple(str(i) for i in ids) for name, ids in devices.items()
                if name.startswith(RESERVATION_PREFIX) and ids}
        with self.lock:
            self.devices[node] = kept
            self.counts["readbacks"] += 1
        return len(kept)

    def _device_plugin_pods(self, node: str) -> int:
        """Pods on ``node`` that got GPUs from the device plugin and are not dlsched's reservations
        (the scheduler mode's bridge keeps the pods bound on each node; 0 when unknown)."""
        from dlsched.service.gpu_binding.mutation import GPU_RESOURCE
        from dlsched.service.gpu_binding.reservations import is_reservation

        n = 0
        for pod in list(getattr(self.bridge, "on_node", {}).get(node, {}).values()):
            meta = pod.get("metadata") or {}
            if is_reservation(str(meta.get("name") or ""), meta.get("labels") or {}):
                continue
            for c in (pod.get("spec") or {}).get("containers") or []:
                res = c.get("resources") or {}
                if str((res.get("limits") or {}).get(GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE, "0"))) \
                        not in ("0", ""):
                    n += 1
                    break
        return n

    def after_binding(self, uid: str, error: str) -> None:
        """The Binding's outcome: a failed one holds nothing (its reservations go at the next keep)."""
        if error:
            with self.lock:
                self.held.pop(uid, None)
                self.entered.pop(uid, None)

    def _create_reservation(self, node: str, gpu: int) -> None:
        from kubernetes.client.exceptions import ApiException

        body = reservation_pod(self.namespace, node, gpu, self.scheduler_name, self.image)
        try:
            self.api.create_namespaced_pod(self.namespace, body, _preload_content=False).read()
            self.counts["reservations_created"] += 1
        except ApiException as exc:
            if exc.status != 409:   # 409: it exists already (a restart, another replica's)
                raise RuntimeError(f"reservation pod {self.namespace}/{body['metadata']['name']}: "
                                   f"({exc.status}) {exc.reason}") from None
        self.reserved.add((node, gpu))

    def _write_configmap(self, namespace: str, name: str, pod: str, uid: str, node: str, gpus: list[int],
                         visible: str | None = None) -> None:
        from kubernetes.client.exceptions import ApiException

        body = configmap_body(namespace, name, pod, uid, node, gpus, visible)
        try:
            self.api.create_namespaced_config_map(namespace, body, _preload_content=False).read()
        except ApiException as exc:
            if exc.status != 409:
                raise RuntimeError(f"ConfigMap {namespace}/{name}: ({exc.status}) {exc.reason}") from None
            self.api.replace_namespaced_config_map(name, namespace, body, _preload_content=False).read()
        self.configmaps[uid] = (namespace, name)
        self.counts["configmaps_written"] += 1

    # -- freed GPUs ----------------------------------------------------------------------------
    def _keep(self, done: threading.Event) -> None:
        while not done.wait(KEEP_INTERVAL_S):
            try:
                self.keep()
            except Exception as exc:  # noqa: BLE001 - the API server may be away; tried again
                log.warning("reservation pods not reconciled: %s", exc)

    def keep(self) -> int:
        """Forget the pods that ended, delete their ConfigMaps (and those of failed Bindings) and
        the reservation pods of GPUs no pod holds; returns how many reservations were deleted.

        dlsched deletes the ConfigMaps itself: their ownerReferences let a cluster's garbage
        collector (kube-controller-manager) do it too, but a control plane without one would keep
        a ConfigMap per pod ever bound."""
        from kubernetes.client.exceptions import ApiException

        with self.lock:
            mark = self.seq   # pods entered after the snapshot below are kept: their bind is under way
        with self.core.lock:   # never taken inside self.lock (a gang's bind may hold the core's lock)
            live = {uid for uid, job in self.core.jobs.items() if job.placement is not None}
        deleted = 0
        with self.lock:
            for uid in [u for u in self.held if u not in live and self.entered.get(u, 0) <= mark]:
                del self.held[uid]
                self.entered.pop(uid, None)
            for uid in [u for u in self.configmaps if u not in self.held]:
                namespace, name = self.configmaps[uid]
                try:
                    self.api.delete_namespaced_config_map(name, namespace, _preload_content=False).read()
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                del self.configmaps[uid]
                self.counts["configmaps_deleted"] += 1
            now = time.monotonic()
            for uid in [u for u, (_, _, since) in self.awaiting.items() if now - since >= 2 * READBACK_WAIT_S]:
                del self.awaiting[uid]   # its pod was decided elsewhere, or went
            wanted = {(node, g) for node, gpus in self.held.values() for g in gpus}
            wanted |= {(node, g) for node, gpus, _ in self.awaiting.values() for g in gpus}
            for node, g in sorted(self.reserved - wanted):
                name = reservation_name(node, g)
                try:
                    self.api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0,
                                                   _preload_content=False).read()
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                self.reserved.discard((node, g))
                self.devices.get(node, {}).pop(name, None)   # a new reservation of that GPU may get another device
                self.counts["reservations_deleted"] += 1
                deleted += 1
        return deleted

    # -- reports --------------------------------------------------------------------------------
    def _not_bound(self, namespace: str, name: str, uid: str, node: str, gpus: list[int], reason: str) -> None:
        first = uid not in self.not_bound
        self.not_bound[uid] = {"pod": f"{namespace}/{name}", "node": node, "gpus": ",".join(map(str, gpus)),
                               "reason": reason}
        self.not_bound.move_to_end(uid)
        while len(self.not_bound) > NOT_BOUND_KEPT:
            self.not_bound.popitem(last=False)
        log.warning("GPU choice for %s/%s on %s not bound: %s", namespace, name, node, reason)
        if first:
            self._event(namespace, name, uid, reason)

    def _event(self, namespace: str, name: str, uid: str, reason: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": name,
                                   "uid": uid},
                "reason": NOT_BOUND_EVENT, "message": f"dlsched's GPU choice does not reach the container: {reason}"[:1024],
                "type": "Warning", "source": {"component": self.scheduler_name},
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            self.api.create_namespaced_event(namespace, body, _preload_content=False).read()
        except Exception as exc:  # noqa: BLE001 - an event is best effort; the state still says it
            log.info("GpuChoiceNotBound event for %s/%s not written: %s", namespace, name, exc)

    def unbindable_nodes(self) -> dict[str, str]:
        """Node -> why the choice cannot bind there, over the nodes the bridge holds."""
        nodes = dict(getattr(self.bridge, "nodes", None) or {})
        return {name: why for name, node in sorted(nodes.items()) if (why := setups.fit_reason(node))}

    def state(self) -> dict:
        """For ``GET /api/v1/state`` and the dashboard."""
        out: dict = {"mode": "envvar-configmap", "reservation_namespace": self.namespace,
                     "held_pods": len(self.held), "reservations": len(self.reserved),
                     "configmaps": len(self.configmaps), **self.counts,
                     "not_bound": list(self.not_bound.values()),
                     # nodes where other schedulers' pods also hold GPUs: the count is held, the devices unverified
                     "identity_unverified_nodes": dict(self.unverified),
                     # nodes the node checks keep mutated pods off (their set-up cannot bind the choice)
                     "unbindable_nodes": self.unbindable_nodes()}
        if self.webhook is not None:
            out["webhook"] = {"port": self.webhook.port, "registration": self.registration or "by the operator",
                              **self.webhook.counts, "left_alone_reasons": list(self.webhook.left)}
        return out

"""The API server side: list + watch nodes and pods, annotate and bind pods (official client).

The API server is the truth about what runs where. At start-up the service lists nodes, then
pods (bound ones first, so their GPUs are taken before any pass), and reconciles its durable
store with them; then two watch threads feed every change into the core. Objects are read as
raw JSON (``_preload_content=False`` / ``deserialize=False``) so that the watch, the start-up
list and the extender's request bodies all go through the same parser.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from dlsched.kernel.stimuli import TIME_LIMIT_REASON
from dlsched.service.gpu_binding.reservations import is_reservation
from dlsched.service.pods import GPUS_ANNOTATION, NOMINATED_ANNOTATION, PodError, node_facts, pod_facts

log = logging.getLogger("dlsched.service")


def make_api(kubeconfig: str | None = None, api_server: str | None = None, token: str | None = None,
             insecure: bool = False, ca_file: str | None = None):
    """A ``CoreV1Api``: from a kubeconfig file, from a URL + bearer token, or in-cluster."""
    from kubernetes import client, config

    if api_server:
        cfg = client.Configuration()
        cfg.connection_pool_maxsize = CONNECTION_POOL
        cfg.host = api_server
        if token:
            cfg.api_key = {"authorization": token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        cfg.verify_ssl = not insecure
        if insecure:
            insecure_once("--insecure-skip-tls-verify")
        if ca_file:
            cfg.ssl_ca_cert = ca_file
        return _named(client.CoreV1Api(client.ApiClient(cfg)))
    cfg = client.Configuration()
    cfg.connection_pool_maxsize = CONNECTION_POOL
    if kubeconfig:
        api_client = config.new_client_from_config(config_file=kubeconfig, client_configuration=cfg)
        if not api_client.configuration.verify_ssl:
            insecure_once(f"insecure-skip-tls-verify in {kubeconfig}")
        return _named(client.CoreV1Api(api_client))
    config.load_incluster_config(client_configuration=cfg)
    return _named(client.CoreV1Api(client.ApiClient(cfg)))


# connections kept to the API server: kube-scheduler calls the extender's bind for many pods at
# once, and a call beyond the pool opens (and drops) a new TLS connection, ≈ 80 ms of CPU here;
# the client's default is 5 per CPU (10 on this 2-core machine)
CONNECTION_POOL = 64


USER_AGENT = "dlsched"


def _named(api):
    """The client's requests say ``User-Agent: dlsched`` (``dlsched/IDENTITY`` once a replica
    campaigns: :func:`name_replica`): an audit log tells dlsched's writes from anyone else's.
    Its connections share one TLS context (:func:`share_tls_context`)."""
    api.api_client.user_agent = USER_AGENT
    share_tls_context(api.api_client)
    return api


def share_tls_context(api_client) -> None:
    """Every new connection of ``api_client`` uses one TLS context, made here once.

    Why: without one, urllib3 builds a context per connection and loads the system's CA store
    into it (27 ms of CPU per connection on this machine, even with verification off, where the
    store is never read). The scheduler mode's 16 Bindings in flight open 16 connections at the
    first burst after a start or a failover, on the cores the API server needs
    (``benchmarks/bench_scheduler_mode.py``'s py-spy profile: 72 samples of 1,253 in connect).
    What urllib3 still does per connection is unchanged: the verify mode, the hostname check,
    the configured CA file and client certificate are applied to this context as to its own; the
    system store is loaded once, and only where it is read (verification on, no CA file given)."""
    import ssl

    from urllib3.util.ssl_ import create_urllib3_context

    cfg = api_client.configuration
    pools = getattr(api_client.rest_client, "pool_manager", None)
    if pools is None or not hasattr(pools, "connection_pool_kw"):
        return   # a client without urllib3's pool manager: nothing to share
    verify = ssl.CERT_REQUIRED if cfg.verify_ssl else ssl.CERT_NONE
    context = create_urllib3_context(cert_reqs=verify)
    if verify == ssl.CERT_REQUIRED and not cfg.ssl_ca_cert:
        context.load_default_certs()
    pools.connection_pool_kw["ssl_context"] = context


def name_replica(api, identity: str) -> None:
    """``User-Agent: dlsched/IDENTITY``: each replica's requests are told apart in the audit log."""
    api.api_client.user_agent = f"{USER_AGENT}/{identity}"


_warned_insecure: list[str] = []


def insecure_once(why: str) -> None:
    """TLS verification was turned off on purpose: say so once, in our words, and silence
    urllib3's InsecureRequestWarning (it would repeat on every API call, watches included)."""
    import urllib3

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    if not _warned_insecure:
        _warned_insecure.append(why)
        log.warning("not verifying the API server's certificate (%s)", why)


def _json(resp) -> dict:
    return json.loads(_read(resp))


def _read(resp) -> bytes:
    """The raw response's body, and its connection back to the pool: a response read with
    ``_preload_content=False`` otherwise keeps its connection, and the next call opens a new
    TLS connection (≈ 80 ms of CPU here, most of it loading the CA store: every bind paid it
    two or three times, issue 22's create-to-bind figures)."""
    try:
        return resp.data
    finally:
        resp.release_conn()


def annotation_patch(uid: str, key: str, text: str, has_annotations: bool) -> list[dict]:
    """A JSON patch writing annotation ``key``, refused (422) unless the pod's uid is ``uid`` and
    it has no ``spec.nodeName`` (the API server's JSON patch takes a ``test`` of null as "absent").
    ``has_annotations``: add to the map; else create the map, tested absent first so that a
    map there after all is never replaced."""
    ops: list[dict] = [{"op": "test", "path": "/metadata/uid", "value": uid},
                       {"op": "test", "path": "/spec/nodeName", "value": None}]
    if has_annotations:
        ops.append({"op": "add", "path": "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"),
                    "value": text})
    else:
        ops += [{"op": "test", "path": "/metadata/annotations", "value": None},
                {"op": "add", "path": "/metadata/annotations", "value": {key: text}}]
    return ops


def annotations_patch(uid: str, values: dict[str, str], has_annotations: bool) -> list[dict]:
    """:func:`annotation_patch` for several annotations at once."""
    items = list(values.items())
    ops = annotation_patch(uid, *items[0], has_annotations)
    for key, text in items[1:]:
        if has_annotations:
            ops.append({"op": "add", "path": "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"),
                        "value": text})
        else:
            ops[-1]["value"][key] = text
    return ops


def gpu_patch(uid: str, text: str, has_annotations: bool) -> list[dict]:
    """The JSON patch writing ``dlsched.io/gpus`` to the pending pod ``uid`` only."""
    return annotation_patch(uid, GPUS_ANNOTATION, text, has_annotations)


def _message(exc) -> str:
    """The API server's reason in an ApiException (its Status message), on one line."""
    try:
        msg = json.loads(exc.body or b"{}").get("message") or exc.reason
    except (ValueError, AttributeError):
        msg = exc.reason
    return " ".join(str(msg).split())[:300]


WRITE_PREFIXES = ("create_", "patch_", "replace_", "delete_")


class NotLeader(RuntimeError):
    """A write refused before it was sent: this replica's renew deadline has passed."""


class FencedApi:
    """The one door every API write of a replica goes through (pod patches, Bindings, Evictions,
    events, ConfigMaps, pod deletions): a ``create_*``/``patch_*``/``replace_*``/``delete_*`` call
    is sent only if ``may_write()`` holds at that moment, else :class:`NotLeader` is raised. The
    workers that annotate, nudge and evict check nothing themselves; a replica paused past its
    renew deadline (SIGSTOP, a long GC, a frozen VM) must not write when it runs again, before it
    notices that it lost the Lease (issue 33, point 4). Reads pass untouched. The Lease itself is
    written through its own client (service/leader.py), which has its own check."""

    def __init__(self, api, may_write: Callable[[], bool]) -> None:
        self._api = api
        self._may_write = may_write
        self.refused: dict[str, int] = {}   # method name -> writes refused

    def __getattr__(self, name: str):
        attr = getattr(self._api, name)
        if not name.startswith(WRITE_PREFIXES) or not callable(attr):
            return attr

        def guarded(*args, **kwargs):
            if not self._may_write():
                self.refused[name] = self.refused.get(name, 0) + 1
                raise NotLeader(f"{name} not sent: this replica's renew deadline has passed (it may no longer lead)")
            return attr(*args, **kwargs)
        return guarded


class KubeBridge:
    """Lists and watches nodes and pods into ``core``; binds pods for it."""

    def __init__(self, api, core, scheduler_name: str = "default-scheduler", default_vc: str = "default") -> None:
        self.api = api
        self.core = core
        self.scheduler_name = scheduler_name
        self.default_vc = default_vc
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.bad_objects = 0
        self.resyncs = 0
        self.refused_annotations = 0   # GPU annotations the API server refused (uid changed / bound)
        self.gpu_binding = None   # --gpu-binding envvar-configmap: a GpuBinding (service/gpu_binding/binding.py)

    # -- start-up ---------------------------------------------------------------------
    def reconcile(self) -> tuple[str, str, set[str]]:
        """List nodes and pods into the core; returns the resource versions to watch from and
        the uids of the pods that hold GPUs on a node."""
        nodes = _json(self.api.list_node(_preload_content=False))
        for obj in nodes.get("items") or []:
            self._node_event("ADDED", obj)
        pods = _json(self.api.list_pod_for_all_namespaces(_preload_content=False))
        items = pods.get("items") or []
        bound = [p for p in items if (p.get("spec") or {}).get("nodeName")]
        waiting = [p for p in items if not (p.get("spec") or {}).get("nodeName")]
        waiting.sort(key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "",
                                    int((p.get("metadata") or {}).get("resourceVersion") or 0)))
        for obj in bound + waiting:
            self._pod_event("ADDED", obj)
        holding = {uid for uid, job in self.core.jobs.items() if job.placement}
        return (nodes.get("metadata") or {}).get("resourceVersion", ""), \
            (pods.get("metadata") or {}).get("resourceVersion", ""), holding

    # -- events -------------------------------------------------------------------------
    def _node_event(self, kind: str, obj: dict) -> None:
        try:
            facts = node_facts(obj, self.default_vc)
        except PodError as exc:
            self.bad_objects += 1
            log.warning("node skipped: %s", exc)
            return
        if kind == "DELETED":
            self.core.node_gone(facts.name)
        else:
            self.core.node_seen(facts)

    def _pod_event(self, kind: str, obj: dict) -> None:
        try:
            facts = pod_facts(obj)
        except PodError as exc:
            self.bad_objects += 1
            log.warning("pod skipped: %s", exc)
            return
        if not facts.node_name and facts.scheduler_name != self.scheduler_name:
            return   # another scheduler's pending pod: it holds nothing yet
        if self.gpu_binding is not None and is_reservation(facts.name, facts.labels):
            return   # a GPU reservation pod: the pod it holds the GPU for is the holder (service/gpu_binding/)
        if kind == "DELETED":
            self.core.pod_gone(facts.uid)
        else:
            self.core.pod_seen(facts)

    # -- watching -------------------------------------------------------------------------
    def start(self, node_rv: str, pod_rv: str) -> None:
        for kind, rv in (("nodes", node_rv), ("pods", pod_rv)):
            t = threading.Thread(target=self._watch, args=(kind, rv), name=f"watch-{kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()

    def _lister(self, kind: str) -> Callable:
        return self.api.list_node if kind == "nodes" else self.api.list_pod_for_all_namespaces

    def _watch(self, kind: str, rv: str) -> None:
        """Watch from ``rv``; after any interruption (dropped connection, an expired version: the
        client's own 410 handling does not work on raw events) list again and diff."""
        from kubernetes import watch

        handler = self._node_event if kind == "nodes" else self._pod_event
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(self._lister(kind), resource_version=rv, timeout_seconds=60,
                                      deserialize=False, allow_watch_bookmarks=False):
                    if self._stop.is_set():
                        w.stop()
                        return
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {obj.get('reason')} {obj.get('message')}")
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    handler(event["type"], obj)
                    self.core.run_pass()
            except Exception as exc:  # noqa: BLE001 - a watch thread must survive anything the server does
                log.warning("%s watch interrupted (%s); listing again", kind, exc)
                self.resyncs += 1
                while not self._stop.is_set():
                    try:
                        rv = self._resync(kind)
                        break
                    except Exception as exc2:  # noqa: BLE001 - the API server may be down for a while
                        log.warning("%s list failed (%s); retrying", kind, exc2)
                        time.sleep(1.0)

    def _resync(self, kind: str) -> str:
        """List ``kind`` again: every object is re-read, and those gone meanwhile are removed."""
        listing = _json(self._lister(kind)(_preload_content=False))
        items = listing.get("items") or []
        if kind == "nodes":
            for obj in items:
                self._node_event("MODIFIED", obj)
            present = {(o.get("metadata") or {}).get("name") for o in items}
            st = self.core.state
            for name in [n for i, n in enumerate(st.node_ids) if not st.node_removed[i] and n not in present]:
                self.core.node_gone(name)
        else:
            for obj in items:
                self._pod_event("MODIFIED", obj)
            present = {(o.get("metadata") or {}).get("uid") for o in items}
            for uid in [u for u in (*self.core.jobs, *self.core.parked) if u not in present]:
                self.core.pod_gone(uid)
        self.core.run_pass()
        return (listing.get("metadata") or {}).get("resourceVersion", "")

    # -- binding --------------------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str, gpus: list[int] | None,
             annotated: bool = True, annotate: bool = True) -> str:
        """Annotate the pod with its GPU indices, then bind it; '' on success, else the error.

        The annotation is a JSON patch whose ``test`` operations make the API server refuse it
        unless the pod named is still the one asked for (same uid) and is not bound (no
        ``spec.nodeName``): a bind request with a made-up uid, or for a pod bound meanwhile,
        never rewrites the GPUs of a pod that runs (issue 22, point 1). ``gpus`` None: a pod
        that requests no GPU, bound untouched. ``annotated``: whether the pod has annotations
        already (the patch adds the map otherwise); the other form is tried when it was wrong.
        ``annotate`` False: the pod was annotated, with the same preconditions, when it was
        nominated (:meth:`touch`): the Binding alone. The Binding carries the annotation too (the
        API server copies a Binding's annotations to the pod, in the same write as the node),
        and refuses a pod bound already; v1.20 does *not* check its uid (measured: a Binding
        with a made-up uid binds the pod), hence the patch's uid test."""
        from kubernetes.client import V1Binding, V1ObjectMeta, V1ObjectReference
        from kubernetes.client.exceptions import ApiException

        try:
            text = None if gpus is None else ",".join(str(g) for g in gpus)
            if text is None:   # no GPU, nothing to write: a patch of tests alone checks the uid
                try:
                    _read(self.api.patch_namespaced_pod(name, namespace, annotation_patch(uid, "", "", True)[:2],
                                                        _preload_content=False))
                except ApiException as exc:
                    if exc.status != 422:
                        raise
                    return (f"API server refused the bind (422): pod {namespace}/{name} is bound already or its "
                            f"uid is not {uid}")
            elif annotate:
                error = self._annotate(namespace, name, uid, text, annotated)
                if error:
                    return error
            if self.gpu_binding is not None and gpus is not None:   # its ConfigMap and reservations first
                error = self.gpu_binding.before_binding(namespace, name, uid, node, gpus)
                if error:
                    return error
            meta = V1ObjectMeta(name=name, namespace=namespace, uid=uid,
                                annotations=None if text is None else {GPUS_ANNOTATION: text})
            body = V1Binding(metadata=meta,
                             target=V1ObjectReference(kind="Node", name=node, api_version="v1"))
            _read(self.api.create_namespaced_pod_binding(name, namespace, body, _preload_content=False))
        except ApiException as exc:
            return self._bound(uid, f"API server refused the bind ({exc.status}): {exc.reason}")
        except Exception as exc:  # noqa: BLE001 - connection errors: the bind failed, GPUs must return
            return self._bound(uid, f"bind failed: {exc}")
        return self._bound(uid, "")

    def _bound(self, uid: str, error: str) -> str:
        """The Binding's outcome, told to the GPU binding (a failed one holds no reservation)."""
        if self.gpu_binding is not None:
            self.gpu_binding.after_binding(uid, error)
        return error

    def _annotate(self, namespace: str, name: str, uid: str, text: str, annotated: bool) -> str:
        """The GPU annotation, written only to the pending pod with this uid; '' or the error."""
        from kubernetes.client.exceptions import ApiException

        for has_map in (annotated, not annotated):
            try:
                _read(self.api.patch_namespaced_pod(name, namespace, gpu_patch(uid, text, has_map),
                                                    _preload_content=False))
                return ""
            except ApiException as exc:
                if exc.status != 422:
                    raise
                # v1.20 does not say which test failed: the other form of the annotation map next
        self.refused_annotations += 1
        return (f"API server refused the GPU annotation (422): pod {namespace}/{name} is bound already or its "
                f"uid is not {uid}")

    def touch(self, namespace: str, name: str, uid: str, node: str, gpus: str = "") -> str:
        """Annotate a nominated, pending pod: ``dlsched.io/nominated`` (node and time) and, when
        given, its GPUs (``dlsched.io/gpus``), with the uid / not-bound preconditions of the GPU
        annotation. The pod update also nudges kube-scheduler: it moves the pod out of its
        unschedulable queue (v1.20 retries such a pod otherwise only on a cluster event or after
        60 s). '' on success, else the error."""
        from kubernetes.client.exceptions import ApiException

        value = f"{node} {time.time():.3f}"
        for has_map in (True, False):
            try:
                patch = annotation_patch(uid, NOMINATED_ANNOTATION, value, has_map)
                if gpus:
                    patch = annotations_patch(uid, {NOMINATED_ANNOTATION: value, GPUS_ANNOTATION: gpus}, has_map)
                _read(self.api.patch_namespaced_pod(name, namespace, patch, _preload_content=False))
                return ""
            except ApiException as exc:
                if exc.status != 422:
                    return f"({exc.status}) {_message(exc)}"
            except Exception as exc:  # noqa: BLE001 - a nudge is best effort
                return str(exc)
        return "(422) the pod is bound already or has another uid"

    # -- live preemption -------------------------------------------------------------------
    def evict(self, intent) -> str:
        """POST the pod's ``eviction`` subresource (``policy/v1beta1``, what v1.20 serves) with the
        intent's grace period and a uid precondition (a new pod of the same name is never
        evicted). 'accepted'; 'gone' (404, or the uid precondition failed: 409); 'retry: 429 ...'
        (a PodDisruptionBudget refuses it now); 'retry: ...' for anything else."""
        from kubernetes.client.exceptions import ApiException

        body = {"apiVersion": "policy/v1beta1", "kind": "Eviction",
                "metadata": {"name": intent.name, "namespace": intent.namespace},
                "deleteOptions": {"gracePeriodSeconds": intent.grace_s, "preconditions": {"uid": intent.uid}}}
        try:
            _read(self.api.create_namespaced_pod_eviction(intent.name, intent.namespace, body,
                                                          _preload_content=False))
        except ApiException as exc:
            if exc.status in (404, 409):
                return "gone"
            return f"retry: {exc.status} {_message(exc)}"
        except Exception as exc:  # noqa: BLE001 - the API server may be away: tried again
            return f"retry: {exc}"
        return "accepted"

    def preempted_event(self, intent, component: str = "dlsched") -> str:
        """A ``Preempted`` event on the evicted pod (kube-scheduler's reason for its own
        preemptions), naming the pod it was evicted for and why (``TimeLimitExceeded`` for an
        eviction at the pod's time limit); '' or the error."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = (f"evicted by {component} for {intent.for_pod or 'a pending pod'}: {intent.reason} "
                   f"(grace {intent.grace_s} s)")
        reason = "Preempted"
        if intent.reason == TIME_LIMIT_REASON and not intent.for_pod:   # a stop at its max runtime, for no one
            message, reason = f"stopped by {component} at its time limit (grace {intent.grace_s} s)", "TimeLimitExceeded"
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{intent.name}.", "namespace": intent.namespace},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": intent.namespace,
                                   "name": intent.name, "uid": intent.uid},
                "reason": reason, "message": message[:1024], "type": "Normal",
                "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            _read(self.api.create_namespaced_event(intent.namespace, body, _preload_content=False))
        except Exception as exc:  # noqa: BLE001 - an event is best effort
            return str(exc)
        return ""

    def create_pod(self, namespace: str, body: dict) -> dict:
        """Create a pod (operator API's submit); ValueError with the API server's reason if refused."""
        from kubernetes.client.exceptions import ApiException

        try:
            obj = _json(self.api.create_namespaced_pod(namespace, body, _preload_content=False))
        except ApiException as exc:
            raise ValueError(f"the API server refused the pod ({exc.status}): {exc.reason}") from None
        except NotLeader as exc:
            raise ValueError(str(exc)) from None
        meta = obj.get("metadata") or {}
        return {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}

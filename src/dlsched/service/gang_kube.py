"""The gangs' calls to the API server: Warning events on a gang's pod, and the deletion of
the bound pods of a gang that could not be bound whole."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from dlsched.service.pods import PodFacts

log = logging.getLogger("dlsched.service")


def kube_warner(service) -> Callable[[PodFacts, str, str], None] | None:
    """``warn(pod, reason, message)``: a Warning Event on ``pod`` through the service's API server,
    written by a thread of its own (the caller holds the core's lock) and only while this
    replica leads; None without an API client."""
    api = getattr(service.bridge, "api", None)
    if api is None:
        return None
    core = service.core

    def write(pod: PodFacts, reason: str, message: str) -> None:
        if not core.may_nominate():   # a replica that lost its lease writes nothing
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{pod.name}.",
                                                                  "namespace": pod.namespace},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace,
                                   "name": pod.name, "uid": pod.uid},
                "reason": reason, "message": message[:1024], "type": "Warning", "source": {"component": "dlsched"},
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            api.create_namespaced_event(pod.namespace, body, _preload_content=False).release_conn()
            core.gangs.counters["gang warning events"] += 1
        except Exception as exc:  # noqa: BLE001 - an event is best effort; counted and logged
            core.gangs.counters["gang warning events failed"] += 1
            log.warning("gang warning event on %s failed: %s", pod.key, exc)

    def warn(pod: PodFacts, reason: str, message: str) -> None:
        threading.Thread(target=write, args=(pod, reason, message), name="gang-warn", daemon=True).start()
    return warn


def delete_pod(bridge, pod: PodFacts) -> bool:
    """Delete a bound pod of a gang that could not be bound whole (precondition: its uid), so that
    its controller recreates it; True when deleted (or already gone)."""
    if bridge is None or not hasattr(bridge, "api"):
        return bridge is not None and bool(getattr(bridge, "delete", lambda p: False)(pod))
    from kubernetes.client import V1DeleteOptions, V1Preconditions
    from kubernetes.client.exceptions import ApiException

    try:
        resp = bridge.api.delete_namespaced_pod(pod.name, pod.namespace, body=V1DeleteOptions(
            grace_period_seconds=0, preconditions=V1Preconditions(uid=pod.uid)), _preload_content=False)
        resp.release_conn()
        return True
    except ApiException as exc:
        return exc.status in (404, 409)   # gone already, or another pod now has the name
    except Exception:  # noqa: BLE001 - the API server unreachable: reported by the caller
        return False

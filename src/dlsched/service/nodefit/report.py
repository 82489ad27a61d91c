"""What kube-scheduler v1.20 writes when a pod cannot be placed, so ``kubectl describe pod`` reads
the same in scheduler mode: the FitError message, the PodScheduled condition, the events.

The message is ``FitError.Error()``: ``0/N nodes are available: `` then "count reason" for each
reason over all nodes, sorted as strings, joined by ", ", ending in ".". Each node contributes
the reasons of the first check it failed (kube-scheduler stops a node at its first failing plugin).
The events are ``events.k8s.io/v1`` (what v1.20's scheduler posts, from its events broadcaster):
reporting controller = the scheduler's name, instance = name + "-" + host name.
"""

from __future__ import annotations

import socket
from collections import Counter
from datetime import UTC, datetime

NO_NODES = "no nodes available to schedule pods"


def fit_message(total: int, failed: dict[str, list[str]]) -> str:
    """``0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had taint {k: v}, ...``."""
    if total == 0:
        return NO_NODES
    counts = Counter(r for reasons in failed.values() for r in reasons)
    parts = sorted(f"{n} {r}" for r, n in counts.items())
    head = f"{total - len(failed)}/{total} nodes are available"
    return f"{head}: {', '.join(parts)}." if parts else f"{head}."


def unsupported_message(items: list[str], scheduler_name: str = "dlsched") -> str:
    """The condition/event message for a pod that uses what this mode does not evaluate
    (``unsupported(pod)``): it stays pending rather than be placed ignoring those constraints."""
    return (f"{scheduler_name} does not evaluate what this pod asks for, so it is not placed: "
            f"{'; '.join(items)}. Remove it or use a scheduler that evaluates it.")


def _now(now: datetime | None) -> datetime:
    return (now or datetime.now(UTC)).astimezone(UTC)


def _rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def unschedulable_condition(message: str, *, now: datetime | None = None) -> dict:
    """The pod condition kube-scheduler sets: PodScheduled=False, reason Unschedulable."""
    return {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
            "lastTransitionTime": _rfc3339(_now(now)), "reason": "Unschedulable", "message": message}


def condition_patch(condition: dict) -> dict:
    """A strategic-merge patch body for ``pods/NAME/status`` (conditions merge on ``type``)."""
    return {"status": {"conditions": [condition]}}


def _ref(pod: dict) -> dict:
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    ref = {"kind": "Pod", "namespace": str(meta.get("namespace") or "default"), "name": str(meta.get("name") or ""),
           "uid": str(meta.get("uid") or ""), "apiVersion": "v1",
           "resourceVersion": str(meta.get("resourceVersion") or "")}
    return {k: v for k, v in ref.items() if v}


NOTE_LIMIT = 1024   # bytes: the API server rejects a longer events.k8s.io/v1 note


def _note(text: str) -> str:
    """The note within the API's limit; a longer one is cut and ends in "..." (visibly, not silently)."""
    raw = text.encode()
    if len(raw) <= NOTE_LIMIT:
        return text
    return raw[:NOTE_LIMIT - 3].decode(errors="ignore") + "..."


def _event(pod: object, reason: str, note: str, kind: str, action: str, scheduler_name: str,
           now: datetime | None, instance: str | None) -> dict:
    t = _now(now)
    ref = _ref(pod if isinstance(pod, dict) else {})
    nanos = int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000
    return {
        "kind": "Event", "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": f"{ref.get('name', 'pod')}.{nanos:x}", "namespace": ref["namespace"]},
        "eventTime": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": scheduler_name,
        "reportingInstance": instance or f"{scheduler_name}-{socket.gethostname()}",
        "action": action, "reason": reason, "regarding": ref, "note": _note(note), "type": kind,
    }


def failed_scheduling_event(pod: object, message: str, scheduler_name: str, *, now: datetime | None = None,
                            instance: str | None = None) -> dict:
    """The Warning event kube-scheduler posts (``POST /apis/events.k8s.io/v1/namespaces/NS/events``)."""
    return _event(pod, "FailedScheduling", message, "Warning", "Scheduling", scheduler_name, now, instance)


def scheduled_event(pod: object, node: str, scheduler_name: str, *, now: datetime | None = None,
                    instance: str | None = None) -> dict:
    """The Normal event after a bind: ``Successfully assigned NS/NAME to NODE``."""
    ref = _ref(pod if isinstance(pod, dict) else {})
    note = f"Successfully assigned {ref['namespace']}/{ref.get('name', '')} to {node}"
    return _event(pod, "Scheduled", note, "Normal", "Binding", scheduler_name, now, instance)

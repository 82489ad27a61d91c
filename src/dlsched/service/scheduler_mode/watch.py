"""The watch loop of the scheduler mode: one thread per kind (nodes, pods).

It watches from the last ``resourceVersion`` seen; a dropped connection or a server error is
watched again from there after a back-off (doubling from :data:`BACKOFF_MIN_S` to at most
:data:`BACKOFF_MAX_S`, reset once an event arrives); only ``410 Gone`` (the version expired)
lists the kind again, which diffs what changed while the watch was away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("dlsched.service")

BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 5.0
WATCH_TIMEOUT_S = 60   # the server ends a watch after this; it is opened again from the last version


class Gone(Exception):
    """The watched resourceVersion is too old (HTTP 410): list again."""


def backoff(previous: float) -> float:
    """The next wait after a failure: doubled, within [BACKOFF_MIN_S, BACKOFF_MAX_S]."""
    return min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, previous * 2))


def watch_kind(lister: Callable, rv: str, handle: Callable[[str, dict], None], relist: Callable[[], str],
               stop: threading.Event, counts: dict[str, int]) -> None:
    """Feed every event of ``lister``'s watch to ``handle(type, object)`` until ``stop`` is set.
    ``relist()`` lists again and returns the version to watch from. ``counts``: reconnects,
    relists and errors, for the state view."""
    from kubernetes import watch
    from kubernetes.client.exceptions import ApiException

    wait = 0.0
    while not stop.is_set():
        try:
            if not rv:
                raise Gone("no resourceVersion to watch from")
            w = watch.Watch()
            for event in w.stream(lister, resource_version=rv, timeout_seconds=WATCH_TIMEOUT_S,
                                  deserialize=False, allow_watch_bookmarks=True):
                if stop.is_set():
                    w.stop()
                    return
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(obj.get("message", "410 Gone"))
                    raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                wait = 0.0
                if kind != "BOOKMARK":
                    handle(kind, obj)
        except Gone as exc:
            counts["relists"] = counts.get("relists", 0) + 1
            log.info("watch: %s; listing again", exc)
            rv = _relist(relist, stop, counts)
            continue
        except ApiException as exc:
            if exc.status == 410:
                counts["relists"] = counts.get("relists", 0) + 1
                rv = _relist(relist, stop, counts)
                continue
            counts["errors"] = counts.get("errors", 0) + 1
            log.warning("watch refused (%s %s); again from version %s", exc.status, exc.reason, rv)
        except Exception as exc:  # noqa: BLE001 - a watch thread must survive anything the server does
            counts["errors"] = counts.get("errors", 0) + 1
            log.warning("watch interrupted (%s); again from version %s", exc, rv)
        else:
            continue   # the server's timeout: at once again from the last version
        counts["reconnects"] = counts.get("reconnects", 0) + 1
        wait = backoff(wait)
        stop.wait(wait)


def _relist(relist: Callable[[], str], stop: threading.Event, counts: dict[str, int]) -> str:
    """List until it succeeds (backing off between tries); the version to watch from."""
    wait = 0.0
    while not stop.is_set():
        try:
            return relist()
        except Exception as exc:  # noqa: BLE001 - the API server may be away for a while
            counts["errors"] = counts.get("errors", 0) + 1
            wait = backoff(wait)
            log.warning("list failed (%s); again in %.1f s", exc, wait)
            stop.wait(wait)
    return ""

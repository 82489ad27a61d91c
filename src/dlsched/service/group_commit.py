"""One thread that makes the binds' rows durable in groups, for both live modes.

A bind's rows (``Store.bound_later``) and the watch's echoes of binds and releases
(``SchedulerCore.commit_behind``) wait in the store until ``Store.write_behind`` commits them in one
durable transaction. Committed by the thread that made them, every bind and every pod event paid a
flushed commit of its own and held the store's lock through it, so the next bind's ``assume`` and
the next watch event waited behind each flush. Here the thread that made the rows asks
(:meth:`GroupCommitter.request`) and goes on; this thread commits all that wait at once.

A crash before the commit leaves the pod to start-up's adoption of bound pods (the rows stay
``assumed``; the pod is bound on the API server with its GPU annotation), as a crash between the
Binding and the commit always did. Measured: docs/service.md, "The extender's commits".
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("dlsched.service")
THREAD_NAME = "bind-commit"


class GroupCommitter:
    """Commits ``store.write_behind`` on a thread of its own whenever asked (see the module doc)."""

    def __init__(self, store) -> None:
        self.store = store
        self._asked = threading.Event()
        self.running = False
        self.groups = 0   # durable commits made (each takes every bind waiting)

    def request(self) -> None:
        """Rows wait: commit them soon (never blocks)."""
        self._asked.set()

    def start(self, done: threading.Event) -> None:
        threading.Thread(target=self._run, args=(done,), name=THREAD_NAME, daemon=True).start()
        self.running = True

    def _run(self, done: threading.Event) -> None:
        while not done.is_set():
            if not self._asked.wait(1.0):
                continue
            self._asked.clear()
            try:
                if self.store.write_behind():
                    self.groups += 1
            except Exception:  # noqa: BLE001 - the next request's commit takes these rows too
                log.exception("commit of bound pods failed")
                self._asked.set()
                done.wait(1.0)
        self.store.write_behind()

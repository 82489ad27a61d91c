"""A round-robin TCP proxy on 127.0.0.1: what a Kubernetes Service is to kube-scheduler.

Each accepted connection goes to the next backend in turn; a backend that refuses the
connection (a dead replica, as a Service drops an endpoint whose pod died) is skipped. Bytes are
copied both ways by two threads per connection. Stopped with :meth:`stop` (closes every socket).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class TcpProxy:
    """``delay``: seconds each client-to-backend chunk is held (a slow link; 0: none)."""

    def __init__(self, port: int, backends: list[int], delay: float = 0.0) -> None:
        self.backends = backends
        self.delay = delay
        self.connections = [0] * len(backends)    # connections handed to each backend
        self._next = 0
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self._server.listen(64)
        self._stopped = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = self._connect()
            if upstream is None:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            for a, b, delay in ((client, upstream, self.delay), (upstream, client, 0.0)):
                threading.Thread(target=_pipe, args=(a, b, delay), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        with self._lock:
            start, self._next = self._next, (self._next + 1) % len(self.backends)
        for k in range(len(self.backends)):
            i = (start + k) % len(self.backends)
            try:
                sock = socket.create_connection(("127.0.0.1", self.backends[i]), timeout=2)
            except OSError:
                continue
            sock.settimeout(None)
            with self._lock:
                self.connections[i] += 1
            return sock
        return None

    def stop(self) -> None:
        self._stopped = True
        self._server.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()


def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
    try:
        while chunk := src.recv(65536):
            if delay:
                time.sleep(delay)
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)

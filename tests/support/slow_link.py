"""A TCP proxy on 127.0.0.1 that holds every client-to-server chunk for a while: a slow link to
the API server, so that a test can kill the service in the middle of a series of API calls
(a gang's binds) instead of only before or after it."""

from __future__ import annotations

import socket
import threading
import time


class SlowLink:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream``; requests wait ``delay`` seconds."""

    def __init__(self, port: int, upstream: int, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self._server.listen(64)
        threading.Thread(target=self._accept, name="slow-link", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                return
            upstream.settimeout(None)
            with self._lock:
                self._socks += [client, upstream]
            threading.Thread(target=_pipe, args=(client, upstream, self.delay), daemon=True).start()
            threading.Thread(target=_pipe, args=(upstream, client, 0.0), daemon=True).start()

    def stop(self) -> None:
        self._server.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass


def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
    try:
        while chunk := src.recv(65536):
            if delay:
                time.sleep(delay)
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

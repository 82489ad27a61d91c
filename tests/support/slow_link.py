"""A TCP proxy on 127.0.0.1 that holds every client-to-server chunk for a while: a slow link to
the API server, so that a test can kill the service in the middle of a series of API calls
(a gang's binds) instead of only before or after it."""

from __future__ import annotations

from support.tcp_proxy import TcpProxy


class SlowLink(TcpProxy):
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream``; requests wait ``delay`` seconds."""

    def __init__(self, port: int, upstream: int, delay: float) -> None:
        super().__init__(port, [upstream], delay)

"""The last gate of a replica's API writes: leadership checked as the bytes leave the process.

:class:`~dlsched.service.kube.FencedApi` checks leadership when a write is *called*. Between that
check and the socket write the official client serialises the body, takes a pooled connection
(sometimes a TLS handshake) and builds the request: tens of milliseconds under load. A replica
paused inside that window (SIGSTOP, a long GC, a frozen VM) sent the write when it ran again:
the paused-leader test on the real control plane caught three Bindings of the old leader sent
0.3-0.5 s after it was resumed, 8 s past its renew deadline (refused 409 only because the new
leader had bound those pods first).

So every connection of the client checks ``may_write()`` again in ``send()``, for each chunk of
a write request (POST, PUT, PATCH, DELETE). A refused chunk raises :class:`NotLeader` and the
connection is dropped: the API server never receives a whole request, so it executes nothing.
What remains is the socket write itself (microseconds), the limit every lease-based fence
without server-side tokens has (client-go documents the same). Reads and watches pass; Lease
writes pass too: the elector (service/leader.py) checks its own, and a follower must be able to
campaign.
"""

from __future__ import annotations

from collections.abc import Callable

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LEASE_PATH = "/apis/coordination.k8s.io/"


class SocketFence:
    """Installs the check on one ``kubernetes.client.ApiClient``'s connection pools."""

    def __init__(self, may_write: Callable[[], bool]) -> None:
        self.may_write = may_write
        self.refused = 0   # write requests stopped at the socket (the call's own check had passed)

    def install(self, api_client) -> None:
        """Replace the pool classes of the client's pool manager (its pools so far are dropped:
        the next request opens fenced connections)."""
        from urllib3.connection import HTTPConnection, HTTPSConnection
        from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

        fence = self

        def fenced(base: type) -> type:
            class FencedConnection(base):
                _dlsched_write = False

                def putrequest(self, method, url, *args, **kwargs):
                    self._dlsched_write = str(method).upper() in WRITE_METHODS and LEASE_PATH not in str(url)
                    return super().putrequest(method, url, *args, **kwargs)

                def send(self, data):
                    if self._dlsched_write and not fence.may_write():
                        from dlsched.service.kube import NotLeader

                        fence.refused += 1
                        raise NotLeader("write not sent: this replica's renew deadline passed while the "
                                        "request was being prepared (it may no longer lead)")
                    return super().send(data)
            return FencedConnection

        class FencedPool(HTTPConnectionPool):
            ConnectionCls = fenced(HTTPConnection)

        class FencedHTTPSPool(HTTPSConnectionPool):
            ConnectionCls = fenced(HTTPSConnection)

        manager = api_client.rest_client.pool_manager
        manager.pool_classes_by_scheme = {"http": FencedPool, "https": FencedHTTPSPool}
        manager.clear()

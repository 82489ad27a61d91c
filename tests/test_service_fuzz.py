"""Hostile input: schemathesis generates requests from the service's OpenAPI schema (valid and
invalid ones) for the extender and the operator API. No response may be a server error, and the
service must still answer afterwards."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from dlsched.registry import make_policy  # noqa: E402
from dlsched.service.app import build_app  # noqa: E402
from dlsched.service.core import SchedulerCore  # noqa: E402
from dlsched.service.pods import NodeFacts  # noqa: E402
from dlsched.service.runtime import LiveService  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

TOKEN = "fuzz-token"


class Bridge:
    """Stands in for the API server: binds succeed, pods are 'created'."""

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def create_pod(self, namespace, body):
        return {"namespace": namespace, "name": body["metadata"]["name"], "uid": "fuzz"}


def _service() -> LiveService:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"))
    for i in range(3):
        core.node_seen(NodeFacts(f"node-{i}", 8, "default", "", False))
    return LiveService(core, Bridge(), token=TOKEN)


SERVICE = _service()
APP = build_app(SERVICE)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case):
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, {}):
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])


def test_still_answers_after_the_fuzzing():
    from fastapi.testclient import TestClient

    client = TestClient(APP)
    assert client.get("/healthz").json() == {"ok": True}
    state = client.get("/api/v1/state").json()
    assert len(state["nodes"]) == 3
    SERVICE.core.state.check_invariants()

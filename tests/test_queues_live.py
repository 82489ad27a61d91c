"""Queues from Kubernetes (service/queues.py): the ConfigMap's ``queues.toml`` read at start and
on change, invalid content keeping the last good configuration (counted, one Warning event per
version), namespaces mapped to VCs, and ``GET /api/v1/queues``."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts, VcMapping
from dlsched.service.queues import NOT_ENFORCED, LiveQueues, parse_ref
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

GOOD = """
[[queues]]
name = "research"
borrow_limit = 8
parent = "lab"
namespaces = ["team-a", "team-b"]

[[queues]]
name = "prod"
lend_limit = 4
"""


class Map:
    """A ConfigMap that the test edits; ``read`` is what the API server would return."""

    def __init__(self) -> None:
        self.obj: dict | None = None
        self.rv = 0
        self.reads = 0

    def put(self, text: str | None, key: str = "queues.toml") -> None:
        self.rv += 1
        self.obj = {"metadata": {"resourceVersion": str(self.rv)}, "data": {} if text is None else {key: text}}

    def read(self) -> dict | None:
        self.reads += 1
        return self.obj


def setup():
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), VcMapping({"ops": "prod"}))
    core.node_seen(NodeFacts("r1", 8, "research", "", False))
    core.node_seen(NodeFacts("p1", 4, "prod", "", False))
    cm, warnings = Map(), []
    return core, cm, warnings, LiveQueues(core, "dlsched", "dlsched-queues", cm.read, warnings.append)


def test_good_config_applies_namespaces_and_reports_guarantee_and_use():
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    assert [s.name for s in q.specs] == ["research", "prod"] and q.version == "1" and q.error == ""
    assert core.vcs.namespaces == {"ops": "prod", "team-a": "research", "team-b": "research"}
    # a new pod of team-a joins research; its label would win
    core.pod_seen(PodFacts("u1", "team-a", "job1", 4, created=0.0))
    core.pod_seen(PodFacts("u2", "team-b", "job2", 8, created=0.0))
    core.run_pass()
    assert core.jobs["u1"].vc == "research" and core.jobs["u2"].vc == "research"
    rep = q.report()
    rows = {r["name"]: r for r in rep["queues"]}
    assert rows["research"] == {"name": "research", "configured": True, "guarantee_gpus": 8,
                                "guarantee_by_type": {"V100": 8}, "used_gpus": 4, "running": 0, "assumed": 1,
                                "pending": 1, "borrow_limit": 8, "lend_limit": None, "parent": "lab",
                                "namespaces": ["team-a", "team-b"]}
    assert rows["prod"]["lend_limit"] == 4 and rows["prod"]["borrow_limit"] is None and rows["prod"]["used_gpus"] == 0
    assert rep["source"] == {"configmap": "dlsched/dlsched-queues", "key": "queues.toml", "resource_version": "1",
                             "loaded_at": rep["source"]["loaded_at"]}
    assert rep["error"] is None and rep["counts"] == {"loaded": 1} and rep["not_enforced"] == NOT_ENFORCED
    q.poll()
    assert q.counts["loaded"] == 1            # same resourceVersion: not parsed again


@pytest.mark.parametrize(("text", "needle"), [
    ("[[queues]\nname = 1", "not valid TOML"),
    ('[[queues]]\nname = "x"\nborrow_limit = -3', "queues[1].borrow_limit"),
    ('[[queues]]\nname = "x"\ncolour = "red"', "colour"),
    ('[[queues]]\nname = "x"\nnamespaces = ["Bad_NS"]', "queues[1].namespaces"),
    ('[[queues]]\nname = "x"\nnamespaces = ["a"]\n[[queues]]\nname = "y"\nnamespaces = ["a"]',
     "namespace a is in queues x and y"),
    ('nodes = 3', "unknown top-level key(s) nodes"),
])
def test_invalid_content_keeps_the_last_good_config(text, needle):
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    cm.put(text)
    q.poll()
    assert [s.name for s in q.specs] == ["research", "prod"] and q.version == "1"
    assert needle in q.error and q.error.startswith("ConfigMap dlsched/dlsched-queues key queues.toml")
    assert q.counts == {"loaded": 1, "invalid": 1, "events": 1}
    assert len(warnings) == 1 and warnings[0].startswith("dlsched kept its last good queue configuration: ")
    q.poll()                                  # the same bad version: neither parsed nor reported again
    assert q.counts["invalid"] == 1 and len(warnings) == 1
    assert core.vcs.namespaces["team-a"] == "research"
    cm.put(GOOD.replace("borrow_limit = 8", "borrow_limit = 2"))
    q.poll()                                  # fixed: applied, the error cleared
    assert q.error == "" and q.specs[0].borrow_limit == 2 and q.report()["error"] is None


def test_deleted_configmap_or_key_clears_the_config_and_a_read_failure_is_survived():
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    cm.put(None)                              # the key removed
    q.poll()
    assert q.specs == () and core.vcs.namespaces == {"ops": "prod"} and q.counts["removed"] == 1
    cm.put(GOOD)
    q.poll()
    cm.obj = None                             # the ConfigMap deleted
    q.poll()
    assert q.specs == () and q.counts["removed"] == 2

    import threading

    def broken():
        raise ConnectionError("API server away")
    q.read = broken
    done = threading.Event()
    done.set()
    q.run(done)                               # one poll, failed, counted, no exception
    assert q.counts["read_failed"] == 1


def test_queues_endpoint_and_the_configmap_reference():
    pytest.importorskip("fastapi")
    from dlsched.service.app import build_app
    from support.live_app import FakeBridge, LiveApp

    core, cm, warnings, q = setup()
    service = LiveService(core, FakeBridge())
    with LiveApp(build_app(service)) as app:
        rep = app.call("GET", "/api/v1/queues")   # no ConfigMap read: the live VCs, nothing configured
        assert [(r["name"], r["configured"], r["guarantee_gpus"]) for r in rep["queues"]] == \
            [("research", False, 8), ("prod", False, 4)]
        service.queues = q
        cm.put(GOOD)
        q.poll()
        rep = app.call("GET", "/api/v1/queues")
        assert [r["configured"] for r in rep["queues"]] == [True, True]
    assert parse_ref("dlsched/dlsched-queues") == ("dlsched", "dlsched-queues")
    with pytest.raises(ValueError, match="--queues-configmap 'nope': want NAMESPACE/NAME"):
        parse_ref("nope")

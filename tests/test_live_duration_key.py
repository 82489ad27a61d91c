"""How a live pod's duration prediction is keyed (docs/service.md, "Duration predictions"): its
user (``dlsched.io/user``, else the namespace) and a name that stays the same across the pods of
one job: ``dlsched.io/name``, else the ``dlsched.io/job`` label, else the controller's name prefix
(``generateName``), else the pod name. A Job controller's pods (``train-x7k2p``, ``train-q9z4c``)
used to be keyed by their random names, so no resubmission ever matched an earlier run."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.predictors.duration.names import job_bucket
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts, job_name
from dlsched.service.store import Store


def pod(name: str, **kw) -> PodFacts:
    return PodFacts(f"uid-{name}", "team-a", name, 1, created=1.0, **kw)


def test_the_name_rule():
    assert job_name(pod("x", annotations={"dlsched.io/name": "bert-ft"}, labels={"dlsched.io/job": "j"})) == "bert-ft"
    assert job_name(pod("x", labels={"dlsched.io/job": "resnet-train"})) == "resnet-train"
    assert job_name(pod("train-x7k2p", generate_name="train-")) == "train"
    assert job_name(pod("solo")) == "solo"
    assert job_name(pod("x", annotations={"dlsched.io/name": "  "}, generate_name="g-")) == "g"


def test_two_pods_of_one_controller_get_the_same_duration_key(tmp_path):
    core = SchedulerCore(make_policy("qssf"), Store(f"sqlite:///{tmp_path}/s.db"))
    core.node_seen(NodeFacts("n", 8, "default", "", False))
    a, b = pod("train-x7k2p", generate_name="train-"), pod("train-q9z4c", generate_name="train-")
    for p in (a, b):
        core.verdict(p, ["n"])
    ja, jb = core.jobs[a.uid], core.jobs[b.uid]
    assert (ja.user, ja.name) == (jb.user, jb.name) == ("team-a", "train")
    assert job_bucket(ja) == job_bucket(jb) != ""

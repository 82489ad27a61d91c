"""deploy/: the scheduler configurations register the extender exactly as the end-to-end tests do,
the RBAC grants the verbs the service uses and no more, the example pod reads as a 4-GPU job."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from support.control_plane import scheduler_config  # noqa: E402

from dlsched.service.pods import pod_facts  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_v1_and_v1beta1_register_the_same_extender_as_the_tests():
    v1, = _docs("scheduler-config-v1.yaml")
    beta, = _docs("scheduler-config-v1beta1.yaml")
    assert v1["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert beta["apiVersion"] == "kubescheduler.config.k8s.io/v1beta1"
    assert v1["extenders"] == beta["extenders"]
    config = scheduler_config("http://127.0.0.1:1/scheduler", Path("/k"), cache_capable=True)
    assert v1["profiles"] == beta["profiles"] == config["profiles"]     # no preemption behind dlsched's back
    tested = config["extenders"][0]
    shipped = v1["extenders"][0]
    assert set(shipped) == set(tested)
    for key in ("filterVerb", "prioritizeVerb", "bindVerb", "nodeCacheCapable", "ignorable", "managedResources",
                "enableHTTPS"):
        assert shipped[key] == tested[key], key


def test_rbac_grants_only_what_the_service_calls():
    docs = _docs("rbac.yaml")
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {(("",), ("nodes",)): {"list", "watch"},
                     (("",), ("pods",)): {"list", "watch", "patch", "create", "delete"},
                     (("",), ("pods/binding", "pods/eviction")): {"create"},
                     (("",), ("events",)): {"create"}}   # the Preempted event on an evicted pod
    # leader election: the Lease (read, created once, replaced at each renewal), in dlsched's namespace only
    lease_role = next(d for d in docs if d["kind"] == "Role")
    assert lease_role["metadata"]["namespace"] == "dlsched"
    assert [(r["apiGroups"], r["resources"], set(r["verbs"])) for r in lease_role["rules"]] == \
        [(["coordination.k8s.io"], ["leases"], {"get", "create", "update"})]
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    assert binding["roleRef"]["name"] == lease_role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == "dlsched"
    # the queue ConfigMap (read) and a Warning event on it, in dlsched's namespace only
    queues = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "dlsched-queues"]
    assert [(r["resources"], set(r["verbs"])) for r in queues[0]["rules"]] == \
        [(["configmaps"], {"get"}), (["events"], {"create"})] and queues[0]["metadata"]["namespace"] == "dlsched"
    assert any(d["kind"] == "RoleBinding" and d["roleRef"]["name"] == "dlsched-queues" for d in docs)


def test_deployment_runs_two_replicas_with_leader_election_on_postgresql():
    from dlsched.cli.serve_ha import check_election

    dep = next(d for d in _docs("deployment.yaml") if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    cmd = container["command"]
    assert cmd[:2] == ["dlsched", "serve"] and "--leader-elect" in cmd
    env = {e["name"]: e["valueFrom"] for e in container["env"]}
    assert env["DLSCHED_DB"]["secretKeyRef"] == {"name": "dlsched-db", "key": "url"}
    assert env["POD_IP"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert "PersistentVolumeClaim" not in {d["kind"] for d in _docs("deployment.yaml")}   # no local store
    # the command line as the kubelet expands it passes serve's own checks
    def arg(flag: str) -> str:
        return cmd[cmd.index(flag) + 1]
    db = arg("--db").replace("$(DLSCHED_DB)", "postgresql+psycopg://dlsched:x@dlsched-postgres:5432/dlsched")
    election = check_election(db, arg("--host"), int(arg("--port")), arg("--lease-name"), "dlsched", "pod-a",
                              arg("--advertise-url").replace("$(POD_IP)", "10.0.0.7"), 10.0, 7.0, 1.0)
    assert election.url == "http://10.0.0.7:8888"
    svc, = _docs("service.yaml")
    assert svc["spec"]["ports"][0]["port"] == int(arg("--port"))
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    postgres = {d["kind"]: d for d in _docs("postgres.yaml")}
    assert postgres["Service"]["spec"]["ports"][0]["port"] == 5432


def test_example_pod_is_a_four_gpu_job_that_reads_its_gpus_from_the_annotation():
    pod, = _docs("example-pod.yaml")
    pod["metadata"].update(uid="u1", namespace="default")
    facts = pod_facts(pod)
    assert facts.gpus == 4 and facts.annotations["dlsched.io/model"] == "resnet50"
    env = pod["spec"]["containers"][0]["env"][0]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['dlsched.io/gpus']"

"""Scheduler mode's node checks (service/nodefit) beside a trivial pass over the same dicts.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_nodefit.py [--nodes 1000] [--pods 100] [--bound 4]
        [--rounds 3] [--json]

The state: ``--nodes`` 8-GPU nodes as the API server returns them (labels, a quarter tainted, one
in 20 cordoned), ``--bound`` pods already bound to each, and ``--pods`` pending one-to-eight-GPU
pods with a nodeSelector, a toleration and a preferred node affinity term. A check is one pod
against one node. Rows:

- ``table``: :class:`NodeTable` built once (nodes and bound pods read), then every pod checked;
  the build time is included. This is how a scheduling pass uses it.
- ``feasible``: the one-pod function, which reads the nodes again for every pod (timed on the
  first 10 pods only; its answers are checked against the table's).
- ``baseline``: a trivial pass: the bound pods' GPUs summed per node once, then for every pod and
  node the GPU count read from the dicts and compared (no quantity parsing, no other rule): about
  the floor of any check over these dicts in Python.

Best of ``--rounds`` (a shared machine drifts; the best is the fairer figure).
"""

from __future__ import annotations

import argparse
import json
import random
import time

from dlsched.service.nodefit import NodeTable, feasible

FEASIBLE_PODS = 10


def make_nodes(n: int, rng: random.Random) -> list[dict]:
    nodes = []
    for i in range(n):
        alloc = {"cpu": "96", "memory": "1000Gi", "ephemeral-storage": "3500Gi", "pods": "110",
                 "nvidia.com/gpu": "8", "hugepages-2Mi": "0"}
        node = {"metadata": {"name": f"node-{i:04d}", "uid": f"u{i}", "resourceVersion": str(100 + i),
                             "labels": {"kubernetes.io/hostname": f"node-{i:04d}", "zone": f"z{i % 4}",
                                        "gpu.example.com/model": rng.choice(("H100", "A100"))}},
                "spec": {}, "status": {"allocatable": alloc, "capacity": dict(alloc),
                                       "conditions": [{"type": "Ready", "status": "True"}]}}
        if i % 4 == 0:
            node["spec"]["taints"] = [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]
        if i % 20 == 7:
            node["spec"]["unschedulable"] = True
        nodes.append(node)
    return nodes


def make_pod(name: str, gpus: int, node: str = "") -> dict:
    spec = {"schedulerName": "dlsched",
            "containers": [{"name": "main", "image": "x", "resources": {
                "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
                "limits": {"nvidia.com/gpu": str(gpus)}}}],
            "initContainers": [{"name": "fetch", "image": "x", "resources": {"requests": {"cpu": "500m"}}}],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "nodeSelector": {"gpu.example.com/model": "H100"},
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In",
                                                                    "values": ["z1", "z2"]}]}}]}}}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def baseline(pods: list[dict], nodes: list[dict], by_node: dict[str, list[dict]]) -> int:
    """Sum each node's bound GPUs once, then for every (pod, node) read the node's GPUs from its
    dict and compare with the pod's request: the same shape of work as the table, one rule only."""
    used = {name: sum(int(b["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]) for b in bound)
            for name, bound in by_node.items()}
    fits = 0
    for p in pods:
        want = int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        for n in nodes:
            fits += int(n["status"]["allocatable"]["nvidia.com/gpu"]) - used.get(n["metadata"]["name"], 0) >= want
    return fits


def best(fn, rounds: int) -> tuple[float, object]:
    """The least CPU time of ``rounds`` runs (process time: one thread, and the machine is shared)."""
    times, out = [], None
    for _ in range(rounds):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--bound", type=int, default=4, help="pods already bound to each node")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for opt in ("nodes", "pods", "rounds"):
        if getattr(a, opt) < 1:
            ap.error(f"--{opt} must be at least 1")
    if a.bound < 0:
        ap.error("--bound must be at least 0")
    rng = random.Random(7)
    nodes = make_nodes(a.nodes, rng)
    by_node = {n["metadata"]["name"]: [make_pod(f"{n['metadata']['name']}-b{j}", 1, n["metadata"]["name"])
                                       for j in range(a.bound)] for n in nodes}
    pods = [make_pod(f"p{i}", rng.choice((1, 1, 2, 4, 8))) for i in range(a.pods)]
    checks = a.pods * a.nodes

    def table_pass() -> int:
        t = NodeTable(nodes, by_node)
        return sum(len(t.feasible(p).nodes) for p in pods)

    few = pods[:FEASIBLE_PODS]    # feasible() reads every node again per pod: a few pods show its rate
    t_build, _ = best(lambda: NodeTable(nodes, by_node), a.rounds)
    t_table, fit_table = best(table_pass, a.rounds)
    t_feas, fit_feas = best(lambda: sum(len(feasible(p, nodes, by_node).nodes) for p in few), a.rounds)
    t_base, _ = best(lambda: baseline(pods, nodes, by_node), a.rounds)
    table = NodeTable(nodes, by_node)
    if fit_feas != sum(len(table.feasible(p).nodes) for p in few):
        raise SystemExit("error: feasible() and NodeTable disagree")
    rows = [("table", t_table, checks), ("  build", t_build, 0), ("feasible", t_feas, len(few) * a.nodes),
            ("baseline", t_base, checks)]
    base_rate = checks / t_base
    result = {"nodes": a.nodes, "pods": a.pods, "bound_per_node": a.bound, "checks": checks,
              "feasible_pairs": fit_table,
              "rows": {name.strip(): {"cpu_seconds": round(t, 4), "checks": n,
                                      **({"checks_per_s": round(n / t)} if n else {})} for name, t, n in rows}}
    if a.json:
        print(json.dumps(result))
        return
    print(f"{a.nodes} nodes x {a.pods} pending pods ({a.bound} bound per node): {checks} checks, "
          f"{fit_table} (pod, node) pairs fit; CPU time, best of {a.rounds}")
    for name, t, n in rows:
        rate = f"{n / t:12,.0f} checks/s  {base_rate / (n / t):6.1f}x baseline's time per check" if n else \
            "(reading the nodes and bound pods, part of the table's time)"
        print(f"  {name:<9} {t * 1000:9.1f} ms  {rate}")


if __name__ == "__main__":
    main()

"""``feasible(pod, nodes, pods_by_node)``: which nodes a pod may go to, and why not the others.

The checks run in kube-scheduler v1.20's filter order: NodeUnschedulable (cordon), TaintToleration
(with NotReady as its condition taints), NodeAffinity (nodeSelector + required affinity), NodePorts,
NodeResourcesFit (the order the real v1.20.2 scheduler's messages show: tests/test_nodefit_k8s.py). ``FitResult.reasons`` lists every check a node fails; the message, like
kube-scheduler's, counts each node's first failing check only. Last, dlsched's own check under
``--gpu-binding envvar-configmap`` ("gpu-binding"): a pod the webhook mutated passes only nodes
whose set-up binds its GPU choice (``gpu_binding/setups.py``: not MIG, not labelled refused/cdi),
so such a node is never nominated and then refused at bind.

:class:`NodeTable` reads the nodes and their pods once (quantities parsed, usage summed), so a
scheduling pass checks P pods against N nodes in O(P x N) node checks plus one read of the bound
pods; ``feasible`` is the one-pod convenience that builds a table per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.service.gpu_binding.setups import fit_reason
from dlsched.service.nodefit.affinity import AFFINITY_MISMATCH, Placement, normalise, placement
from dlsched.service.nodefit.report import fit_message
from dlsched.service.nodefit.resources import (
    PORTS_TAKEN,
    NodeUsage,
    Plan,
    Port,
    SpecError,
    amounts,
    host_ports,
    insufficient,
    obj,
    pod_requests,
    ports_conflict,
    request_plan,
)
from dlsched.service.nodefit.taints import (
    CORDONED,
    Taint,
    Toleration,
    cordon_blocks,
    node_taints,
    taint_reason,
    tolerated,
    tolerations,
)
from dlsched.service.pods import MOVED_CONFIGMAP_ANNOTATION

CHECKS = ("unschedulable", "taints", "affinity", "ports", "resources", "gpu-binding")


@dataclass(slots=True)
class FitResult:
    """The verdict for one pod: the nodes that pass, each other node's reasons, the message."""

    nodes: list[str]
    reasons: dict[str, list[str]]
    message: str
    scores: dict[str, int]                 # preferred node affinity, 0..100, over ``nodes``
    notes: list[str] = field(default_factory=list)   # malformed terms/tolerations, how they were read
    failed_checks: dict[str, list[str]] = field(default_factory=dict)   # node -> names from CHECKS


@dataclass(slots=True)
class NodeEntry:
    """One node as the checks need it (``error``: the node could not be read; it takes no pod)."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    unschedulable: bool
    taints: tuple[Taint, ...]
    usage: NodeUsage
    error: str = ""
    gpu_reason: str = ""   # --gpu-binding: why a mutated pod's GPU choice cannot bind here ('' : it can)


def _label_map(meta: dict) -> dict[str, str]:
    labels = obj(meta.get("labels"), "metadata.labels")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise SpecError("metadata.labels must map strings to strings")
    return labels


def read_node(node: object, pods: object, index: int) -> NodeEntry:
    """A node and its bound pods; unreadable data becomes ``error`` (the node is then refused)."""
    name = f"nodes[{index}]"
    try:
        node = obj(node, name)
        meta = obj(node.get("metadata"), "metadata")
        if isinstance(meta.get("name"), str) and meta["name"]:
            name = meta["name"]
        else:
            raise SpecError("metadata.name is missing")
        status = obj(node.get("status"), "status")
        alloc = amounts(status.get("allocatable", status.get("capacity")), "status.allocatable")
        entry = NodeEntry(name, _label_map(meta), alloc, bool(obj(node.get("spec"), "spec").get("unschedulable")),
                          node_taints(node), NodeUsage())
        if pods is not None and not isinstance(pods, list):
            raise SpecError("its pod list is not a list")
        for i, p in enumerate(pods or ()):
            entry.usage.add(p, f"pods[{i}]")
        return entry
    except SpecError as e:
        return NodeEntry(name, {}, {}, False, (), NodeUsage(), f"node data unreadable ({e})")


@dataclass(slots=True)
class PodView:
    """A pod compiled once for all nodes; ``error``: its spec cannot be read (no node fits it)."""

    uid: str | None
    request: dict[str, int]
    ports: list[Port]
    place: Placement | None
    tols: tuple[Toleration, ...]
    notes: list[str]
    error: str = ""
    plan: Plan = ()
    cordon_ok: bool = False                                         # tolerates unschedulable:NoSchedule
    taint_ok: dict[Taint, bool] = field(default_factory=dict)      # memo: nodes share their taints
    bound_gpus: bool = False   # the GPU-binding webhook mutated it: only nodes where the choice binds


def read_pod(pod: object, gpu_binding: bool = False) -> PodView:
    """``gpu_binding`` (``--gpu-binding envvar-configmap``): a pod the webhook mutated is kept off
    the nodes whose set-up cannot bind dlsched's GPU choice (the "gpu-binding" check)."""
    notes: list[str] = []
    try:
        pod = obj(pod, "pod")
        meta = obj(pod.get("metadata"), "metadata")
        uid = meta.get("uid")
        spec = obj(pod.get("spec"), "spec")
        request, tols = pod_requests(spec), tolerations(spec, notes)
        bound = gpu_binding and MOVED_CONFIGMAP_ANNOTATION in obj(meta.get("annotations"), "metadata.annotations")
        return PodView(uid if isinstance(uid, str) and uid else None, request, host_ports(spec),
                       placement(spec, notes), tols, notes, plan=request_plan(request),
                       cordon_ok=not cordon_blocks(True, tols), bound_gpus=bound)
    except SpecError as e:
        return PodView(None, {}, [], None, (), notes, f"pod spec is invalid ({e})")


class NodeTable:
    """Nodes and bound pods read once, for many pods' checks; ``assume`` counts a new bind."""

    def __init__(self, nodes: list[dict], pods_by_node: dict[str, list[dict]], gpu_binding: bool = False) -> None:
        self.gpu_binding = gpu_binding   # the "gpu-binding" check is made (read_pod's doc)
        self.entries: list[NodeEntry] = []
        self.notes: list[str] = []
        if not isinstance(nodes, list):
            self.notes.append(f"the node list is a {type(nodes).__name__}, not a list: no node is checked")
        if not isinstance(pods_by_node, dict):
            self.notes.append(f"pods_by_node is a {type(pods_by_node).__name__}, not a dict: no bound pod is counted")
            pods_by_node = {}
        seen: set[str] = set()
        for i, n in enumerate(nodes if isinstance(nodes, list) else ()):
            name = n.get("metadata", {}).get("name") if isinstance(n, dict) and isinstance(n.get("metadata"), dict) \
                else None
            entry = read_node(n, pods_by_node.get(name) if isinstance(name, str) else None, i)
            if gpu_binding and not entry.error:
                entry.gpu_reason = fit_reason(n)
            if entry.name in seen:
                self.notes.append(f"node {entry.name!r} is listed twice: the later entry is left out")
                continue
            seen.add(entry.name)
            self.entries.append(entry)
        self._by_name = {e.name: e for e in self.entries}

    def assume(self, node: str, pod: dict) -> None:
        """Count ``pod`` on ``node`` (a bind just posted, before the watch shows it); a node the
        table does not hold is a KeyError (the caller chose it from this table's answers)."""
        entry = self._by_name[node]
        try:
            entry.usage.add(pod, "assumed pod")
        except SpecError as e:
            entry.error = f"node data unreadable ({e})"

    def check(self, view: PodView, entry: NodeEntry) -> list[tuple[str, list[str]]]:
        """Every failing check of one node for one pod: ``[(check, reasons)]`` in filter order."""
        if view.error:      # a pod that cannot be read is judged on nothing else
            return [("pod", [view.error])]
        if entry.error:
            return [("node", [entry.error])]
        failed: list[tuple[str, list[str]]] = []
        if entry.unschedulable and not view.cordon_ok:
            failed.append(("unschedulable", [CORDONED]))
        for taint in entry.taints:
            ok = view.taint_ok.get(taint)
            if ok is None:
                ok = view.taint_ok[taint] = tolerated(view.tols, *taint)
            if not ok:
                failed.append(("taints", [taint_reason(taint[0], taint[1])]))
                break
        if view.place is not None and not view.place.required(entry.labels, entry.name):
            failed.append(("affinity", [AFFINITY_MISMATCH]))
        if view.ports and ports_conflict(view.ports, entry.usage, view.uid):
            failed.append(("ports", [PORTS_TAKEN]))
        own = view.uid is not None and view.uid in entry.usage.uids
        short = insufficient(view.plan, entry.allocatable, entry.usage, view.request if own else None)
        if short:
            failed.append(("resources", short))
        if view.bound_gpus and entry.gpu_reason:
            failed.append(("gpu-binding", [entry.gpu_reason]))
        return failed

    def feasible(self, pod: object) -> FitResult:
        """Check ``pod`` against every node of the table."""
        view = read_pod(pod, self.gpu_binding)
        fits: list[str] = []
        reasons: dict[str, list[str]] = {}
        first: dict[str, list[str]] = {}
        checks: dict[str, list[str]] = {}
        for entry in self.entries:
            failed = self.check(view, entry)
            if not failed:
                fits.append(entry.name)
                continue
            reasons[entry.name] = [r for _, rs in failed for r in rs]
            first[entry.name] = failed[0][1]
            checks[entry.name] = [c for c, _ in failed]
        raw = {n: view.place.raw_score(self._by_name[n].labels, n) for n in fits} if view.place else {}
        scores = normalise(raw) if raw else dict.fromkeys(fits, 0)
        return FitResult(fits, reasons, fit_message(len(self.entries), first), scores,
                         self.notes + view.notes, checks)


def group_by_node(pods: list[dict]) -> dict[str, list[dict]]:
    """``pods_by_node`` from a pod list (a list or watch cache): the pods with a ``spec.nodeName``,
    by that name; terminated ones are kept (the checks leave them out, so nothing is lost here)."""
    out: dict[str, list[dict]] = {}
    for p in pods if isinstance(pods, list) else ():
        spec = p.get("spec") if isinstance(p, dict) else None
        name = spec.get("nodeName") if isinstance(spec, dict) else None
        if isinstance(name, str) and name:
            out.setdefault(name, []).append(p)
    return out


def feasible(pod: dict, nodes: list[dict], pods_by_node: dict[str, list[dict]],
             gpu_binding: bool = False) -> FitResult:
    """The nodes ``pod`` may go to (see the module doc); never raises on malformed input.
    ``gpu_binding``: also the "gpu-binding" check (:func:`read_pod`)."""
    return NodeTable(nodes, pods_by_node, gpu_binding).feasible(pod)

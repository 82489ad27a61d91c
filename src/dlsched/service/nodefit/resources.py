"""Requests against allocatable: kube-scheduler's NodeResourcesFit (and NodePorts) on API dicts.

A pod requests the sum of its containers' requests, at least each init container's (they run one
at a time, before the others), plus ``spec.overhead`` (the RuntimeClass's share). A node offers its
``status.allocatable`` minus that same sum over every pod bound to it that has not terminated,
whichever scheduler bound it. CPU is compared in millicores, the rest in whole units, each
container rounded up as ``Quantity.MilliValue()`` / ``Value()`` do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.service.nodefit.quantity import QuantityError, milli_value, parse_quantity, whole_value

CPU, MEMORY, EPHEMERAL, PODS = "cpu", "memory", "ephemeral-storage", "pods"
TERMINATED = ("Succeeded", "Failed")   # kube-scheduler's pod informer leaves these out
TOO_MANY_PODS = "Too many pods"
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"


class SpecError(ValueError):
    """A pod or node field that cannot be read (the message names the field)."""


def obj(value: object, where: str) -> dict:
    """``value`` as a dict; absent (None) is empty; anything else is a :class:`SpecError`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{where} is not an object")
    return value


def items(value: object, where: str) -> list:
    """``value`` as a list; absent (None) is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(f"{where} is not a list")
    return value


def amounts(resources: object, where: str) -> dict[str, int]:
    """A ResourceList (``{"cpu": "500m", ...}``) in comparison units: millicores for cpu."""
    out: dict[str, int] = {}
    for name, raw in obj(resources, where).items():
        if not isinstance(name, str) or not name:
            raise SpecError(f"{where} has a resource name that is not a string")
        try:
            q = parse_quantity(raw)
        except QuantityError as e:
            raise SpecError(f"{where}.{name}: {e}") from None
        if q < 0:
            raise SpecError(f"{where}.{name}: {raw!r} is negative")
        out[name] = milli_value(q) if name == CPU else whole_value(q)
    return out


def pod_requests(spec: dict) -> dict[str, int]:
    """What a pod needs on a node (``pods`` not included: every pod takes one slot)."""
    total: dict[str, int] = {}
    for i, c in enumerate(items(spec.get("containers"), "spec.containers")):
        where = f"spec.containers[{i}]"
        req = amounts(obj(obj(c, where).get("resources"), f"{where}.resources").get("requests"),
                      f"{where}.resources.requests")
        for name, v in req.items():
            total[name] = total.get(name, 0) + v
    for i, c in enumerate(items(spec.get("initContainers"), "spec.initContainers")):
        where = f"spec.initContainers[{i}]"
        req = amounts(obj(obj(c, where).get("resources"), f"{where}.resources").get("requests"),
                      f"{where}.resources.requests")
        for name, v in req.items():
            if v > total.get(name, 0):
                total[name] = v
    for name, v in amounts(spec.get("overhead"), "spec.overhead").items():
        total[name] = total.get(name, 0) + v
    total.pop(PODS, None)
    return total


Port = tuple[str, str, int]   # (host IP, protocol, host port)


def host_ports(spec: dict) -> list[Port]:
    """The host ports a pod's containers claim (init containers claim none, as in kube-scheduler)."""
    out: list[Port] = []
    for i, c in enumerate(items(spec.get("containers"), "spec.containers")):
        for j, p in enumerate(items(obj(c, f"spec.containers[{i}]").get("ports"), f"spec.containers[{i}].ports")):
            p = obj(p, f"spec.containers[{i}].ports[{j}]")
            port = p.get("hostPort") or 0
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise SpecError(f"spec.containers[{i}].ports[{j}].hostPort: {port!r} is not a port number")
            ip, proto = p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP"
            if not isinstance(ip, str) or not isinstance(proto, str):
                raise SpecError(f"spec.containers[{i}].ports[{j}]: hostIP and protocol must be strings")
            if port:
                out.append((ip, proto, port))
    return out


@dataclass(slots=True)
class NodeUsage:
    """What the pods bound to one node take from it."""

    requested: dict[str, int] = field(default_factory=dict)
    count: int = 0
    uids: set[str] = field(default_factory=set)
    ports: dict[tuple[str, int], dict[str, set[str]]] = field(default_factory=dict)  # (proto, port) -> ip -> uids

    def add(self, pod: object, where: str) -> None:
        """Count one bound pod (terminated ones take nothing). Raises :class:`SpecError`."""
        pod = obj(pod, where)
        if obj(pod.get("status"), f"{where}.status").get("phase") in TERMINATED:
            return
        spec = obj(pod.get("spec"), f"{where}.spec")
        try:
            req, ports = pod_requests(spec), host_ports(spec)
        except SpecError as e:
            raise SpecError(f"{where} {e}") from None
        uid = str(obj(pod.get("metadata"), f"{where}.metadata").get("uid") or "")
        for name, v in req.items():
            self.requested[name] = self.requested.get(name, 0) + v
        self.count += 1
        if uid:
            self.uids.add(uid)
        for ip, proto, port in ports:
            self.ports.setdefault((proto, port), {}).setdefault(ip, set()).add(uid)


Plan = tuple[tuple[str, int, str], ...]   # (resource, amount, reason) in kube-scheduler's order


def request_plan(request: dict[str, int]) -> Plan:
    """The comparisons a pod's request needs, made once per pod: cpu, memory, ephemeral-storage,
    then every other resource by name; empty for a pod that requests nothing (kube-scheduler then
    checks the pod count only, so an overcommitted node does not refuse it)."""
    core = (CPU, MEMORY, EPHEMERAL)
    if all(request.get(n, 0) == 0 for n in core) and all(n in core for n in request):
        return ()
    rest = sorted(n for n in request if n not in core)
    return tuple((n, request.get(n, 0), f"Insufficient {n}") for n in (*core, *rest))


def insufficient(plan: Plan, allocatable: dict[str, int], usage: NodeUsage,
                 self_request: dict[str, int] | None = None) -> list[str]:
    """kube-scheduler's reasons, in its order: pods, cpu, memory, ephemeral-storage, then the rest.

    ``self_request`` is the pod's own share when it is already counted in ``usage`` (an assumed
    pod being re-checked): it is taken back out so the pod does not compete with itself.
    """
    own = self_request is not None
    reasons = [TOO_MANY_PODS] if usage.count - own + 1 > allocatable.get(PODS, 0) else []
    used = usage.requested
    if own:
        used = {n: v - self_request.get(n, 0) for n, v in used.items()}
    for name, amount, reason in plan:
        if allocatable.get(name, 0) < amount + used.get(name, 0):
            reasons.append(reason)
    return reasons


def ports_conflict(wanted: list[Port], usage: NodeUsage, uid: str | None) -> bool:
    """NodePorts: a wanted (IP, protocol, port) is taken on the node; 0.0.0.0 clashes with any IP.
    ``uid`` is the checked pod's own (its ports, when it is already counted, are no clash)."""
    for ip, proto, port in wanted:
        for other_ip, uids in usage.ports.get((proto, port), {}).items():
            if uids - {uid} and (ip == "0.0.0.0" or other_ip == "0.0.0.0" or ip == other_ip):
                return True
    return False

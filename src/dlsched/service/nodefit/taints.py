"""Taints and tolerations, cordoned and NotReady nodes (TaintToleration, NodeUnschedulable).

Only NoSchedule and NoExecute taints keep a pod off a node; PreferNoSchedule does not, and a
toleration's ``tolerationSeconds`` only matters for eviction. A node whose Ready condition is
False or Unknown carries, for this check, the taints the node lifecycle controller would give it
(``node.kubernetes.io/not-ready`` / ``unreachable``, NoSchedule and NoExecute), so a pod that
tolerates them (a DaemonSet's) may still go there, as on a cluster with that controller.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.service.nodefit.resources import SpecError, items, obj

FILTER_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
CORDONED = "node(s) were unschedulable"


def taint_reason(key: str, value: str) -> str:
    """kube-scheduler v1.20's words for the first taint a pod does not tolerate."""
    return f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """``Toleration.ToleratesTaint``: an empty effect or key matches any; Exists ignores value."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == value
        return self.operator == "Exists"


def tolerations(spec: dict, notes: list[str]) -> tuple[Toleration, ...]:
    """A pod's tolerations; a malformed one is left out (the pod tolerates less) with a note."""
    out = []
    for i, raw in enumerate(items(spec.get("tolerations"), "spec.tolerations")):
        fields = raw if isinstance(raw, dict) else None
        vals = [fields.get(k) or "" for k in ("key", "operator", "value", "effect")] if fields else []
        if not fields or not all(isinstance(v, str) for v in vals):
            notes.append(f"spec.tolerations[{i}] is malformed: it tolerates nothing")
            continue
        out.append(Toleration(*vals))
    return tuple(out)


def tolerated(tols: tuple[Toleration, ...], key: str, value: str, effect: str) -> bool:
    return any(t.tolerates(key, value, effect) for t in tols)


Taint = tuple[str, str, str]   # (key, value, effect)


def node_taints(node: dict) -> tuple[Taint, ...]:
    """The node's filtering taints, with the ones its Ready condition implies. Raises SpecError."""
    out: list[Taint] = []
    for i, raw in enumerate(items(obj(node.get("spec"), "spec").get("taints"), "spec.taints")):
        raw = obj(raw, f"spec.taints[{i}]")
        key, value, effect = raw.get("key"), raw.get("value") or "", raw.get("effect")
        if not isinstance(key, str) or not key or not isinstance(value, str) or not isinstance(effect, str):
            raise SpecError(f"spec.taints[{i}] needs a string key, value and effect")
        if effect in FILTER_EFFECTS:
            out.append((key, value, effect))
    implied = _ready_taint(node)
    if implied:
        out += [(implied, "", e) for e in FILTER_EFFECTS if not any(k == implied and f == e for k, _, f in out)]
    return tuple(out)


def _ready_taint(node: dict) -> str:
    """The condition taint of a node whose Ready condition is not True; '' when Ready or unreported.

    A node with no Ready condition at all (a node object no kubelet ever reported on, as the
    kubelet-less test clusters have) passes: kube-scheduler does not read conditions either.
    """
    for i, c in enumerate(items(obj(node.get("status"), "status").get("conditions"), "status.conditions")):
        c = obj(c, f"status.conditions[{i}]")
        if c.get("type") == "Ready":
            status = c.get("status")
            return "" if status == "True" else UNREACHABLE_TAINT if status == "Unknown" else NOT_READY_TAINT
    return ""


def first_untolerated(taints: tuple[Taint, ...], tols: tuple[Toleration, ...]) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first filtering taint no toleration covers."""
    for t in taints:
        if not tolerated(tols, *t):
            return t
    return None


def cordon_blocks(unschedulable: bool, tols: tuple[Toleration, ...]) -> bool:
    """A cordoned node refuses the pod unless it tolerates the unschedulable:NoSchedule taint."""
    return unschedulable and not tolerated(tols, UNSCHEDULABLE_TAINT, "", "NoSchedule")

"""What a pod asks for that scheduler mode's node checks do not evaluate.

A pod that uses any of these must not be placed as if it did not: the driver tells the user
(event, condition) and leaves the pod pending. Each entry names the field and what goes unchecked.
"""

from __future__ import annotations

# Volume sources whose scheduling constraints kube-scheduler checks and dlsched does not:
# a PVC's PersistentVolume node affinity and binding (VolumeBinding, VolumeZone), per-node attach
# limits (NodeVolumeLimits, EBS/GCE/Azure limits), single-writer disk conflicts (VolumeRestrictions).
_VOLUMES = {
    "persistentVolumeClaim": "a PersistentVolumeClaim (its volume's node affinity, binding and zone)",
    "ephemeral": "a generic ephemeral volume (a PersistentVolumeClaim: node affinity, binding, zone)",
    "csi": "an inline CSI volume (the node's attach limit)",
    "gcePersistentDisk": "a GCE persistent disk (zone, attach limit, disk conflicts)",
    "awsElasticBlockStore": "an AWS EBS volume (zone, attach limit, disk conflicts)",
    "azureDisk": "an Azure disk (zone, attach limit)",
    "cinder": "a Cinder volume (attach limit)",
    "rbd": "an RBD volume (disk conflicts)",
    "iscsi": "an iSCSI volume (disk conflicts)",
}


def unsupported(pod: object) -> list[str]:
    """Each scheduling input of ``pod`` this mode does not evaluate, one line each; [] when none."""
    if not isinstance(pod, dict):
        return ["the pod is not a JSON object: nothing about it can be checked"]
    spec = pod.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return ["spec is not an object: nothing about the pod can be checked"]
    out = []
    aff = spec.get("affinity")
    if isinstance(aff, dict):
        for field, what in (("podAffinity", "inter-pod affinity"), ("podAntiAffinity", "inter-pod anti-affinity")):
            part = aff.get(field)
            if part:
                kinds = [k.split("During")[0] for k in ("requiredDuringSchedulingIgnoredDuringExecution",
                                                        "preferredDuringSchedulingIgnoredDuringExecution")
                         if isinstance(part, dict) and part.get(k)] or ["malformed"]
                out.append(f"{what} (spec.affinity.{field}, {' and '.join(kinds)}) is not evaluated")
    elif aff is not None:
        out.append("spec.affinity is not an object: cannot tell what it asks for")
    if spec.get("topologySpreadConstraints"):
        out.append("topology spread constraints (spec.topologySpreadConstraints) are not evaluated")
    vols = spec.get("volumes")
    if vols is not None and not isinstance(vols, list):
        out.append("spec.volumes is not a list: cannot tell which volumes need node checks")
    for i, v in enumerate(vols if isinstance(vols, list) else ()):
        if not isinstance(v, dict):
            out.append(f"spec.volumes[{i}] is not an object: cannot tell whether it needs node checks")
            continue
        for source, what in _VOLUMES.items():
            if v.get(source) is not None:
                out.append(f"volume {v.get('name', i)!r} uses {what}: not evaluated")
    return out

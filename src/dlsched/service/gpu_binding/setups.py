"""Node set-ups where a chosen GPU index cannot reach the container through
``NVIDIA_VISIBLE_DEVICES`` (the table in docs/service.md): read from the node object.

* MIG: the device plugin advertises MIG devices (``nvidia.com/mig-*`` resources, or GPU feature
  discovery's ``nvidia.com/mig.strategy`` label other than ``none``): a whole-GPU index names no
  MIG slice.
* the operator's label ``dlsched.io/gpu-binding`` on the node: ``envvar`` (the default: the
  toolkit honours the variable from unprivileged containers), ``refused`` (a hardened host:
  ``accept-nvidia-visible-devices-envvar-when-unprivileged = false``, Bottlerocket's default,
  volume-mounts only), ``cdi`` (CDI-only runtime that ignores the variable), ``device-plugin``
  (a HAMi-style plugin reads the scheduler's annotations itself: no env var needed, none written).
"""

from __future__ import annotations

SETUP_LABEL = "dlsched.io/gpu-binding"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
REASONS = {
    "refused": "the node refuses NVIDIA_VISIBLE_DEVICES from unprivileged containers (labelled "
               f"{SETUP_LABEL}=refused: a hardened host, volume-mounts only)",
    "cdi": f"the node's runtime takes GPUs from CDI devices only (labelled {SETUP_LABEL}=cdi)",
}


def setup_kind(node: dict | None) -> str:
    """Which unbindable set-up ``node`` is: '' (the choice binds, or the node is unknown),
    ``refused``, ``cdi``, ``mig`` or ``bad-label``."""
    if not node:
        return ""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    labels = meta.get("labels") or {}
    setup = str(labels.get(SETUP_LABEL) or "envvar")
    if setup in REASONS:
        return setup
    if setup not in ("envvar", "device-plugin"):
        return "bad-label"
    if any(str(r).startswith("nvidia.com/mig-") for r in (status.get("allocatable") or {})):
        return "mig"
    return "mig" if str(labels.get(MIG_STRATEGY_LABEL) or "none") != "none" else ""


# The node checks' words (service/nodefit: counted over nodes, as kube-scheduler's reasons are)
FIT_REASONS = {
    "refused": f"node(s) cannot bind dlsched's GPU choice ({SETUP_LABEL}=refused: NVIDIA_VISIBLE_DEVICES refused)",
    "cdi": f"node(s) cannot bind dlsched's GPU choice ({SETUP_LABEL}=cdi: CDI devices only)",
    "mig": "node(s) cannot bind dlsched's GPU choice (MIG-partitioned GPUs)",
    "bad-label": f"node(s) cannot bind dlsched's GPU choice ({SETUP_LABEL} is none of envvar, refused, cdi, "
                 "device-plugin)",
}


def fit_reason(node: dict | None) -> str:
    """The node-check reason for a node where a mutated pod's GPU choice cannot bind ('' : it can)."""
    kind = setup_kind(node)
    return FIT_REASONS[kind] if kind else ""


def unbindable(node: dict | None) -> str:
    """Why dlsched's GPU choice cannot bind on ``node`` ('' when it can, or the node is unknown)."""
    kind = setup_kind(node)
    if kind in REASONS:
        return REASONS[kind]
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    if kind == "bad-label":
        return f"the node's label {SETUP_LABEL}={labels.get(SETUP_LABEL)!r} is none of envvar, refused, cdi, device-plugin"
    if kind == "mig":
        mig = [r for r in ((node or {}).get("status") or {}).get("allocatable") or {} if str(r).startswith("nvidia.com/mig-")]
        strategy = str(labels.get(MIG_STRATEGY_LABEL) or "none")
        what = f"resources {', '.join(sorted(mig))}" if mig else f"{MIG_STRATEGY_LABEL}={strategy}"
        return f"the node's GPUs are MIG-partitioned ({what}): a GPU index names no MIG device"
    return ""


def plugin_binds(node: dict | None) -> bool:
    """The node's device plugin reads dlsched's annotation itself (no env var is written)."""
    return bool(node) and ((node.get("metadata") or {}).get("labels") or {}).get(SETUP_LABEL) == "device-plugin"

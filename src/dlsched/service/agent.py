"""The node agent: what a node's GPUs hold and how busy they are, posted to the service.

A source reports the node's GPU inventory (name, memory), its topology (``nvidia-smi topo -m``
through :mod:`dlsched.topology.smi`) and, each round, per-GPU utilisation and memory plus each
pod's share. Two sources:

* :class:`NvmlSource`: NVML through ``nvidia-ml-py`` (optional); a process is attributed to a
  pod through its cgroup (``/proc/PID/cgroup`` names the pod UID under kubepods).
* :class:`FakeSource`: ``--fake-gpus N --seed S`` for machines without GPUs. The pods are those
  the service says run on this node; each pod gets a seeded steady utilisation and memory (a
  function of the seed and the pod UID, so a rerun reads the same) plus seeded noise per round.

The agent posts ``{node, pods: [{uid, gpu_util, gpu_mem_mib}], gpus: [...]}`` to
``POST /api/v1/observations`` with the operator token. Utilisation is in **percent (0-100)**
everywhere -- NVML's own unit, the predictors' and ffd-util's (``FULL_UTIL = 100``) -- so a
reading replaces a prediction as it is (issue 22: fractions made ffd-util co-locate past 100 %).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import urllib.request
from dataclasses import asdict, dataclass, field

POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass
class GpuInfo:
    """One GPU as the agent saw it in one round."""

    index: int
    name: str
    memory_total_mib: float
    memory_used_mib: float = 0.0
    util: float = 0.0                        # percent, 0-100
    pods: dict[str, float] = field(default_factory=dict)   # pod uid -> memory MiB on this GPU


@dataclass
class Reading:
    """One round of a node: its GPUs, and per pod its utilisation (percent, summed over its GPUs and
    averaged) and memory (MiB, the most it uses on any one GPU: what must fit on a GPU)."""

    node: str
    gpus: list[GpuInfo]
    pods: dict[str, tuple[float, float]]     # uid -> (util, mem MiB)
    topology: dict | None = None
    devices: dict[str, tuple[str, ...]] | None = None   # reservation pod -> device IDs (read_devices)

    def body(self) -> dict:
        out = {"node": self.node,
               "pods": [{"uid": uid, "gpu_util": round(u, 2), "gpu_mem_mib": round(m, 1)}
                        for uid, (u, m) in sorted(self.pods.items())],
               "gpus": [asdict(g) for g in self.gpus], "topology": self.topology}
        if self.devices is not None:
            out["devices"] = {name: list(ids) for name, ids in sorted(self.devices.items())}
        return out


def read_devices(namespace: str, socket: str, read=None) -> dict[str, tuple[str, ...]]:
    """The device IDs the kubelet gave dlsched's reservation pods on this node (``namespace``:
    the service's ``--reservation-namespace``), from its PodResources API; ``read`` is
    ``identity.read_kubelet`` unless a test passes the kubelet's answer. RuntimeError: why not."""
    from dlsched.service.gpu_binding.identity import read_kubelet, reservation_devices

    return reservation_devices((read or read_kubelet)(socket), namespace)


def smi_topology() -> dict | None:
    """``nvidia-smi topo -m`` parsed (GPU names, link codes, sockets); None without nvidia-smi."""
    from dlsched.topology.smi import TopoParseError, parse_topo_matrix

    try:
        text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20,
                              check=True).stdout
        topo = parse_topo_matrix(text)
    except (OSError, subprocess.SubprocessError, TopoParseError):
        return None
    return {"gpus": topo.gpus, "links": topo.links, "sockets": topo.sockets()}


def _unit(seed: int, *parts: str) -> float:
    """A number in [0, 1) fixed by the seed and the parts (stable across runs and machines)."""
    digest = hashlib.sha256(":".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FakeSource:
    """``n`` GPUs of ``memory_mib`` each and a seeded utilisation model of the pods placed on them."""

    def __init__(self, n: int, seed: int = 0, memory_mib: float = 32768.0, noise: float = 2.0,
                 mem_fraction: tuple[float, float] = (0.15, 0.6)) -> None:
        if n < 1:
            raise ValueError(f"--fake-gpus must be >= 1, got {n}")
        self.n, self.seed, self.memory_mib, self.noise = n, seed, memory_mib, noise
        self.mem_fraction = mem_fraction
        self.rng = random.Random(seed)

    def steady(self, uid: str) -> tuple[float, float]:
        """The pod's steady utilisation (percent) and memory (MiB): fixed by seed and UID."""
        lo, hi = self.mem_fraction
        util = 30.0 + 65.0 * _unit(self.seed, uid, "util")
        mem = self.memory_mib * (lo + (hi - lo) * _unit(self.seed, uid, "mem"))
        return util, mem

    def read(self, node: str, placed: dict[str, list[int]]) -> Reading:
        """One round, given which pod holds which GPU indices (from the service)."""
        gpus = [GpuInfo(i, "Fake GPU", self.memory_mib) for i in range(self.n)]
        pods = {}
        for uid, indices in sorted(placed.items()):
            util, mem = self.steady(uid)
            util = min(max(util + self.rng.gauss(0.0, self.noise), 0.0), 100.0)
            for i in indices:
                if 0 <= i < self.n:
                    g = gpus[i]
                    g.pods[uid] = mem
                    g.memory_used_mib += mem
                    g.util = min(g.util + util, 100.0)
            pods[uid] = (util, mem)
        return Reading(node, gpus, pods, None)


class NvmlSource:
    """Real GPUs through NVML (``pip install 'dlsched[agent]'``, which brings ``nvidia-ml-py``); pods found through process cgroups."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise RuntimeError("NVML needs nvidia-ml-py (pip install 'dlsched[agent]'), or use --fake-gpus N") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise RuntimeError(f"NVML could not start (no NVIDIA driver?): {exc}; use --fake-gpus N") from None
        self.nvml = pynvml
        self.count = pynvml.nvmlDeviceGetCount()

    @staticmethod
    def pod_of(pid: int) -> str | None:
        try:
            with open(f"/proc/{pid}/cgroup", encoding="utf-8") as fh:
                m = POD_UID.search(fh.read())
        except OSError:
            return None
        return m.group(1).replace("_", "-") if m else None

    def read(self, node: str, placed: dict[str, list[int]] | None = None) -> Reading:
        nv = self.nvml
        gpus, per_pod = [], {}
        for i in range(self.count):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            util = nv.nvmlDeviceGetUtilizationRates(h)
            g = GpuInfo(i, name if isinstance(name, str) else name.decode(), mem.total / 2**20, mem.used / 2**20,
                        float(util.gpu))   # NVML reports percent, the service's unit
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError:
                procs = []
            for p in procs:
                used = (p.usedGpuMemory or 0) / 2**20
                uid = self.pod_of(p.pid) or f"pid-{p.pid}"
                g.pods[uid] = g.pods.get(uid, 0.0) + used
            for uid, used in g.pods.items():
                u, m, k = per_pod.get(uid, (0.0, 0.0, 0))
                # a GPU's utilisation is split among its pods by their memory share (NVML has no
                # per-process utilisation counter on most drivers)
                share = used / max(sum(g.pods.values()), 1e-9)
                per_pod[uid] = (u + g.util * share, max(m, used), k + 1)
            gpus.append(g)
        pods = {uid: (u / k, m) for uid, (u, m, k) in per_pod.items()}
        return Reading(node, gpus, pods, smi_topology())


def placed_on(service_url: str, node: str) -> dict[str, list[int]]:
    """Pod UID -> GPU indices the service placed on ``node`` (what the fake source models)."""
    with urllib.request.urlopen(f"{service_url}/api/v1/state", timeout=10) as resp:
        state = json.loads(resp.read())
    for n in state.get("nodes", []):
        if n.get("name") == node:
            return {p["uid"]: list(p["gpus"]) for p in n.get("pods", []) if p.get("state") == "running"}
    return {}


def post(service_url: str, token: str, reading: Reading) -> dict:
    """Send one round; the service's answer counts what happened to each reading."""
    data = json.dumps(reading.body()).encode()
    req = urllib.request.Request(f"{service_url}/api/v1/observations", data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def run_round(source, service_url: str, token: str, node: str) -> dict:
    """Read the node once and post it; returns the service's answer."""
    placed = placed_on(service_url, node)
    reading = source.read(node, placed)
    return post(service_url, token, reading)

"""A real Kubernetes control plane on 127.0.0.1 for the service's end-to-end tests.

etcd (Debian's ``etcd-server``), kube-apiserver and kube-scheduler v1.20.2 (gzipped in
``../shared/k8s/bin``, unpacked into a temporary directory) are started on free ports and stopped
by PID. The scheduler is configured (``kubescheduler.config.k8s.io/v1beta1``) with dlsched as
its extender at a URL the caller gives. No kubelet: nodes are plain API objects.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

TOKEN = "dlsched-test-admin-token"
REPLICAS = ("replica-a", "replica-b")   # users with their own tokens: the audit log tells their writes apart


def replica_token(name: str) -> str:
    """The bearer token of user ``name`` (one of :data:`REPLICAS`, admins too): an audit event's
    ``user.username`` names the replica whatever User-Agent its version sends."""
    return f"dlsched-test-{name}-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_reason(k8s_dir: Path) -> str | None:
    """Why the control plane cannot start here (None when it can)."""
    if not (k8s_dir / "bin/kube-apiserver.gz").is_file():
        return f"{k8s_dir}/bin/kube-apiserver.gz is absent (../shared/k8s not present)"
    if shutil.which("etcd") is None:
        return "etcd is not installed (apt-get install -y etcd-server)"
    if shutil.which("openssl") is None:
        return "openssl is not installed"
    return None


@dataclass
class ControlPlane:
    """Handles of a running control plane: the API server URL, the admin token, the processes."""

    workdir: Path
    api_url: str = ""
    token: str = TOKEN
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    scheduler_port: int = 0

    # -- HTTP helpers (tests talk to the API server directly) --------------------------
    def request(self, method: str, path: str, body: dict | None = None, content_type: str = "application/json"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decode(exc.read())

    def kubeconfig(self) -> Path:
        """A kubeconfig file for the admin token (for the official client)."""
        path = self.workdir / "kubeconfig.json"
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.api_url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }
        path.write_text(json.dumps(cfg))
        return path

    # -- life cycle --------------------------------------------------------------------
    def stop(self) -> None:
        for name in ("kube-scheduler", "kube-apiserver", "etcd"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def _decode(raw: bytes):
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")


def _spawn(cp: ControlPlane, name: str, argv: list[str]) -> None:
    out = open(cp.workdir / f"{name}.log", "wb")  # noqa: SIM115  (the process writes it until stopped)
    cp.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cp.workdir)


def _wait(cp: ControlPlane, name: str, probe, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cp.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited with {cp.procs[name].returncode}:\n{cp.log(name)}")
        try:
            if probe():
                return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{name} not ready after {timeout} s:\n{cp.log(name)}")


def _http_ok(url: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
        return resp.status == 200


def scheduler_config(extender_url: str, kubeconfig: Path, cache_capable: bool = False,
                     qps: float | None = None) -> dict:
    """The v1beta1 KubeSchedulerConfiguration registering dlsched as the extender (``qps``: the
    scheduler's API client rate, its default 50/s with bursts of 100 when None; ``extender_url``
    '': kube-scheduler alone, no extender)."""
    conn: dict = {"kubeconfig": str(kubeconfig)}
    extenders = [] if not extender_url else [{
        "urlPrefix": extender_url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
        "bindVerb": "bind", "weight": 1, "enableHTTPS": False, "nodeCacheCapable": cache_capable,
        "ignorable": False, "httpTimeout": "10s",
        "managedResources": [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}],
    }]
    if qps is not None:
        conn.update(qps=qps, burst=int(2 * qps))
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": conn,
        "leaderElection": {"leaderElect": False},
        # A pod dlsched keeps queued fails filtering and backs off; short back-offs keep the tests fast
        # (the default grows to 10 s).
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
        "healthzBindAddress": f"127.0.0.1:{free_port()}",
        "metricsBindAddress": f"127.0.0.1:{free_port()}",
        # dlsched decides which pods run: kube-scheduler must not evict pods to make room behind its back
        "profiles": [{"schedulerName": "default-scheduler",
                      "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}],
        "extenders": extenders,
    }


AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
                          {"level": "None"}]}


def audit_writes(cp: ControlPlane) -> list[dict]:
    """The API server's audit events of every write request (``audit=True``), in order: verb,
    ``userAgent``, ``objectRef``, ``responseStatus.code``, ``requestReceivedTimestamp`` ..."""
    path = cp.workdir / "audit.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_control_plane(k8s_dir: Path, extender_url: str, cache_capable: bool = False,
                        qps: float | None = None, audit: bool = False) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-scheduler; raise with their logs when one fails.
    ``audit``: the API server logs every write (:data:`AUDIT_POLICY`) to ``workdir/audit.log``."""
    work = Path(tempfile.mkdtemp(prefix="dlsched-k8s-"))
    cp = ControlPlane(work)
    try:
        for binary in ("kube-apiserver", "kube-scheduler"):
            with gzip.open(k8s_dir / "bin" / f"{binary}.gz") as src, open(work / binary, "wb") as dst:
                shutil.copyfileobj(src, dst)
            (work / binary).chmod(0o755)
        subprocess.run(["openssl", "genrsa", "-out", str(work / "sa.key"), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(work / "sa.key"), "-pubout", "-out", str(work / "sa.pub")],
                       check=True, capture_output=True)
        (work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n" + "".join(
            f"{replica_token(r)},{r},{r},system:masters\n" for r in REPLICAS))
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        _spawn(cp, "etcd", ["etcd", "--data-dir", str(work / "etcd"),
                            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}"])
        _wait(cp, "etcd", lambda: _http_ok(f"http://127.0.0.1:{etcd_port}/health"), 30)
        _spawn(cp, "kube-apiserver", [
            str(work / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}", "--insecure-port=0",
            f"--cert-dir={work / 'certs'}", f"--token-auth-file={work / 'tokens.csv'}",
            "--authorization-mode=AlwaysAllow",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={work / 'sa.pub'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
            "--api-audiences=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            *_audit_flags(work, audit),
        ])
        cp.api_url = f"https://127.0.0.1:{api_port}"
        _wait(cp, "kube-apiserver", lambda: cp.request("GET", "/readyz")[0] == 200, 90)
        kubeconfig = cp.kubeconfig()
        sched_cfg = work / "scheduler.json"
        sched_cfg.write_text(json.dumps(scheduler_config(extender_url, kubeconfig, cache_capable, qps)))
        cp.scheduler_port = free_port()
        _spawn(cp, "kube-scheduler", [str(work / "kube-scheduler"), f"--config={sched_cfg}",
                                      "--bind-address=127.0.0.1", f"--secure-port={cp.scheduler_port}",
                                      "--port=0",
                                      # its /metrics without a token, for the benchmarks' attempt counts
                                      "--authorization-always-allow-paths=/healthz,/metrics"])
        _wait(cp, "kube-scheduler", lambda: _http_ok(f"https://127.0.0.1:{cp.scheduler_port}/healthz"), 90)
        return cp
    except BaseException:
        cp.stop()
        raise


def cut_short(event: dict) -> bool:
    """Whether an audit event is a write the API server never received whole, so executed
    nothing: a client that sent the headers and stopped (dlsched's socket fence refuses a write's
    later chunks once the renew deadline passed, service/fence.py) is answered 500 with no message
    (``tests/test_control_plane_audit.py`` checks this on the real API server). An executed write
    that failed inside the API server carries its error's message; a refusal (409, 422 ...) its
    own code."""
    status = event.get("responseStatus") or {}
    return status.get("code") == 500 and not status.get("message") and not status.get("reason")


def scheduler_metrics(cp: ControlPlane) -> dict[str, float]:
    """kube-scheduler's own metrics now (``/metrics`` of its secure port), each sample keyed by its
    name and labels as printed (``scheduler_schedule_attempts_total{...result="unschedulable"...}``);
    empty when it cannot be read."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{cp.scheduler_port}/metrics", context=ctx,
                                    timeout=10) as resp:
            text = resp.read().decode()
    except (OSError, urllib.error.URLError):
        return {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("scheduler_"):
            key, _, value = line.rpartition(" ")
            try:
                samples[key] = float(value)
            except ValueError:
                continue
    return samples


def _audit_flags(work: Path, audit: bool) -> list[str]:
    if not audit:
        return []
    (work / "audit-policy.json").write_text(json.dumps(AUDIT_POLICY))
    return [f"--audit-policy-file={work / 'audit-policy.json'}", f"--audit-log-path={work / 'audit.log'}",
            "--audit-log-format=json", "--audit-log-mode=blocking"]


def cleanup(cp: ControlPlane) -> None:
    cp.stop()
    shutil.rmtree(cp.workdir, ignore_errors=True)


@contextmanager
def extender_control_plane(shared: Path, audit: bool = False) -> Iterator[tuple[ControlPlane, int]]:
    """A control plane whose kube-scheduler calls an extender on a free port of 127.0.0.1 (the
    caller starts dlsched there), and that port; stopped by PID at the end, whatever happens.
    Skips the test when ``shared/k8s`` cannot provide one."""
    import pytest

    reason = missing_reason(shared / "k8s")
    if reason:
        pytest.skip(f"no control plane: {reason}")
    port = free_port()
    cp = start_control_plane(shared / "k8s", f"http://127.0.0.1:{port}/scheduler", audit=audit)
    try:
        yield cp, port
    finally:
        cleanup(cp)


NODE_CPUS = 64     # each node's allocatable CPUs (benchmarks/k8s_phases.packed_cpu_millis reads it)
NODE_PODS = 110    # and pods, kubelet's default


def add_gpu_node(cp: ControlPlane, name: str, gpus: int, labels: dict[str, str] | None = None) -> None:
    """A node object (no kubelet) with ``gpus`` units of ``nvidia.com/gpu`` allocatable."""
    cap = {"cpu": str(NODE_CPUS), "memory": "512Gi", "pods": str(NODE_PODS), "nvidia.com/gpu": str(gpus)}
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    status, body = cp.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": metadata,
                                                        "status": {"capacity": cap, "allocatable": cap}})
    assert status == 201, body


def gpu_pod(name: str, gpus: int, tag: str, annotations: dict[str, str] | None = None) -> dict:
    """A one-container pod requesting ``gpus`` units of ``nvidia.com/gpu``, labelled ``run: tag``."""
    lim = {"nvidia.com/gpu": str(gpus)}
    metadata: dict = {"name": name, "labels": {"run": tag}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "example.invalid/train",
                                     "resources": {"limits": lim, "requests": lim}}]}}

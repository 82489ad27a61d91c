"""``dlsched serve``: the live scheduler-extender service next to a Kubernetes cluster."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Optional

import typer

from dlsched.cli.common import clear_errors, console


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        policy: str = typer.Option("fifo", help="policy from the registry (fifo, qssf, horus, pab, ...; oracle "
                                   "policies cannot run live; a preemptive one evicts pods through the "
                                   "Eviction API)"),
        placement: Optional[str] = typer.Option(None, help="placement from the registry, or name:weight,... "
                                                "(default: the policy's own, e.g. horus-cost for horus)"),
        backfill: bool = typer.Option(False, help="let later jobs start in gaps the head job cannot use"),
        kubeconfig: Optional[Path] = typer.Option(None, help="kubeconfig file of the cluster"),
        api_server: Optional[str] = typer.Option(None, help="API server URL (instead of --kubeconfig)"),
        api_token: Optional[str] = typer.Option(None, envvar="DLSCHED_API_TOKEN",
                                                help="bearer token for --api-server"),
        insecure_skip_tls_verify: bool = typer.Option(False, help="do not verify the API server's certificate"),
        db: str = typer.Option("sqlite:///dlsched-service.db",
                               help="durable store: sqlite:///FILE (WAL) or postgresql+psycopg://..."),
        host: str = typer.Option("127.0.0.1", help="address to listen on"),
        port: int = typer.Option(8888, min=1, max=65535),
        token: Optional[str] = typer.Option(None, envvar="DLSCHED_TOKEN",
                                            help="operator API bearer token (generated and printed when absent)"),
        scheduler_name: str = typer.Option("default-scheduler", help="the scheduler profile whose pods are ours"),
        vc_map: str = typer.Option("", help="namespace=VC,... (a pod's dlsched.io/vc label wins)"),
        default_vc: str = typer.Option("default", help="VC of pods and nodes with no mapping"),
        max_jobs_per_gpu: int = typer.Option(1, min=1, max=16, help="jobs that may share one GPU"),
        model_dir: Optional[Path] = typer.Option(None, help="directory of .onnx files the prediction API may read"),
        predict_resources: bool = typer.Option(False, help="predict each pod's GPU utilisation and memory from "
                                               "its dlsched.io/model annotation (needed to share GPUs)"),
        gpu: str = typer.Option("V100", help="GPU type of the nodes without a dlsched.io/gpu-type label"),
        record: Optional[Path] = typer.Option(None, help="append every event seen and decision made to this JSONL "
                                              "log (for `dlsched replay`)"),
        observe_after: float = typer.Option(60.0, min=0.0, help="seconds a pod runs before node-agent "
                                            "readings replace its predictions"),
        leader_elect: bool = typer.Option(False, help="run as one of several replicas: only the holder of a "
                                          "Kubernetes Lease nominates and binds, the others forward to it "
                                          "(needs a PostgreSQL --db)"),
        lease_name: str = typer.Option("dlsched", help="--leader-elect: name of the coordination.k8s.io Lease"),
        lease_namespace: str | None = typer.Option(None, help="--leader-elect: namespace of the Lease "
                                                      "(default: $POD_NAMESPACE, the pod's own, else default)"),
        leader_id: str | None = typer.Option(None, help="--leader-elect: this process's identity in the "
                                                "Lease, unique per process (default: $POD_NAME or the host "
                                                "name, with a random suffix)"),
        advertise_url: str | None = typer.Option(None, help="--leader-elect: the URL other replicas forward "
                                                    "to while this one leads (default http://HOST:PORT)"),
        lease_duration: float = typer.Option(10.0, help="--leader-elect: seconds without renewal before a "
                                             "follower may take the lease"),
        renew_deadline: float = typer.Option(7.0, help="--leader-elect: seconds a leader keeps acting "
                                             "without a successful renewal"),
        retry_period: float = typer.Option(1.0, help="--leader-elect: seconds between tries to acquire or "
                                           "renew"),
        unseen_pod_ttl: float = typer.Option(30.0, min=0.5, help="seconds a pod known only from kube-scheduler's "
                                             "filter calls (the API server does not show it) may hold GPUs"),
        nudge: bool = typer.Option(True, help="touch a pod nominated after kube-scheduler was told to wait, so "
                                   "that it is retried at once (v1.20 waits for a cluster event or 60 s)"),
        eta_interval: float = typer.Option(5.0, min=0.0, help="seconds between ETA refreshes off the request path "
                                           "(only when the state changed; 0: no timer, no dlsched.io/eta annotation)"),
        eta_threshold: float = typer.Option(60.0, min=0.0, help="seconds a pod's ETA must move before its "
                                            "dlsched.io/eta annotation is written again"),
        queues_configmap: str = typer.Option("dlsched/dlsched-queues", help="NAMESPACE/NAME of the ConfigMap whose "
                                             "queues.toml key holds [[queues]] tables (read at start and every 10 s; "
                                             "'' : none)"),
        grace_seconds: Optional[int] = typer.Option(None, min=0, max=86400, help="grace period (s) of an "
                                                    "eviction when the pod has no dlsched.io/grace-seconds "
                                                    "annotation (default: the policy's grace_s, else 30)"),
        gang_permit_timeout: float = typer.Option(8.0, min=0.1, max=3600.0, help="seconds a gang pod's bind waits "
                                                  "for the gang's other pods (keep it below kube-scheduler's "
                                                  "extender httpTimeout)"),
        gang_arrival_timeout: float = typer.Option(120.0, min=0.1, help="seconds after which a gang whose pods "
                                                   "have not all arrived is reported, and a nominated gang whose "
                                                   "pods did not reach bind is released"),
    ) -> None:
        """Run the kube-scheduler extender (filter, prioritize, bind) and the operator API."""
        with clear_errors():
            election = None
            if leader_elect:
                from dlsched.cli.serve_ha import check_election

                election = check_election(db, host, port, lease_name, lease_namespace, leader_id, advertise_url,
                                          lease_duration, renew_deadline, retry_period)
            service, app = build_service(policy, placement, backfill, kubeconfig, api_server, api_token,
                                         insecure_skip_tls_verify, db, token, scheduler_name, vc_map, default_vc,
                                         max_jobs_per_gpu, model_dir, predict_resources, gpu, record,
                                         observe_after, election, unseen_pod_ttl, nudge,
                                         eta_interval=eta_interval, eta_threshold=eta_threshold,
                                         queues_configmap=queues_configmap, grace_seconds=grace_seconds)
            service.core.gangs.permit_timeout = gang_permit_timeout     # service/gangs.py
            service.core.gangs.arrival_timeout = gang_arrival_timeout
        import uvicorn

        placed_by = getattr(service.core.policy, "placement_name", placement)
        console.print(f"dlsched serve: policy {policy}, placement {placed_by}, "
                      f"max {max_jobs_per_gpu} job(s) per GPU, store {_safe_url(db)}, "
                      f"listening on http://{host}:{port} ({_server_parts()})", soft_wrap=True, highlight=False)
        try:
            uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
        finally:
            service.stop()


def _server_parts() -> str:
    """What uvicorn's defaults pick here: uvloop and httptools when installed (the service extra
    installs them), else asyncio's loop and h11."""
    import importlib.util

    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"uvicorn {loop} + {http}"


def _safe_url(url: str) -> str:
    """The store URL without its password."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, _, cred = head.partition("://")
    return f"{scheme}://{cred.partition(':')[0]}:***@{tail}"


def build_service(policy: str, placement: str | None, backfill: bool, kubeconfig: Path | None, api_server: str | None,
                  api_token: str | None, insecure: bool, db: str, token: str | None, scheduler_name: str,
                  vc_map: str, default_vc: str, max_jobs_per_gpu: int, model_dir: Path | None,
                  predict_resources: bool = False, gpu: str = "V100", record: Path | None = None,
                  observe_after: float = 60.0, election=None, unseen_pod_ttl: float = 30.0,
                  nudge: bool = True, eta_interval: float = 5.0, eta_threshold: float = 60.0,
                  queues_configmap: str = "dlsched/dlsched-queues", grace_seconds: int | None = None):
    """Everything ``serve`` starts, checked in order; bad input raises ValueError naming the option."""
    try:
        import fastapi  # noqa: F401
        import kubernetes  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"the service needs the 'service' extra (pip install 'dlsched[service]'): {exc}") from None
    from dlsched.registry import make_policy
    from dlsched.service.app import build_app
    from dlsched.service.core import SchedulerCore
    from dlsched.service.kube import KubeBridge, make_api
    from dlsched.service.pods import VcMapping
    from dlsched.core.cluster import gpu_type
    from dlsched.service.runtime import LiveService, resource_predictor
    from dlsched.service.store import Store

    pol = make_policy(policy, placement, backfill=backfill, share=max_jobs_per_gpu > 1)
    SchedulerCore.check_policy(pol)
    if queues_configmap:
        from dlsched.service.queues import parse_ref

        parse_ref(queues_configmap)
    mapping = VcMapping.parse(vc_map, default_vc)
    if kubeconfig is None and api_server is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise ValueError("give --kubeconfig FILE or --api-server URL (or run inside a cluster)")
    if kubeconfig is not None and not kubeconfig.is_file():
        raise FileNotFoundError(f"--kubeconfig: {kubeconfig} does not exist")
    if model_dir is not None and not model_dir.is_dir():
        raise FileNotFoundError(f"--model-dir: {model_dir} is not a directory")
    try:
        if election is not None:   # replicas starting together on an empty database: both create its tables
            from dlsched.cli.serve_ha import open_shared_store

            store = open_shared_store(Store, db)
        else:
            store = Store(db)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds; all mean a bad --db
        raise ValueError(f"--db {_safe_url(db)}: {_db_reason(exc)}") from None
    try:
        gtype = gpu_type(gpu)
    except ValueError as exc:
        raise ValueError(f"--gpu: {exc}") from None
    predict = resource_predictor(gtype.name, model_dir) if predict_resources else None
    recorder = None
    if record is not None:
        from dlsched.cli.checks import check_out_file
        from dlsched.service.record import Recorder

        check_out_file(record, "--record")
        record.parent.mkdir(parents=True, exist_ok=True)
        recorder = Recorder(record)
    core = SchedulerCore(pol, store, mapping, max_jobs_per_gpu, default_gpu=gtype, predict=predict,
                         recorder=recorder)
    if grace_seconds is not None:
        core.default_grace = grace_seconds
    chosen = bool(token)
    token = token or secrets.token_urlsafe(24)
    try:
        api = make_api(str(kubeconfig) if kubeconfig else None, api_server, api_token, insecure)
    except Exception as exc:  # noqa: BLE001 - YAML errors, ConfigException, bad URLs: all a bad kubeconfig
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else f"--api-server {api_server}"
        raise ValueError(f"{where}: not a usable kubeconfig ({str(exc).splitlines()[0][:200]})") from None
    bridge = KubeBridge(api, core, scheduler_name, default_vc)
    service = LiveService(core, bridge, token, scheduler_name, model_dir, observe_after=observe_after,
                          unseen_ttl=unseen_pod_ttl, nudge=nudge, eta_interval=eta_interval,
                          eta_threshold=eta_threshold, queues_configmap=queues_configmap)
    from dlsched.cli.policy_factory import build_policy

    service.policy_factory = lambda name, params, place: build_policy(name, params, place,
                                                                      share=max_jobs_per_gpu > 1)   # GET /api/v1/whatif
    if election is not None:   # reconciles when it becomes leader; until then it forwards to the leader
        from dlsched.cli.serve_ha import start_election
        from dlsched.service.follower import LeaderGate

        start_election(service, api, election)
        console.print(f"leader election on lease {election.lease_namespace}/{election.lease_name} as "
                      f"{election.identity} ({election.url})", soft_wrap=True, highlight=False)
        if not chosen:
            console.print(f"operator API token (give --token or DLSCHED_TOKEN to choose one): {token}",
                          soft_wrap=True, highlight=False)
        return service, LeaderGate(build_app(service), service)
    try:
        found = service.start()
    except Exception as exc:  # noqa: BLE001 - connection refused, TLS, 401: one line naming the server
        where = api_server or str(kubeconfig) or "in-cluster config"
        raise RuntimeError(f"cannot reach the API server ({where}): {str(exc).splitlines()[0][:300]}") from None
    console.print(f"reconciled with the API server: {found}", soft_wrap=True, highlight=False)
    if not chosen:  # only once the service is up: a failed start must not leave a token on the screen
        console.print(f"operator API token (give --token or DLSCHED_TOKEN to choose one): {token}",
                      soft_wrap=True, highlight=False)
    return service, build_app(service)


def _db_reason(exc: Exception) -> str:
    """Why --db failed, in words, without SQLAlchemy's class names ("(psycopg.OperationalError) ...")."""
    import re

    text = str(exc).splitlines()[0] if str(exc) else "cannot open it"
    if exc.__class__.__name__ in ("NoSuchModuleError", "ArgumentError"):
        return "not a database URL dlsched can open (use sqlite:///FILE or postgresql://USER@HOST/DB)"
    return "cannot open the store: " + re.sub(r"^\([\w.]+\)\s*", "", text)

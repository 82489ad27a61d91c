"""``dlsched serve``: the live scheduler-extender service next to a Kubernetes cluster.

The flags become one :class:`~dlsched.run.config.ServiceConfig` (``cli/serve_config.py``), whose
policy part is built as ``simulate``'s: the same generated policy flags (``--threshold``,
``--lam``...) and ``--param NAME=VALUE``. :func:`start_service` builds everything from it and a
:class:`Connection`; the policy object the service runs has the parameters the config names.
"""

from __future__ import annotations

import inspect
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import typer

from dlsched.cli.common import clear_errors, console
from dlsched.cli.run_options import RunCommand
from dlsched.run.config import PredictionConfig, ServiceConfig, ServiceTimings


@dataclass(frozen=True)
class Connection:
    """How to reach the cluster and who may call the operator API: not part of the described
    configuration (it holds secrets, and it is no choice about scheduling)."""

    kubeconfig: Path | None = None
    api_server: str | None = None
    api_token: str | None = None
    insecure: bool = False
    db: str = "sqlite:///dlsched-service.db"
    token: str | None = None


PARAM = typer.Option(None, "--param", metavar="NAME=VALUE", show_default=False,
                     help="a parameter of the policy's own, as `simulate` takes it (repeatable; `dlsched policies` "
                     "lists them), e.g. --policy qssf --param lam=0.2; each also has a flag (--lam 0.2)")


def register(app: typer.Typer) -> None:
    def serve(
        ctx: typer.Context,
        policy: str = typer.Option("fifo", help="policy from the registry (fifo, qssf, horus, pab, ...; oracle "
                                   "policies cannot run live; a preemptive one evicts pods through the "
                                   "Eviction API)"),
        placement: str | None = typer.Option(None, help="placement from the registry, or name:weight,... "
                                                "(default: the policy's own, e.g. horus-cost for horus)"),
        backfill: bool = typer.Option(False, help="let later jobs start in gaps the head job cannot use"),
        kubeconfig: Path | None = typer.Option(None, help="kubeconfig file of the cluster"),
        api_server: str | None = typer.Option(None, help="API server URL (instead of --kubeconfig)"),
        api_token: str | None = typer.Option(None, envvar="DLSCHED_API_TOKEN",
                                                help="bearer token for --api-server"),
        insecure_skip_tls_verify: bool = typer.Option(False, help="do not verify the API server's certificate"),
        db: str = typer.Option("sqlite:///dlsched-service.db",
                               help="durable store: sqlite:///FILE (WAL) or postgresql+psycopg://..."),
        host: str = typer.Option("127.0.0.1", help="address to listen on"),
        port: int = typer.Option(8888, min=1, max=65535),
        token: str | None = typer.Option(None, envvar="DLSCHED_TOKEN",
                                            help="operator API bearer token (generated and printed when absent)"),
        mode: str = typer.Option("extender", help="extender: kube-scheduler calls dlsched (filter, prioritize, "
                                 "bind); scheduler: dlsched watches the pods whose spec.schedulerName is "
                                 "--scheduler-name and binds them itself (docs/service.md)"),
        scheduler_name: str = typer.Option("", show_default=False, help="the scheduler name whose pods are ours "
                                           "(default: default-scheduler as an extender, dlsched as a scheduler)"),
        vc_map: str = typer.Option("", help="namespace=VC,... (a pod's dlsched.io/vc label wins)"),
        default_vc: str = typer.Option("default", help="VC of pods and nodes with no mapping"),
        max_jobs_per_gpu: int = typer.Option(1, min=1, max=16, help="jobs that may share one GPU"),
        model_dir: Path | None = typer.Option(None, help="directory of .onnx files the prediction API may read"),
        predict_resources: bool = typer.Option(False, help="predict each pod's GPU utilisation and memory from "
                                               "its dlsched.io/model annotation (needed to share GPUs)"),
        gpu: str = typer.Option("V100", help="GPU type of the nodes without a dlsched.io/gpu-type label"),
        record: Path | None = typer.Option(None, help="append every event seen and decision made to this JSONL "
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
        grace_seconds: int | None = typer.Option(None, min=0, max=86400, help="grace period (s) of an "
                                                    "eviction when the pod has no dlsched.io/grace-seconds "
                                                    "annotation (default: the policy's grace_s, else 30)"),
        gang_permit_timeout: float = typer.Option(8.0, min=0.1, max=3600.0, help="seconds a gang pod's bind waits "
                                                  "for the gang's other pods (keep it below kube-scheduler's "
                                                  "extender httpTimeout)"),
        gang_arrival_timeout: float = typer.Option(120.0, min=0.1, help="seconds after which a gang whose pods "
                                                   "have not all arrived is reported, and a nominated gang whose "
                                                   "pods did not reach bind is released"),
        gpu_binding: str = typer.Option("annotation", help="annotation: the GPUs dlsched chose are written to "
                                        "dlsched.io/gpus only; envvar-configmap (--mode scheduler): a mutating "
                                        "webhook and per-pod ConfigMaps make them the container's "
                                        "NVIDIA_VISIBLE_DEVICES, held by reservation pods (docs/service.md)"),
        webhook_port: int = typer.Option(8443, min=0, max=65535, help="--gpu-binding envvar-configmap: the "
                                         "webhook's HTTPS port (0: any free port)"),
        webhook_host: str = typer.Option("", show_default=False, help="address the webhook listens on "
                                         "(default: --host)"),
        webhook_url: str = typer.Option("", show_default=False, help="the URL the API server calls (default "
                                        "https://WEBHOOK-HOST:PORT/mutate)"),
        webhook_register: bool = typer.Option(True, help="create or replace the MutatingWebhookConfiguration at "
                                              "start (off: deploy/ registers it)"),
        webhook_cert: Path | None = typer.Option(None, help="the webhook's TLS certificate (default: a "
                                                 "self-signed CA made at start-up)"),
        webhook_key: Path | None = typer.Option(None, help="its private key"),
        webhook_ca: Path | None = typer.Option(None, help="the CA certificate the registration's caBundle holds"),
        reservation_namespace: str = typer.Option("dlsched", help="namespace of the GPU reservation pods"),
        param: list[str] | None = PARAM,
        **policy_flags: object,
    ) -> None:
        """Run the kube-scheduler extender (filter, prioritize, bind), or with --mode scheduler a
        scheduler of its own, and the operator API."""
        from dlsched.cli.serve_config import given_policy_flags, service_config

        with clear_errors():
            config = service_config(
                policy, backfill, given_policy_flags(ctx, policy_flags), param, placement=placement,
                max_jobs_per_gpu=max_jobs_per_gpu,
                predictions=PredictionConfig(predict_resources, gpu, model_dir, observe_after),
                timings=ServiceTimings(unseen_pod_ttl, eta_interval, eta_threshold, gang_permit_timeout,
                                       gang_arrival_timeout, grace_seconds),
                note=lambda text: console.print(f"note: {text}", soft_wrap=True, highlight=False, markup=False),
                scheduler_name=scheduler_name, vc_map=vc_map, default_vc=default_vc,
                queues_configmap=queues_configmap, nudge=nudge, record=record, mode=mode)
            election = None
            if leader_elect:
                from dlsched.cli.serve_ha import check_election

                election = check_election(db, host, port, lease_name, lease_namespace, leader_id, advertise_url,
                                          lease_duration, renew_deadline, retry_period)
            connection = Connection(kubeconfig, api_server, api_token, insecure_skip_tls_verify, db, token)
            _thread_dump_on_sigusr1()
            from dlsched.service.gpu_binding.setup import GpuBindingOptions

            binding = GpuBindingOptions(gpu_binding, webhook_host or host, webhook_port, webhook_url,
                                        webhook_register, webhook_cert, webhook_key, webhook_ca,
                                        reservation_namespace)
            binding.check(mode)
            service, app = start_service(config, connection, election, binding)
        import uvicorn

        console.print(f"dlsched serve: listening on http://{host}:{port} ({_server_parts()})", soft_wrap=True,
                      highlight=False)
        try:
            uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
        finally:
            service.stop()

    # the policy flags arrive in **policy_flags: RunCommand generates them from the policies'
    # parameter classes when a command line names one (or asks for --help), as for `simulate`
    signature = inspect.signature(serve)
    serve.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
        p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD])
    app.command("serve", cls=RunCommand)(serve)


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
                  queues_configmap: str = "dlsched/dlsched-queues", grace_seconds: int | None = None,
                  params: dict[str, object] | None = None, mode: str = "extender"):
    """:func:`start_service` from ``serve``'s flags as values (in-process callers: tests);
    ``params``: the policy's parameters by name, as ``--param`` takes them."""
    from dlsched.run.config import PlacementConfig
    from dlsched.run.params import policy as policy_config

    config = ServiceConfig(policy_config(policy, backfill, **(params or {})),
                           PlacementConfig(placement, max_jobs_per_gpu),
                           PredictionConfig(predict_resources, gpu, model_dir, observe_after),
                           ServiceTimings(unseen_pod_ttl, eta_interval, eta_threshold, grace_seconds=grace_seconds),
                           scheduler_name, vc_map, default_vc, queues_configmap, nudge and mode != "scheduler",
                           record, mode)
    return start_service(config, Connection(kubeconfig, api_server, api_token, insecure, db, token), election)


def assemble(config: ServiceConfig, conn: Connection, election=None):
    """Everything ``serve`` runs, built from ``config`` and checked in order, but not started (no
    call to the API server yet); bad input raises ValueError naming the option."""
    try:
        import fastapi  # noqa: F401
        import kubernetes  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"the service needs the 'service' extra (pip install 'dlsched[service]'): {exc}") from None
    from dlsched.cli.policy_factory import build_policy, policy_from_config
    from dlsched.core.cluster import gpu_type
    from dlsched.service.core import SchedulerCore
    from dlsched.service.evictions import policy_grace
    from dlsched.service.kube import KubeBridge, make_api
    from dlsched.service.pods import VcMapping
    from dlsched.service.runtime import LiveService, resource_predictor
    from dlsched.service.store import Store

    pol = policy_from_config(config.policy, config.placement)
    SchedulerCore.check_policy(pol)
    if config.queues_configmap:
        from dlsched.service.queues import parse_ref

        parse_ref(config.queues_configmap)
    mapping = VcMapping.parse(config.vc_map, config.default_vc)
    kubeconfig, db = conn.kubeconfig, conn.db
    if kubeconfig is None and conn.api_server is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise ValueError("give --kubeconfig FILE or --api-server URL (or run inside a cluster)")
    if kubeconfig is not None and not kubeconfig.is_file():
        raise FileNotFoundError(f"--kubeconfig: {kubeconfig} does not exist")
    pred, timings = config.predictions, config.timings
    if pred.model_dir is not None and not pred.model_dir.is_dir():
        raise FileNotFoundError(f"--model-dir: {pred.model_dir} is not a directory")
    try:
        if election is not None:   # replicas starting together on an empty database: both create its tables
            from dlsched.cli.serve_ha import open_shared_store

            store = open_shared_store(Store, db)
        else:
            store = Store(db)
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises many kinds; all mean a bad --db
        raise ValueError(f"--db {_safe_url(db)}: {_db_reason(exc)}") from None
    try:
        gtype = gpu_type(pred.gpu)
    except ValueError as exc:
        raise ValueError(f"--gpu: {exc}") from None
    predict = resource_predictor(gtype.name, pred.model_dir) if pred.predict_resources else None
    recorder = None
    if config.record is not None:
        from dlsched.cli.checks import check_out_file
        from dlsched.service.record import Recorder

        check_out_file(config.record, "--record")
        config.record.parent.mkdir(parents=True, exist_ok=True)
        recorder = Recorder(config.record)
    grace = timings.grace_seconds if timings.grace_seconds is not None else policy_grace(pol)
    described = {**config.describe(), "placement": getattr(pol, "placement_name", config.placement.name),
                 "eviction_grace_s": grace, "store": _safe_url(db)}
    cap = config.placement.max_jobs_per_gpu
    core = SchedulerCore(pol, store, mapping, cap, default_gpu=gtype, predict=predict, recorder=recorder,
                         described=described)
    core.default_grace = grace
    core.gangs.permit_timeout = timings.gang_permit_timeout     # service/gangs.py
    core.gangs.arrival_timeout = timings.gang_arrival_timeout
    try:
        api = make_api(str(kubeconfig) if kubeconfig else None, conn.api_server, conn.api_token, conn.insecure)
    except Exception as exc:  # noqa: BLE001 - YAML errors, ConfigException, bad URLs: all a bad kubeconfig
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else f"--api-server {conn.api_server}"
        raise ValueError(f"{where}: not a usable kubeconfig ({str(exc).splitlines()[0][:200]})") from None
    if config.mode == "scheduler":   # dlsched binds the pods named for it (service/scheduler_mode/)
        from dlsched.service.scheduler_mode.bridge import SchedulerBridge

        bridge = SchedulerBridge(api, core, config.scheduler_name, config.default_vc)
    else:
        bridge = KubeBridge(api, core, config.scheduler_name, config.default_vc)
    service = LiveService(core, bridge, conn.token or secrets.token_urlsafe(24), config.scheduler_name,
                          pred.model_dir, observe_after=pred.observe_after, unseen_ttl=timings.unseen_pod_ttl,
                          nudge=config.nudge, eta_interval=timings.eta_interval, eta_threshold=timings.eta_threshold,
                          queues_configmap=config.queues_configmap, config=described, mode=config.mode)
    service.policy_factory = lambda name, params, place: build_policy(name, params, place,
                                                                      share=cap > 1)   # GET /api/v1/whatif
    return service, api


def start_service(config: ServiceConfig, conn: Connection, election=None, gpu_binding=None):
    """The service and its HTTP app: :func:`assemble`, the effective configuration printed, then
    reconciled with the API server (or, with ``election``, campaigning for the lease).
    ``gpu_binding``: ``GpuBindingOptions`` (service/gpu_binding/setup.py), checked already."""
    from dlsched.cli.serve_config import config_lines
    from dlsched.service.app import build_app

    service, api = assemble(config, conn, election)
    if gpu_binding is not None and gpu_binding.mode != "annotation":
        from dlsched.service.gpu_binding.setup import attach

        attach(service, api, gpu_binding)
    console.print("dlsched serve: " + "\n  ".join(config_lines(service.config)), soft_wrap=True, highlight=False,
                  markup=False)
    chosen, token = bool(conn.token), service.token
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
        where = conn.api_server or str(conn.kubeconfig) or "in-cluster config"
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


def _thread_dump_on_sigusr1() -> None:
    """``kill -USR1 PID`` prints every thread's stack to the service's stderr: how an operator (or a
    test whose wait ran out) sees where a replica that never became ready, or stopped binding, is stuck."""
    import faulthandler
    import signal

    if not hasattr(signal, "SIGUSR1"):
        return
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (OSError, ValueError, AttributeError):   # stderr with no file descriptor (an in-process test's capture)
        return

"""The HTTP app: the extender endpoints the kube-scheduler calls, and the operator API.

Extender endpoints (``/scheduler/filter|prioritize|bind``) carry no token: kube-scheduler's
extender client cannot send one, so they are protected by where the service listens (loopback or
a cluster-internal Service). Operator endpoints under ``/api/v1`` read freely; every mutating call
needs ``Authorization: Bearer TOKEN`` (403 without). Bodies are size-limited and validated:
malformed input gets a 4xx with a reason, never a 5xx.
"""

from __future__ import annotations

import json
import secrets
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from dlsched.service.extender import (
    BIND_ARGS_SCHEMA,
    EXTENDER_ARGS_SCHEMA,
    WireError,
    filter_result,
    parse_args,
    parse_bind,
    priority_result,
)
from dlsched.service.runtime import LiveService

EXTENDER_MAX_BYTES = 32 * 1024 * 1024   # a NodeList of ~10,000 full node objects
OPERATOR_MAX_BYTES = 64 * 1024

NAME = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"   # a DNS label (namespace, pod name)


class SubmitJob(BaseModel):
    """A job to run: becomes a pod for this scheduler, created through the API server."""

    namespace: str = Field("default", pattern=NAME)
    name: str = Field(pattern=NAME)
    gpus: int = Field(ge=1, le=64)
    image: str = Field("busybox", min_length=1, max_length=256, pattern=r"^[^\s]+$")
    vc: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,63}$")
    model: str | None = Field(None, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    batch_size: int | None = Field(None, ge=1, le=1 << 20)


class PredictRequest(BaseModel):
    """A model reference (zoo name, or an .onnx file in --model-dir) and a batch size."""

    model: str = Field(min_length=1, max_length=128)
    batch_size: int = Field(32, ge=1, le=1 << 20)
    gpu: str = Field("V100", pattern=r"^[A-Za-z0-9-]{1,32}$")


async def _body(request: Request, limit: int) -> object:
    """The JSON body, refused with 413 above ``limit`` bytes and 400 when not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise HTTPException(413, f"body larger than {limit} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise HTTPException(413, f"body larger than {limit} bytes")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"body is not JSON: {exc}") from None


class Observation(BaseModel):
    """One agent reading of a pod: GPU utilisation (0-1) and memory (MiB), null when not measured."""

    uid: str = Field(min_length=1, max_length=128)
    gpu_util: float | None = Field(None, ge=0, le=1)
    gpu_mem_mib: float | None = Field(None, ge=0, le=1 << 24)


class Observations(BaseModel):
    """What a node agent posts: its node and one reading per pod it sees on its GPUs."""

    node: str = Field(min_length=1, max_length=253)
    pods: list[Observation] = Field(default_factory=list, max_length=4096)
    gpus: list[dict] = Field(default_factory=list, max_length=64)   # the agent's inventory (kept as sent)
    topology: dict | None = None


def _metrics(service: LiveService):
    """The service's metrics, or None when prometheus-client is not installed."""
    try:
        from dlsched.service.metrics import ServiceMetrics
    except ImportError:
        return None
    return ServiceMetrics(service.core)


class _NoTimer:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


def build_app(service: LiveService) -> "BodyLimit":
    metrics = _metrics(service)

    def timed(verb: str):
        return metrics.timed(verb) if metrics is not None else _NoTimer()

    app = FastAPI(title="dlsched scheduler extender", version="1",
                  description="kube-scheduler extender (filter, prioritize, bind) and operator API of dlsched.")
    core = service.core

    def require_token(request: Request) -> None:
        sent = request.headers.get("authorization", "")
        scheme, _, value = sent.partition(" ")
        if not service.token or scheme.lower() != "bearer" or not secrets.compare_digest(
                value.encode(), service.token.encode()):
            raise HTTPException(403, "a valid 'Authorization: Bearer TOKEN' header is required")

    ext = {"requestBody": {"required": True, "content": {"application/json": {"schema": EXTENDER_ARGS_SCHEMA}}}}
    bind_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": BIND_ARGS_SCHEMA}}}}

    # -- extender ------------------------------------------------------------------------
    @app.post("/scheduler/filter", tags=["extender"], openapi_extra=ext)
    async def extender_filter(request: Request) -> JSONResponse:
        """ExtenderArgs -> ExtenderFilterResult: only the node dlsched nominated passes."""
        with timed("filter"):
            try:
                pod, names, items = parse_args(await _body(request, EXTENDER_MAX_BYTES))
            except WireError as exc:
                raise HTTPException(400, str(exc)) from None
            passed, failed = core.filter(pod, names)
            return JSONResponse(filter_result(passed, failed, items))

    @app.post("/scheduler/prioritize", tags=["extender"], openapi_extra=ext)
    async def extender_prioritize(request: Request) -> JSONResponse:
        """ExtenderArgs -> HostPriorityList: the nominated node 10, others the policy's score (1-9) or 0."""
        with timed("prioritize"):
            try:
                pod, names, _ = parse_args(await _body(request, EXTENDER_MAX_BYTES))
            except WireError as exc:
                raise HTTPException(400, str(exc)) from None
            return JSONResponse(priority_result(core.prioritize(pod, names)))

    @app.post("/scheduler/bind", tags=["extender"], openapi_extra=bind_body)
    def extender_bind(args: dict) -> dict:
        """ExtenderBindingArgs -> ExtenderBindingResult: annotate the GPUs, bind via the API server."""
        with timed("bind"):
            try:
                namespace, name, uid, node = parse_bind(args)
            except WireError as exc:
                raise HTTPException(400, str(exc)) from None
            return {"Error": service.bind(namespace, name, uid, node)}

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict:
        return {"ok": True}

    @app.get("/metrics", tags=["meta"])
    def prometheus_metrics() -> Response:
        """Prometheus text exposition: queues, GPUs, decisions, latencies, predicted vs observed."""
        if metrics is None:
            raise HTTPException(501, "metrics need prometheus-client (pip install 'dlsched[service]')")
        return Response(metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/dashboard", tags=["meta"], response_class=HTMLResponse)
    def dashboard() -> HTMLResponse:
        """The live dashboard: nodes x GPUs, queues, decisions, predicted vs observed."""
        from dlsched.service.dashboard import dashboard_data, render_page

        return HTMLResponse(render_page(dashboard_data(service)))

    @app.get("/api/v1/dashboard", tags=["operator"])
    def dashboard_json() -> dict:
        """What the dashboard shows, as JSON (its script refreshes from here)."""
        from dlsched.service.dashboard import dashboard_data

        return dashboard_data(service)

    @app.post("/empty", tags=["meta"], include_in_schema=False)
    async def empty() -> JSONResponse:
        """Does nothing: the benchmark's baseline for the server's own overhead."""
        return JSONResponse({})

    # -- operator ------------------------------------------------------------------------
    @app.get("/api/v1/state", tags=["operator"])
    def cluster_state() -> dict:
        """Nodes (GPUs, VC, cordon, which pod holds which GPUs), VCs, counters, bind outcomes."""
        return {**core.snapshot(), "binds": dict(service.stats)}

    @app.get("/api/v1/queue", tags=["operator"])
    def queue() -> list[dict]:
        """Pending pods in policy order per VC, with the reason each one waits."""
        return core.queue()

    @app.get("/api/v1/decisions", tags=["operator"])
    def decisions(limit: Annotated[int, Query(ge=1, le=10000)] = 100,
                  after: Annotated[int, Query(ge=0, le=2**62)] = 0) -> list[dict]:
        """The durable decision log (submit, assume, bind, forget, finish, ...), oldest first."""
        return core.store.decision_log(limit, after)

    @app.post("/api/v1/jobs", tags=["operator"], status_code=201, dependencies=[Depends(require_token)])
    def submit_job(job: SubmitJob) -> dict:
        """Submit a job: a pod for this scheduler is created through the API server."""
        try:
            return service.submit_pod(job.namespace, job.name, job.gpus, job.image, job.vc, job.model,
                                      job.batch_size)
        except LookupError as exc:
            raise HTTPException(409, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None

    @app.post("/api/v1/observations", tags=["operator"], dependencies=[Depends(require_token)])
    def observe(obs: Observations) -> dict:
        """A node agent's readings: kept for predicted-vs-observed, and after the warm-up they
        replace the pods' predictions (an observed pod over its GPU's memory fails as an OOM)."""
        service.agents[obs.node] = {"gpus": obs.gpus, "topology": obs.topology, "at": core.now()}
        return service.observe(obs.node, [(p.uid, p.gpu_util, p.gpu_mem_mib) for p in obs.pods])

    @app.post("/api/v1/predictions", tags=["operator"], dependencies=[Depends(require_token)])
    def predict(req: PredictRequest) -> dict:
        """Predicted GPU utilisation and memory for a model reference and batch size."""
        try:
            return service.predict(req.model, req.batch_size, req.gpu)
        except LookupError as exc:
            raise HTTPException(404, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None

    return BodyLimit(app)


class BodyLimit:
    """Refuse oversized bodies before anything reads them (plain ASGI: no per-request task)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            path = scope["path"]
            limit = EXTENDER_MAX_BYTES if path in ("/scheduler/filter", "/scheduler/prioritize") else OPERATOR_MAX_BYTES
            length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
            if length is None:
                await JSONResponse({"detail": "a Content-Length header is required"}, status_code=411)(
                    scope, receive, send)
                return
            if not length.isdigit() or int(length) > limit:
                await JSONResponse({"detail": f"body larger than {limit} bytes"}, status_code=413)(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)

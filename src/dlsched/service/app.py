"""The HTTP app: the extender endpoints the kube-scheduler calls, and the operator API.

Extender endpoints (``/scheduler/filter|prioritize|bind``) carry no token: kube-scheduler's
extender client cannot send one, so they are protected by where the service listens (loopback or
a cluster-internal Service). Operator endpoints under ``/api/v1`` read freely; every mutating call
needs ``Authorization: Bearer TOKEN`` (403 without). Bodies are size-limited and validated:
malformed input gets a 4xx with a reason, never a 5xx.

Filter and prioritize are on kube-scheduler's path for every GPU pod, so :class:`Front`, the ASGI
app the server runs, answers them (and ``/empty``, the load benchmark's baseline) from the raw
body itself: parsed once (orjson when installed), answered by the core under its lock, the reply
written as bytes. Their FastAPI routes document them in the OpenAPI schema and give the same
answers when the FastAPI app is called directly; everything else goes through FastAPI.
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from dlsched.service.extender import (
    BIND_ARGS_SCHEMA,
    EXTENDER_ARGS_SCHEMA,
    WireError,
    dumps,
    filter_reply,
    parse_bind,
    parse_request,
    scores_reply,
)
from dlsched.service.pods import PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.strict_json import StrictJsonRoute, validation_error

EXTENDER_MAX_BYTES = 32 * 1024 * 1024   # a NodeList of ~10,000 full node objects
OPERATOR_MAX_BYTES = 64 * 1024
# in --mode scheduler no pod of another scheduler is ever placed by dlsched: extender calls are refused
SCHEDULER_MODE_REFUSAL = "dlsched runs with --mode scheduler: it answers no extender calls"
EXTENDER_PATHS = ("/scheduler/filter", "/scheduler/prioritize")
TOKEN_REQUIRED = "a valid 'Authorization: Bearer TOKEN' header is required"

Answer = Callable[[bytes], object]   # raw request body -> (status, JSON reply), or a coroutine giving them
NODE_WAIT_S = 1.0        # the longest a filter call waits for the node watch to show the nodes it offers
NODE_WAIT_STEP_S = 0.01

GC_YOUNG_THRESHOLD = 10_000   # gen-0 collection after this many net new containers (CPython's default: 700)

NAME = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"   # a DNS label (namespace, pod name)
# operator calls that need the token: refused (403) before their body is read, so an
# unauthenticated caller learns nothing from validation errors
GUARDED_PATHS = frozenset({"/api/v1/jobs", "/api/v1/observations", "/api/v1/predictions"})


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
    gpu: str = Field("V100", pattern=r"^[A-Za-z0-9-]{1,32}$",
                     description="a GPU type of dlsched.core.cluster.GPU_TYPES (V100, A100, ...); another is a 422")


class Prediction(BaseModel):
    """What the shipped resource predictor says of a model at a batch size on a GPU type."""

    model: str
    batch_size: int
    gpu: str
    gpu_util: float | None = Field(description="predicted GPU utilisation in percent, 0-100 (the unit of the "
                                               "node agent's readings and of ffd-util's bound)")
    gpu_mem_mib: float | None = Field(description="predicted GPU memory in MiB")


async def _raw_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 above ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise HTTPException(413, f"body larger than {limit} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise HTTPException(413, f"body larger than {limit} bytes")
    return bytes(raw)


def _response(status: int, payload: bytes) -> Response:
    return Response(payload, status_code=status, media_type="application/json")


class Observation(BaseModel):
    """One agent reading of a pod: GPU utilisation (percent, 0-100) and memory (MiB), null when
    not measured. Percent is the unit of the predictors and of ffd-util's bound (FULL_UTIL = 100):
    a reading replaces the pod's prediction as it is."""

    uid: str = Field(min_length=1, max_length=128)
    gpu_util: float | None = Field(None, ge=0, le=100, allow_inf_nan=False,
                                   description="GPU utilisation of the pod in percent, 0-100 (NVML's unit)")
    gpu_mem_mib: float | None = Field(None, ge=0, le=1 << 24, allow_inf_nan=False,
                                      description="GPU memory of the pod in MiB (the most on any one of its GPUs)")
    speed: float | None = Field(None, gt=0, le=2, allow_inf_nan=False,
                                description="the pod's training throughput relative to running alone (1 = as fast "
                                            "as alone), when its framework reports it: PAB re-queues a job that "
                                            "runs below 1 - max_drop")


class Observations(BaseModel):
    """What a node agent posts: its node and one reading per pod it sees on its GPUs."""

    node: str = Field(min_length=1, max_length=253)
    pods: list[Observation] = Field(default_factory=list, max_length=4096)
    gpus: list[dict] = Field(default_factory=list, max_length=64)   # the agent's inventory (kept as sent)
    topology: dict | None = None
    # --gpu-binding envvar-configmap: reservation pod name -> the device IDs the kubelet gave it
    # (the agent's PodResources read-back, service/gpu_binding/identity.py)
    devices: dict[str, list[str]] = Field(default_factory=dict, max_length=4096)


def _metrics(service: LiveService):
    """The service's metrics, or None when prometheus-client is not installed."""
    try:
        from dlsched.service.metrics import ServiceMetrics
    except ImportError:
        return None
    return ServiceMetrics(service.core, service.leadership)


class _NoTimer:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


@asynccontextmanager
async def serving_gc(app: FastAPI) -> AsyncIterator[None]:
    """The collector tuned while the server runs (restored at shutdown), for the extender's tail
    latency. What start-up built (modules, the node table) is frozen: a full collection then no
    longer walks it in the middle of a request (≈ 80 ms with 1,000 nodes). A filter or prioritize
    call over 1,000 nodes holds a few thousand containers at once, which at CPython's default
    threshold of 700 ran two or three young collections per call: the threshold is raised so that
    only net growth triggers one. A frozen object is never collected, which is right for start-up
    state (it lives as long as the server); cyclic garbage made later is still collected."""
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def build_app(service: LiveService) -> Front:
    metrics = _metrics(service)

    def timed(verb: str):
        return metrics.timed(verb) if metrics is not None else _NoTimer()

    app = FastAPI(title="dlsched scheduler extender", version="1", lifespan=serving_gc,
                  description="kube-scheduler extender (filter, prioritize, bind) and operator API of dlsched. "
                              "GPU utilisation is in percent (0-100) everywhere.")
    app.router.route_class = StrictJsonRoute
    app.add_exception_handler(RequestValidationError, validation_error)
    core = service.core

    def token_ok(sent: str) -> bool:
        scheme, _, value = sent.partition(" ")
        return bool(service.token) and scheme.lower() == "bearer" and secrets.compare_digest(
            value.encode(), service.token.encode())

    def require_token(request: Request) -> None:
        if not token_ok(request.headers.get("authorization", "")):
            raise HTTPException(403, TOKEN_REQUIRED)

    ext = {"requestBody": {"required": True, "content": {"application/json": {"schema": EXTENDER_ARGS_SCHEMA}}}}
    bind_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": BIND_ARGS_SCHEMA}}}}

    # -- extender ------------------------------------------------------------------------
    def answer_filter(raw: bytes):
        """(status, reply); a coroutine giving them when the call is held for new nodes."""
        if service.mode == "scheduler":
            return 409, dumps({"Error": SCHEDULER_MODE_REFUSAL})
        with timed("filter"):
            try:
                pod, names, items = parse_request(raw)
            except WireError as exc:
                return 400, dumps({"detail": str(exc)})
            if pod.gpus and core.unknown_nodes(names) and not core.nominated_offered(pod, names):
                return held_filter(pod, names, items)
            passed, why = core.verdict(pod, names)
            return 200, filter_reply(passed, why, names, items)

    async def held_filter(pod: PodFacts, names: list[str], items: list[dict] | None) -> tuple[int, bytes]:
        # timed with its hold: kube-scheduler's one scheduling loop waits as long as this call
        with timed("filter_held"):
            await await_offered_nodes(pod, names)
            passed, why = core.verdict(pod, names)
            return 200, filter_reply(passed, why, names, items)

    async def await_offered_nodes(pod: PodFacts, names: list[str]) -> None:
        """Hold a GPU pod's filter call while it offers a node the node watch has not shown yet
        (nodes just added: kube-scheduler's cache leads the watch), up to NODE_WAIT_S. Answered
        "wait" at once, kube-scheduler would park the pod (its unschedulable queue, then its
        backoff) although dlsched nominates it a moment later; held, the call is answered with
        the nomination. The event loop goes on meanwhile; kube-scheduler's own cycle waits."""
        deadline = time.monotonic() + NODE_WAIT_S
        arrived = False
        while not arrived and time.monotonic() < deadline:
            await asyncio.sleep(NODE_WAIT_STEP_S)
            arrived = not core.unknown_nodes(names)
        core.held_filter(names, arrived)

    def answer_prioritize(raw: bytes) -> tuple[int, bytes]:
        if service.mode == "scheduler":
            return 409, dumps({"Error": SCHEDULER_MODE_REFUSAL})
        with timed("prioritize"):
            try:
                pod, names, _ = parse_request(raw)
            except WireError as exc:
                return 400, dumps({"detail": str(exc)})
            return 200, scores_reply(names, core.priorities(pod, names))

    def answer_empty(raw: bytes) -> tuple[int, bytes]:
        return 200, b"{}"

    @app.post("/scheduler/filter", tags=["extender"], openapi_extra=ext)
    async def extender_filter(request: Request) -> Response:
        """ExtenderArgs -> ExtenderFilterResult: only the node dlsched nominated passes."""
        result = answer_filter(await _raw_body(request, EXTENDER_MAX_BYTES))
        return _response(*(result if isinstance(result, tuple) else await result))

    @app.post("/scheduler/prioritize", tags=["extender"], openapi_extra=ext)
    async def extender_prioritize(request: Request) -> Response:
        """ExtenderArgs -> HostPriorityList: the nominated node 10, others the policy's score (1-9) or 0."""
        return _response(*answer_prioritize(await _raw_body(request, EXTENDER_MAX_BYTES)))

    @app.post("/scheduler/bind", tags=["extender"], openapi_extra=bind_body)
    def extender_bind(args: dict) -> dict:
        """ExtenderBindingArgs -> ExtenderBindingResult: annotate the GPUs, bind via the API server."""
        if service.mode == "scheduler":
            return {"Error": SCHEDULER_MODE_REFUSAL}
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
    async def empty(request: Request) -> Response:
        """Does nothing: the benchmark's baseline for the server's own overhead."""
        return _response(*answer_empty(await _raw_body(request, OPERATOR_MAX_BYTES)))

    # -- operator ------------------------------------------------------------------------
    @app.get("/api/v1/state", tags=["operator"])
    def cluster_state() -> dict:
        """Nodes (GPUs, VC, cordon, which pod holds which GPUs), VCs, counters, bind outcomes, and
        the configuration the service runs (``config``: policy, its parameters, placement, sharing...)."""
        return {**core.snapshot(), "binds": dict(service.stats), "leadership": service.leadership(),
                "config": service.config, "mode": service.mode_state()}

    @app.get("/api/v1/leader", tags=["operator"])
    def leader() -> dict:
        """This replica's view of leader election (never forwarded): is_leader, the leader's identity."""
        return service.leadership()

    @app.get("/api/v1/queue", tags=["operator"])
    def queue() -> list[dict]:
        """Pending pods in policy order per VC, with the reason each one waits."""
        return core.queue()

    @app.get("/api/v1/eta", tags=["operator"])
    def eta_status() -> dict:
        """The ETA timer: refreshes, the last forward run's time, the dlsched.io/eta annotations
        written / left unchanged / failed (docs/eta.md). ``timer`` is null until the service started it."""
        timer = service.eta_timer
        eta = core.eta
        return {"timer": timer.stats() if timer is not None else None, "refreshes": eta.refreshes,
                "last_refresh_at": eta.last_refresh_at, "last_refresh_ms": round(eta.last_refresh_ms, 3)}

    @app.get("/api/v1/queues", tags=["operator"])
    def queues() -> dict:
        """The queue configuration (ConfigMap ``queues.toml``, docs/queues.md), its last error, and per
        VC its guarantee, GPUs in use, borrowed and lent beside the configured limits and its reclaims, and
        every loan (borrowing and reclaim are enforced live when the queues allow borrowing)."""
        return service.live_queues().report()

    from dlsched.service.whatif import LiveWhatIf, WhatIfBusy, split_params

    live_whatif = LiveWhatIf(core)

    def _other_policy(policy: str | None, placement: str | None, param: list[str]):
        if policy is None:
            if placement is not None or param:
                raise HTTPException(400, "placement= and param= go with policy=NAME")
            return None
        if service.policy_factory is None:
            raise HTTPException(409, "what-if needs a policy factory (dlsched serve sets one)")
        try:
            return service.policy_factory(policy, split_params(param), placement)
        except (ValueError, KeyError, TypeError) as exc:
            why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc   # KeyError's str() is quoted
            raise HTTPException(400, f"policy={policy}: {why}") from None

    def _compare(other, queues=None) -> dict:
        try:
            return live_whatif.compare(other, queues)
        except WhatIfBusy as exc:
            raise HTTPException(429, str(exc)) from None
        except ValueError as exc:   # the queues do not fit the live VCs or the policy
            raise HTTPException(400, f"queues: {exc}") from None

    @app.get("/api/v1/whatif", tags=["operator"], dependencies=[Depends(require_token)])
    def whatif(policy: Annotated[str, Query(min_length=1, max_length=64)],
               placement: Annotated[str | None, Query(max_length=200)] = None,
               param: Annotated[list[str], Query(max_length=32)] = []) -> dict:  # noqa: B006 - FastAPI's list default
        """Each pending pod's estimated start under the running policy and under ``policy`` (with
        ``param=KEY=VALUE`` parameters, ``placement``) from now on, the difference, and per-queue
        and overall wait summaries (docs/eta.md#what-if). 400 names a bad policy or parameter."""
        return _compare(_other_policy(policy, placement, param))

    @app.post("/api/v1/whatif", tags=["operator"], dependencies=[Depends(require_token)],
              openapi_extra={"requestBody": {"required": True, "content": {"text/plain": {
                  "schema": {"type": "string"}}}}})   # TOML text; any content type is read as such
    async def whatif_queues(request: Request,
                            policy: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
                            placement: Annotated[str | None, Query(max_length=200)] = None,
                            param: Annotated[list[str], Query(max_length=32)] = []) -> dict:  # noqa: B006
        """What-if on quotas: the body is ``[[queues]]`` tables in the cluster file's TOML format
        (docs/queues.md#what-if-on-quotas) that replace the running queues in the other forward run,
        optionally with another ``policy`` as in GET. An empty body: fixed VCs (nothing borrows).
        400 names the body's line and key, or a queue that names no live VC."""
        from starlette.concurrency import run_in_threadpool

        from dlsched.traces.cluster_queues import parse_queues_text
        from dlsched.traces.model import TraceError

        raw = await _raw_body(request, OPERATOR_MAX_BYTES)
        try:
            specs = parse_queues_text(raw.decode("utf-8"), "body")
        except UnicodeDecodeError:
            raise HTTPException(400, "body: not UTF-8 text (want [[queues]] TOML)") from None
        except TraceError as exc:
            raise HTTPException(400, str(exc)) from None
        other = _other_policy(policy, placement, param)
        return await run_in_threadpool(_compare, other, specs)

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
        answer = service.observe(obs.node, [(p.uid, p.gpu_util, p.gpu_mem_mib, p.speed) for p in obs.pods])
        if obs.devices:   # counted either way: a read-back this service cannot use is said, not dropped
            binding = getattr(service, "gpu_binding", None)
            answer = {**answer, "devices_recorded": binding.record_devices(obs.node, obs.devices)
                      if binding is not None else "ignored: not --gpu-binding envvar-configmap"}
        return answer

    @app.post("/api/v1/predictions", tags=["operator"], dependencies=[Depends(require_token)],
              response_model=Prediction)
    def predict(req: PredictRequest) -> dict:
        """Predicted GPU utilisation and memory for a model reference and batch size."""
        try:
            return service.predict(req.model, req.batch_size, req.gpu)
        except LookupError as exc:
            raise HTTPException(404, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None

    return Front(app, {"/scheduler/filter": answer_filter, "/scheduler/prioritize": answer_prioritize,
                       "/empty": answer_empty}, token_ok)


class Front:
    """The ASGI app the server runs: refuses oversized bodies before anything reads them, answers
    the ``lean`` paths (POST) from the raw body, and hands everything else to FastAPI. Plain ASGI:
    no per-request task, no middleware stack."""

    def __init__(self, app: FastAPI, lean: dict[str, Answer], token_ok: Callable[[str], bool] | None = None) -> None:
        self.app = app
        self.lean = lean
        self.token_ok = token_ok

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            path = scope["path"]
            limit = EXTENDER_MAX_BYTES if path in EXTENDER_PATHS else OPERATOR_MAX_BYTES
            length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
            if length is None:
                await _reply(send, 411, dumps({"detail": "a Content-Length header is required"}))
                return
            if not length.isdigit() or int(length) > limit:
                await _reply(send, 413, dumps({"detail": f"body larger than {limit} bytes"}))
                return
            if path in GUARDED_PATHS and self.token_ok is not None:
                sent = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
                if not self.token_ok(sent.decode("latin-1")):
                    await _reply(send, 403, dumps({"detail": TOKEN_REQUIRED}))
                    return
            answer = self.lean.get(path) if scope["method"] == "POST" else None
            if answer is not None:
                raw = await _read(receive, limit)
                if raw is None:
                    return   # the client went away
                result = answer(raw) if len(raw) <= limit else (413, dumps({"detail": f"body larger than {limit} "
                                                                                          "bytes"}))
                await _reply(send, *(result if isinstance(result, tuple) else await result))   # a held filter
                return
        await self.app(scope, receive, send)


async def _read(receive, limit: int) -> bytes | None:
    """The request body (reading stops once it passes ``limit``); None when the client disconnected."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit or not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _reply(send, status: int, payload: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]})
    await send({"type": "http.response.body", "body": payload})

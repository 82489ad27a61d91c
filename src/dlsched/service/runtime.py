"""One running service: the core, its durable store and (when connected) the API server bridge.

Start-up order matters for crash safety: the store is opened, the API server's nodes and pods
are listed into the core (bound pods first: their GPUs are taken from their annotations), the
store's assignment table is reconciled with that truth, and only then do the watches and the
HTTP server start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from dlsched.service.core import BindError, SchedulerCore
from dlsched.service.pods import BATCH_ANNOTATION, GPU_RESOURCE, MODEL_ANNOTATION, VC_LABEL

REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def resource_predictor(gpu: str, model_dir: Path | None = None) -> Callable:
    """``predict(job)``: the shipped resource predictor fills a job's predicted GPU utilisation and
    memory from its model annotation (what GPU-sharing placements need). Graph analyses are
    cached per model; a model outside the zoo is read only as an .onnx file in ``model_dir``."""
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    predictor = load_default()
    if predictor is None:
        raise RuntimeError("--predict-resources: no resource predictor is installed "
                           "(train one with `dlsched predictor train`)")

    @lru_cache(maxsize=256)
    def resolve(ref: str):
        if ref.endswith(".onnx"):
            name = Path(ref).name
            if model_dir is None or not REF_RE.match(name) or not (model_dir / name).is_file():
                return None
            ref = str(model_dir / name)
        elif not REF_RE.match(ref):
            return None
        return graph_resolver(ref)

    from dlsched.predictors.resources.stack_calibration import StackCalibration

    calibration = StackCalibration()   # per (GPU type, stack): learnt from the agents' peaks

    def predict(job) -> None:
        job.stack = job.stack or "unknown"   # a live cluster's stack is unknown unless its pods say
        fill_job_predictions([job], predictor, resolve, gpu=gpu, calibration=calibration)
    predict.calibration = calibration
    return predict


@dataclass
class LiveService:
    """What the HTTP app needs: the core, the bridge (None in unit tests), the operator token."""

    core: SchedulerCore
    bridge: object | None = None
    token: str = ""
    scheduler_name: str = "default-scheduler"
    model_dir: Path | None = None
    observe_after: float = 60.0   # seconds a pod runs before agent readings replace its predictions
    stats: dict = field(default_factory=lambda: {"binds": 0, "bind_failures": 0})
    agents: dict = field(default_factory=dict)   # node -> the last inventory its agent posted

    def start(self) -> dict:
        """Reconcile with the API server and start watching; returns what reconciliation found."""
        if self.bridge is None:
            return {}
        node_rv, pod_rv, holding = self.bridge.reconcile()
        dropped = self.core.store.reset_assignments(holding, self.core.now())
        self.core.run_pass()
        self.bridge.start(node_rv, pod_rv)
        return {"pods_holding_gpus": len(holding), "stale_assignments_dropped": dropped}

    def stop(self) -> None:
        if self.bridge is not None:
            self.bridge.stop()
        if self.core.recorder is not None:
            self.core.recorder.close()

    # -- extender bind ------------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind through the API server; '' on success, else the error (the GPUs are returned)."""
        try:
            pod, gpus = self.core.begin_bind(uid, node)
        except BindError as exc:
            return str(exc)
        if (pod.namespace, pod.name) != (namespace, name):
            return f"uid {uid} is pod {pod.key}, not {namespace}/{name}"
        if self.bridge is None:
            error = "no API server connected"
        else:
            error = self.bridge.bind(namespace, name, uid, node, gpus)
        self.core.end_bind(uid, node, error)
        self.stats["binds" if not error else "bind_failures"] += 1
        return error

    # -- node agent -----------------------------------------------------------------------
    def observe(self, node: str, readings: list[tuple[str, float | None, float | None]]) -> dict:
        """Feed an agent's readings to the core; counts what happened to them."""
        nan = float("nan")
        out: dict[str, int] = {}
        for uid, util, mem in readings:
            what = self.core.observe(uid, nan if util is None else util, nan if mem is None else mem,
                                     self.observe_after)
            out[what] = out.get(what, 0) + 1
        return {"node": node, **out}

    # -- operator API ---------------------------------------------------------------------
    def submit_pod(self, namespace: str, name: str, gpus: int, image: str, vc: str | None, model: str | None,
                   batch_size: int | None) -> dict:
        """Create a pod for this scheduler through the API server (it then flows like any pod)."""
        if self.bridge is None:
            raise LookupError("no API server connected: start the service with --kubeconfig or --api-server")
        meta: dict = {"name": name, "namespace": namespace, "annotations": {}, "labels": {}}
        if vc:
            meta["labels"][VC_LABEL] = vc
        if model:
            meta["annotations"][MODEL_ANNOTATION] = model
        if batch_size:
            meta["annotations"][BATCH_ANNOTATION] = str(batch_size)
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"schedulerName": self.scheduler_name, "containers": [{
                    "name": "main", "image": image,
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}}}]}}
        return self.bridge.create_pod(namespace, body)

    def predict(self, model: str, batch_size: int, gpu: str) -> dict:
        """Predicted GPU utilisation and memory of a model at a batch size (the shipped predictor)."""
        from dlsched.core.job import Job
        from dlsched.predictors.resources.default import load_default
        from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

        if not REF_RE.match(model) or ".." in model:
            raise ValueError("model must be a zoo model name or an .onnx file name (letters, digits, '_', '-', '.')")
        ref = model
        if model.endswith(".onnx"):
            if self.model_dir is None:
                raise ValueError("ONNX files are served only with --model-dir")
            path = self.model_dir / model
            if not path.is_file():
                raise LookupError(f"no model file {model} in the model directory")
            ref = str(path)
        predictor = load_default()
        if predictor is None:
            raise LookupError("no resource predictor is installed (train one with `dlsched predictor train`)")
        job = Job("predict", "default", 1, 0.0, float("nan"), onnx_ref=ref if ref.endswith(".onnx") else "",
                  model_name="" if ref.endswith(".onnx") else ref, batch_size=batch_size)
        if not fill_job_predictions([job], predictor, graph_resolver, gpu=gpu):
            raise LookupError(f"model {model!r} could not be resolved or analysed")
        nan = job.pred_gpu_util != job.pred_gpu_util
        return {"model": model, "batch_size": batch_size, "gpu": gpu,
                "gpu_util": None if nan else job.pred_gpu_util,
                "gpu_mem_mib": None if job.pred_gpu_mem_mib != job.pred_gpu_mem_mib else job.pred_gpu_mem_mib}

"""Data-sheet figures of common training GPUs, turned into roofline constants.

Why: the shipped default predictor may not be trained on Lucid's non-commercial profiles, but a
roofline model needs no training data: its device constants come from the vendor data sheet and
its host-side constants are a-priori figures for PyTorch eager mode. The same table lets the
default answer ``--gpu A100`` differently from ``--gpu T4``.

Peak figures are the vendors' published dense numbers (NVIDIA data sheets for Tesla P100 SXM2,
V100 SXM2, T4, A100 SXM4 40 GB, H100 SXM5, GeForce RTX 3090). TF32/sparsity figures are not used.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.predictors.resources.roofline import RooflineRegressor


@dataclass(frozen=True)
class GpuSpec:
    """Peak FP32 FLOP/s and memory bandwidth in bytes/s, from the data sheet."""

    fp32_flops: float
    mem_bytes_per_s: float


SPECS: dict[str, GpuSpec] = {
    "P100": GpuSpec(10.6e12, 732e9),
    "V100": GpuSpec(15.7e12, 900e9),
    "T4": GpuSpec(8.1e12, 320e9),
    "RTX3090": GpuSpec(35.6e12, 936e9),
    "A100": GpuSpec(19.5e12, 1555e9),
    "H100": GpuSpec(67e12, 3350e9),
}
#: share of the peaks that large training kernels reach (an a-priori assumption, not fitted)
ACHIEVED_FRACTION = 0.7
#: end-to-end speed-up of tensor-core work under mixed precision (NVIDIA's "2-3x" guidance; not
#: the data-sheet ratio, which counts peak tensor throughput that training steps never reach)
AMP_TENSOR_SPEEDUP = 3.0
#: mixed precision halves activation traffic; weights stay FP32 masters
AMP_TRAFFIC_FACTOR = 0.5
#: host side of PyTorch eager training as first guessed, with no data: shortest kernel, host time
#: per launch (dispatch + autograd bookkeeping), fixed host time per step, overlap exponent. Scored
#: on Lucid (leave-one-model-out) these give RMSLE 0.617; kept for comparison ("datasheet_apriori").
APRIORI_HOST_CONSTANTS = {"kernel_floor_s": 5e-6, "launch_s": 20e-6, "step_s": 5e-3, "overlap_q": 4.0}
#: the host side the shipped default uses: the four host constants fitted (soft-L1 in log space,
#: ``RooflineRegressor(fixed=device_constants("V100"))``) on all 66 rows of Lucid's profiles
#: (Hu et al., "Lucid: A Non-intrusive, Scalable and Interpretable Scheduler for Deep Learning
#: Training Jobs", ASPLOS 2023; data under S-Lab License 1.0), rounded to two digits (q to three),
#: with each Lucid model's graph from the zoo (PointNet: the classification network). Four figures
#: about PyTorch's host, not the data. The device constants stay data-sheet figures, so the fit
#: does not pin them to Lucid's (unrecorded) GPU. ``dlsched predictor evaluate --json |
#: jq .utilization.host_constants`` refits them; a test checks these match. Scored with the held-out
#: model left out of the fit each time, this model gets RMSLE 0.33 (docs/predictors.md).
#: Against permissive data (``predictor evaluate --json | jq .utilization.host_crosscheck``):
#: Gavel's throughputs (MIT) give launch_s 59 us with floor and q held here; they cannot pin the
#: floor and q, and constants from Gavel and Orion (MIT) alone score RMSLE 0.70 on Lucid.
HOST_CONSTANTS = {"kernel_floor_s": 1.7e-5, "launch_s": 6.4e-5, "step_s": 3.6e-3, "overlap_q": 1.44}
HOST_ATTRIBUTION = ("host constants fitted on Lucid's profiles (Hu et al., ASPLOS 2023; S-Lab License 1.0), "
                    "device constants from NVIDIA data sheets")
DEFAULT_GPU = "V100"


def canonical(gpu: str) -> str | None:
    """Table key for a user-given GPU name ("v100", "Tesla V100-SXM2", "a100-40gb"), or None."""
    flat = gpu.upper().replace(" ", "").replace("-", "").replace("_", "")
    for key in sorted(SPECS, key=len, reverse=True):
        if key in flat:
            return key
    return None


def device_constants(gpu: str) -> dict[str, float]:
    """The four device constants of the roofline for ``gpu`` (see :data:`SPECS`); unknown names
    raise ``KeyError``."""
    key = canonical(gpu)
    if key is None:
        raise KeyError(f"no data-sheet figures for GPU {gpu!r}; known: {', '.join(SPECS)}")
    spec = SPECS[key]
    return {"flops_per_s": ACHIEVED_FRACTION * spec.fp32_flops, "amp_tensor_speedup": AMP_TENSOR_SPEEDUP,
            "bytes_per_s": ACHIEVED_FRACTION * spec.mem_bytes_per_s, "amp_traffic_factor": AMP_TRAFFIC_FACTOR}


def datasheet_constants(gpu: str, host: dict[str, float] | None = None) -> dict[str, float]:
    """Roofline constants for ``gpu``: data-sheet device figures plus ``host`` (default
    :data:`HOST_CONSTANTS`); unknown names raise ``KeyError``."""
    return {**device_constants(gpu), **(HOST_CONSTANTS if host is None else host)}


_MODELS: dict[str, RooflineRegressor] = {}


def datasheet_model(gpu: str) -> RooflineRegressor:
    """A roofline utilisation model for ``gpu`` built from data-sheet figures alone (built once
    per GPU type; treat it as read-only)."""
    key = canonical(gpu) or gpu
    if key not in _MODELS:
        _MODELS[key] = RooflineRegressor.from_constants(**datasheet_constants(gpu))
    return _MODELS[key]

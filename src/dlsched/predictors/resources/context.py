"""The memory a training process holds before its first tensor, split into what it is.

    context = CUDA context + library modules + cuBLAS/cuBLASLt workspaces + allocator floor

Each part depends on the software stack, not on the model, which is why one fitted constant
cannot serve every cluster. The parts, and where each figure comes from:

* **CUDA context** (driver state plus the runtime's loaded modules), by module loading mode.
  PyTorch's own measurement when it made lazy loading its default (pytorch/pytorch#86509,
  PyTorch >= 1.13 sets ``CUDA_MODULE_LOADING=LAZY`` when unset; lazy loading needs CUDA >= 11.7
  and is the driver default from CUDA 12.2): 287,047,680 B lazy vs 666,632,192 B eager after
  ``torch.cuda.init``: :data:`CUDA_CONTEXT_MIB`.
* **cuBLAS/cuBLASLt workspaces**, by GPU generation: cuBLAS's default
  ``CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8`` is 2 x 4 MiB + 8 x 16 KiB = 8.125 MiB per handle and
  stream (``:4096:8`` = 32 MiB on Hopper); PyTorch's cuBLASLt workspace (pytorch/pytorch#120925,
  following the cuBLAS guide) is 1 MiB, 4 MiB on Ampere cards with >= 24 GB and 32 MiB on
  Hopper and later: :func:`workspace_mib`.
* **allocator floor**: the caching allocator's first small segment (2 MiB) and first large one
  (20 MiB, ``kLargeBuffer``), held even when nearly empty: :data:`ALLOCATOR_FLOOR_MIB`. Rounding
  and fragmentation beyond it grow with the job and sit in the fitted slopes (``act_scale``).
* **library modules** (cuBLAS/cuDNN kernels and handles loaded on first use) and cuDNN's
  convolution workspaces: no documented figure; for the stack behind GPUMemNet's tables it is
  what is left of its measured floor (the smallest job it ever measured: an FC net of one neuron
  on MNIST, 1,237 MiB on an A100-40GB, ``horus_memory_formula_vs_measured_mlp.csv``) after the
  three parts above; for a lazily loading stack that part is scaled by the measured lazy/eager
  ratio of the context (an estimate: ``scripts/measure_gpu_jobs.py`` measures it as NVML's used
  memory minus ``torch.cuda.max_memory_reserved``).

A stack is named by a label (the service's ``dlsched.io/stack`` annotation, ``--stack``):
``gpumemnet-a100`` (the TIMM fit's own stack, whose intercept is fitted), ``lucid`` (the cluster
behind Lucid's profiles: its smallest measured training jobs, NeuMF at batch 64 and 128 in fp32
and AMP, hold 2,050 MiB, PPO 2,051 and TD3 2,059 MiB, nvidia-smi, so that floor is its context:
:data:`LUCID_FLOOR_MIB`), ``lazy`` (PyTorch >= 1.13 with CUDA >= 11.7: today's default) and
``eager`` (older stacks, or ``CUDA_MODULE_LOADING=EAGER``).

``unknown`` **reserves the largest known context** and spans the band down to the smallest, so
neither the reserve nor the band is below the truth whichever of these stacks the cluster runs
(issue 36: reserving the lazy context instead put NeuMF@128 at 557 MiB against Lucid's measured
2,050, under-predicted 68 % of Lucid's jobs by more than 10 % and 2 of the 6 A100 jobs of
``docs/examples/observed.csv``, and doubled the simulated OOM crashes of Horus on horus-wlarge;
see ``docs/predictors.md``). It over-reserves a lazily loading stack by up to ~1.5 GiB a job until
live calibration (:mod:`.stack_calibration`) learns the cluster's own intercept, or a
``dlsched.io/stack: lazy`` annotation says which stack it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

MIB = 2.0**20
#: bare CUDA context after torch.cuda.init(), pytorch/pytorch#86509 (bytes -> MiB)
CUDA_CONTEXT_MIB = {"lazy": 287_047_680 / MIB, "eager": 666_632_192 / MIB}
#: the caching allocator's first small (2 MiB) and large (20 MiB) segments
ALLOCATOR_FLOOR_MIB = 2.0 + 20.0
#: the smallest training job GPUMemNet measured (FC net, 1 neuron, MNIST; A100-40GB, nvidia-smi)
GPUMEMNET_FLOOR_MIB = 1237.0
#: the smallest training jobs Lucid measured (NeuMF b64/b128, fp32 and AMP: 2,050 MiB; PPO 2,051;
#: TD3 2,059), nvidia-smi, on a >= 24 GB card whose type Lucid's release does not record
LUCID_FLOOR_MIB = 2050.0
LUCID_STACK = "lucid"
CUBLAS_DEFAULT_MIB = (4096 * 2 + 16 * 8) / 1024   # :4096:2:16:8
CUBLAS_HOPPER_MIB = 4096 * 8 / 1024               # :4096:8
DEFAULT_STACK = "unknown"
FIT_STACK = "gpumemnet-a100"


def gpu_generation(gpu: str) -> str:
    """``hopper`` (H100/H200/H20/GH200, and Blackwell B100/B200/GB200), ``ampere-large`` (A100,
    A40, A6000, A10 and other Ampere cards with >= 24 GB), ``other``."""
    g = gpu.upper().replace(" ", "")
    if any(t in g for t in ("H100", "H200", "H20", "GH200", "B100", "B200", "GB200", "H800")):
        return "hopper"
    if any(t in g for t in ("A100", "A40", "A6000", "A10", "A30", "A800", "RTX3090", "A5000")):
        return "ampere-large"
    return "other"


def workspace_mib(gpu: str) -> float:
    """cuBLAS handle workspace + PyTorch's cuBLASLt workspace on ``gpu``'s generation."""
    gen = gpu_generation(gpu)
    if gen == "hopper":
        return CUBLAS_HOPPER_MIB + 32.0
    return CUBLAS_DEFAULT_MIB + (4.0 if gen == "ampere-large" else 1.0)


@dataclass(frozen=True)
class StackContext:
    """One stack's context on one GPU type, part by part (MiB), and where the figures come from."""

    label: str
    cuda_context_mib: float
    workspace_mib: float
    allocator_floor_mib: float
    libraries_mib: float
    source: str

    @property
    def total_mib(self) -> float:
        return self.cuda_context_mib + self.workspace_mib + self.allocator_floor_mib + self.libraries_mib

    def parts(self) -> dict[str, float | str]:
        return {"stack": self.label, "cuda_context_mib": self.cuda_context_mib, "workspace_mib": self.workspace_mib,
                "allocator_floor_mib": self.allocator_floor_mib, "libraries_mib": self.libraries_mib,
                "total_mib": self.total_mib, "source": self.source}


def eager_libraries_mib() -> float:
    """Library modules of an eagerly loading stack: GPUMemNet's measured floor less the
    documented parts (its A100's workspaces)."""
    return GPUMEMNET_FLOOR_MIB - CUDA_CONTEXT_MIB["eager"] - workspace_mib("A100") - ALLOCATOR_FLOOR_MIB


@lru_cache(maxsize=1024)
def stack_context(label: str, gpu: str = "unknown", fitted_context_mib: float | None = None) -> StackContext:
    """The context of stack ``label`` on ``gpu``. ``fitted_context_mib`` is the fitted intercept
    of the training-memory model (the ``gpumemnet-a100`` stack's whole context, convolution
    workspaces included); without it that stack falls back to its measured floor."""
    key = (label or DEFAULT_STACK).strip().lower()
    ws = workspace_mib(gpu)
    eager_lib = eager_libraries_mib()
    if key == FIT_STACK:
        total = fitted_context_mib if fitted_context_mib is not None else GPUMEMNET_FLOOR_MIB
        ctx, floor = CUDA_CONTEXT_MIB["eager"], ALLOCATOR_FLOOR_MIB
        return StackContext(key, ctx, workspace_mib("A100"), floor, total - ctx - workspace_mib("A100") - floor,
                            "fitted intercept of the TIMM table (GPUMemNet's stack, A100-40GB); libraries = "
                            "the rest after the documented parts")
    if key == LUCID_STACK:
        ctx, floor = CUDA_CONTEXT_MIB["eager"], ALLOCATOR_FLOOR_MIB
        return StackContext(key, ctx, CUBLAS_DEFAULT_MIB + 4.0, floor,
                            LUCID_FLOOR_MIB - ctx - CUBLAS_DEFAULT_MIB - 4.0 - floor,
                            "Lucid's smallest measured jobs (NeuMF, PPO, TD3: 2,050-2,059 MiB, nvidia-smi); "
                            "their own bytes (< 10 MiB) are counted in it; CUDA context taken as eager, "
                            "libraries = the rest")
    if key == DEFAULT_STACK:
        largest = max(_KNOWN_CONTEXTS, key=lambda s: stack_context(s, gpu, fitted_context_mib).total_mib)
        ctx = stack_context(largest, gpu, fitted_context_mib)
        return StackContext(key, ctx.cuda_context_mib, ctx.workspace_mib, ctx.allocator_floor_mib,
                            ctx.libraries_mib, f"the largest known context ({largest}: {ctx.source}); the band "
                            "reaches down to the smallest")
    if key == "eager":
        return StackContext(key, CUDA_CONTEXT_MIB["eager"], ws, ALLOCATOR_FLOOR_MIB, eager_lib,
                            "CUDA context: pytorch#86509 (eager); libraries: GPUMemNet's measured floor less "
                            "the documented parts")
    if key == "lazy":
        ratio = CUDA_CONTEXT_MIB["lazy"] / CUDA_CONTEXT_MIB["eager"]
        return StackContext(key, CUDA_CONTEXT_MIB["lazy"], ws, ALLOCATOR_FLOOR_MIB, eager_lib * ratio,
                            "CUDA context: pytorch#86509 (lazy); libraries: the eager figure scaled by the "
                            "measured lazy/eager context ratio (estimate)")
    raise ValueError(f"unknown stack {label!r}; known: {', '.join(KNOWN_STACKS)}")


KNOWN_STACKS = (DEFAULT_STACK, "lazy", "eager", FIT_STACK, LUCID_STACK)
#: the stacks with a context of their own (``unknown`` is the largest of them)
_KNOWN_CONTEXTS = ("lazy", "eager", FIT_STACK, LUCID_STACK)


@lru_cache(maxsize=1024)
def context_range(gpu: str, fitted_context_mib: float | None = None) -> tuple[float, float]:
    """(smallest, largest) context of the known stacks on ``gpu``: the band where the stack is unknown."""
    totals = [stack_context(s, gpu, fitted_context_mib).total_mib for s in _KNOWN_CONTEXTS]
    return min(totals), max(totals)


__all__ = ["CUDA_CONTEXT_MIB", "DEFAULT_STACK", "FIT_STACK", "KNOWN_STACKS", "LUCID_FLOOR_MIB", "LUCID_STACK",
           "StackContext", "context_range",
           "gpu_generation", "stack_context", "workspace_mib"]

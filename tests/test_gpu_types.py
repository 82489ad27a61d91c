"""Issue 25: one list of GPU types (dlsched.core.gpus) for the simulator, cluster files and the predictors."""

from __future__ import annotations

import pytest

from dlsched.core import gpus
from dlsched.core.cluster import GPU_TYPES, gpu_type
from dlsched.predictors.resources import gpu_memory, gpu_specs


def test_the_simulator_reads_the_one_list() -> None:
    assert list(GPU_TYPES) == gpus.names()
    for model in gpus.KNOWN:
        t = GPU_TYPES[model.name]
        assert (t.memory_mib, t.idle_watts, t.max_watts) == (model.memory_mib, model.idle_watts, model.max_watts)
    assert gpu_type("a100_80gb").memory_mib == 80 * 1024 and gpu_type("V100").memory_mib == 32 * 1024


def test_the_predictors_tables_agree_with_it() -> None:
    # the roofline's data sheet and the memory table hold no GPU the one list lacks, with the same figures
    for name, spec in gpu_specs.SPECS.items():
        model = gpus.BY_NAME[name]
        assert (model.fp32_flops, model.mem_bytes_per_s) == (spec.fp32_flops, spec.mem_bytes_per_s)
    for name, gib in gpu_memory.MEMORY_GIB.items():
        assert gpus.BY_NAME[name].memory_mib == gib * 1024


def test_find_and_require() -> None:
    assert gpus.find("Tesla V100-SXM2") is None
    assert gpus.find("Tesla V100-SXM2", fuzzy=True).name == "V100"
    assert gpus.find("A100", fuzzy=True).name == "A100"  # never the shorter A10
    assert gpus.find("l40").name == "L40"
    with pytest.raises(ValueError, match=r"^--gpu Z9000: unknown GPU type; known: K80, P100, V100, "):
        gpus.require("Z9000")
    with pytest.raises(ValueError, match=r"unknown GPU type 'Z9000'; choose from K80, "):
        gpu_type("Z9000")


def test_predict_refuses_an_unknown_gpu_like_simulate() -> None:
    # `predict --gpu Z9000` used to fall back to V100 while `simulate --gpu Z9000` was an error
    pytest.importorskip("onnx")
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    res = CliRunner().invoke(app, ["predict", "resnet50", "--gpu", "Z9000"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"error: --gpu 'Z9000': unknown GPU type; known: {', '.join(gpus.names())}"]

"""Issue 36 point 4: a simulation never aborts on one job's repeated out-of-memory crashes. The
retry rule (models/failure.py): the first crash corrects the job's request to its observed peak;
a second one makes it run alone (request = the GPU's memory) until it has run. And the simulator
predicts memory for the stack the live service assumes (``unknown``) unless the job names one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.models import failure

CMD = ["simulate", "--workload", "horus-wlarge", "--policy", "horus", "--max-jobs-per-gpu", "2",
       "--predict-resources", "--speed-model", "colocation", "--failure-model", "oom", "--profiles", "lucid"]


@pytest.fixture()
def models(monkeypatch: pytest.MonkeyPatch) -> list[failure.OutOfMemory]:
    """Every OutOfMemory the runs build, to read its per-job crash counts afterwards."""
    made: list[failure.OutOfMemory] = []
    init = failure.OutOfMemory.__init__

    def spy(self: failure.OutOfMemory, *a: object, **kw: object) -> None:
        init(self, *a, **kw)
        made.append(self)

    monkeypatch.setattr(failure.OutOfMemory, "__init__", spy)
    return made


@pytest.mark.parametrize("profiles", ["lucid", "builtin"])
def test_the_reported_command_never_aborts_and_no_job_crashes_a_third_time(
        tmp_path: Path, shared: Path, models: list[failure.OutOfMemory], profiles: str) -> None:
    """The issue's command (Lucid's truth) and the built-in truth, whose memory is further above
    the predictions (issue 36: an unknown stack reserves the largest known context, Lucid's own,
    so on Lucid's truth few jobs crash and the built-in truth exercises the rule)."""
    isolated = 0
    for seed in (range(5) if profiles == "lucid" else (2, 4)):
        out = tmp_path / f"s{seed}"
        res = CliRunner().invoke(app, [*CMD[:-1], profiles, "--seed", str(seed), "--out", str(out)])
        assert res.exit_code == 0, res.output
        summary = json.loads((out / "summary.json").read_text())
        oom = models[-1]
        assert summary["failures"] == sum(oom.ooms.values())   # every crash was an OOM, each counted
        assert max(oom.ooms.values(), default=0) <= 2, oom.ooms   # the second crash isolates the job
        isolated += oom.isolated
        assert oom.isolated == sum(1 for n in oom.ooms.values() if n == 2)
        if profiles == "lucid":   # Lucid's own stack is the largest known context: no job overfills
            assert summary["failures"] == 0
    if profiles == "builtin":
        assert isolated >= 1   # the rule was exercised, not just never needed


def test_an_isolated_job_requests_the_whole_gpu_and_the_first_crash_its_peak() -> None:
    """The rule on one job by hand: crash 1 -> request = observed peak; crash 2 -> whole GPU."""
    from dlsched.core.job import Job

    class State:
        node_mem = (16_000.0,)

    job = Job("j", "vc", 1, 0.0, 100.0, gpu_mem_mib=9_000.0)
    job.pred_gpu_mem_mib = 5_000.0
    job.placement = ((0, 1),)
    job.observed_mem_mib = 9_000.0
    oom = failure.OutOfMemory()
    oom._retry_rule(job, State(), 10.0)
    assert job.pred_gpu_mem_mib == 9_000.0 and job.prior_gpu_mem_mib == 5_000.0 and oom.isolated == 0
    oom._retry_rule(job, State(), 20.0)
    assert job.pred_gpu_mem_mib == 16_000.0 and oom.isolated == 1


def test_simulated_jobs_are_predicted_for_the_live_default_stack(tmp_path: Path) -> None:
    """The same job gets the same memory prediction in the simulator (no stack named) as from the
    live service (stack ``unknown``) and `predict --stack unknown`."""
    from dlsched.core.job import Job
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions

    class Analysis:
        def features(self, batch: int, seq: int | None = None) -> dict[str, float]:
            return {"batch": float(batch), "param_bytes": 100 * 2**20, "saved_bytes": 40.0 * batch * 2**20,
                    "saved_bytes_amp": 20.0 * batch * 2**20, "max_tensor_bytes": 2**20, "saved_attn_bytes": 0.0,
                    "saved_attn_bytes_amp": 0.0, "n_kernels": 60.0, "flops": 1e9 * batch,
                    "flops_tensor": 9e8 * batch, "bytes_accessed": 4e8}

    pred = load_default()
    sim, live = (Job(n, "vc", 1, 0.0, 1.0, model_name="m", batch_size=16) for n in ("sim", "live"))
    live.stack = "unknown"
    fill_job_predictions([sim, live], pred, lambda ref: Analysis(), gpu="A100")
    assert sim.pred_gpu_mem_mib == live.pred_gpu_mem_mib
    direct = pred.predict_mem_mib(Analysis().features(16), "A100", stack="unknown")[0]
    assert sim.pred_gpu_mem_mib == pytest.approx(direct)

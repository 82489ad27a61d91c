"""Ground truths no predictor writes (issue 23): named truths, the pair cap at time slicing, the
seeded memory error, and the proof that swapping the predictor moves predictions and decisions
but not the truth."""

from __future__ import annotations

import math

import pytest

from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.experiments.sharing.run import PolicyRun, prepared, run
from dlsched.models.colocation_table import builtin_table
from dlsched.models.pair_sanity import below_time_slicing
from dlsched.models.truth import MEMORY_LOG_ERROR_DECILES, resolve_truth
from dlsched.run.workload import predictions as workload_predictions


def test_builtin_truth_caps_pairs_below_time_slicing_and_says_so():
    raw, capped = resolve_truth("builtin-raw"), resolve_truth("builtin")
    worst = below_time_slicing(raw.table, "V100")[0]
    # Gavel's V100: two Recommendation bs512 jobs at 5.77x each, 0.35 of one GPU's work together
    assert (worst.a, worst.b) == ("recommendation_vae-bs512", "recommendation_vae-bs512")
    assert worst.s_a == pytest.approx(5.77, abs=0.01) and worst.combined == pytest.approx(0.347, abs=0.001)
    counts = {g: len(below_time_slicing(raw.table, g)) for g in raw.table.pairs}
    assert counts == {"K80": 81, "P100": 46, "V100": 72}
    assert len(capped.capped) == 199 and below_time_slicing(capped.table) == []
    t = capped.table
    i = next(k for k, jt in enumerate(t.types) if jt.type_id == "recommendation_vae-bs512")
    r50 = next(k for k, jt in enumerate(t.types) if jt.type_id == "resnet50-bs16")
    assert t.pairs["V100"][(i, i)] == pytest.approx(2.0)  # a self pair at time slicing: 2x each
    # asymmetry kept: 10.97 / 3.40 (combined 0.385) -> each side x 0.385, together exactly 1
    s_a, s_b = t.pairs["V100"][(i, r50)], t.pairs["V100"][(r50, i)]
    assert 1 / s_a + 1 / s_b == pytest.approx(1.0) and s_a / s_b == pytest.approx(10.97 / 3.40, rel=0.01)
    # pairs at or above time slicing are untouched
    assert sum(1 for g in t.pairs for k in t.pairs[g] if t.pairs[g][k] != raw.table.pairs[g][k]) <= 2 * 199


def test_builtin_memory_is_the_estimate_times_a_seeded_measured_error():
    truth = resolve_truth("builtin")
    est = {jt.type_id: jt.gpu_mem_mib for jt in builtin_table().types}
    lo, hi = math.exp(MEMORY_LOG_ERROR_DECILES[0]), math.exp(MEMORY_LOG_ERROR_DECILES[-1])
    s0, s1 = truth.table_for(0), truth.table_for(1)
    ratios = [jt.gpu_mem_mib / est[jt.type_id] for jt in s0.types]
    assert all(lo - 0.01 <= r <= hi + 0.01 for r in ratios)
    assert sum(r > 1.1 for r in ratios) >= 5 and sum(r < 0.9 for r in ratios) >= 5  # both ways, as measured
    assert [jt.gpu_mem_mib for jt in truth.table_for(0).types] == [jt.gpu_mem_mib for jt in s0.types]
    assert [jt.gpu_mem_mib for jt in s0.types] != [jt.gpu_mem_mib for jt in s1.types]
    assert s0.pairs is truth.table.pairs  # memory is all a seed changes


def test_unknown_truth_names_the_value():
    with pytest.raises(ValueError, match="unknown truth 'nope'"):
        resolve_truth("nope")


class _Halved:
    """Another predictor: the shipped one with half its memory predictions."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def predict_util(self, feats, gpu):
        return self.inner.predict_util(feats, gpu)

    def predict_mem_mib(self, feats, gpu, **kw):
        m = self.inner.predict_mem_mib(feats, gpu, **kw)
        return None if m is None else tuple(0.5 * v for v in m)


def test_swapping_the_predictor_changes_predictions_and_decisions_not_the_truth(monkeypatch):
    from dlsched.predictors.resources import default

    spec = PolicyRun("OBP", "obp", 2)
    workload_predictions.cache_clear()
    before = prepared("horus-wlarge", 0)
    runs_before = run("horus-wlarge", spec, 0).metrics
    shipped = default.load_default
    monkeypatch.setattr(default, "load_default", lambda *a, **k: _Halved(shipped(*a, **k)))
    workload_predictions.cache_clear()
    try:
        after = prepared("horus-wlarge", 0)
        runs_after = run("horus-wlarge", spec, 0).metrics
    finally:
        workload_predictions.cache_clear()
    truth = [(j.job_id, true_util(j), true_mem(j), true_duration(j)) for j in before.trace.jobs]
    assert truth == [(j.job_id, true_util(j), true_mem(j), true_duration(j)) for j in after.trace.jobs]
    # the wrapper is asked with the same stack (unknown) as the shipped predictor, so each of its
    # predictions is half the shipped one (before issue 36's path fix it was asked for the fit
    # stack's larger context: resnet18_cifar@16 got 1,075 MiB halved against 929 MiB shipped)
    pairs = [(a.pred_gpu_mem_mib, b.pred_gpu_mem_mib) for a, b in zip(after.trace.jobs, before.trace.jobs)
             if not math.isnan(b.pred_gpu_mem_mib)]
    by_predictor = [(a, b) for a, b in pairs if a == pytest.approx(0.5 * b, rel=1e-9)]
    assert len(by_predictor) >= len(pairs) // 2   # the predictor changed (the rest: the noisy prior)
    assert all(a < b for a, b in by_predictor)
    assert runs_after["decisions"] != runs_before["decisions"]
    assert runs_after["failures"] > runs_before["failures"]  # halved requests overfill GPUs more often
    speed = resolve_truth().speed_model()
    a, b = before.trace.jobs[:2]
    assert speed.pair(a, b, "V100") == speed.pair(after.trace.jobs[0], after.trace.jobs[1], "V100")


def test_oom_failures_with_real_predictions_and_none_with_perfect_ones():
    real = [run("horus-wlarge", PolicyRun("Horus", "horus", 2), s).metrics["failures"] for s in (0, 1)]
    perfect = [run("horus-wlarge", PolicyRun("Horus", "horus", 2), s, "perfect").metrics["failures"]
               for s in (0, 1)]
    assert min(real) > 0 and perfect == [0.0, 0.0]


def test_lucid_truth_is_measured(shared):
    truth = resolve_truth("lucid")
    assert truth.memory_error is None and truth.table.name == "lucid"
    wl = prepared("horus-wlarge", 0, truth=truth)
    mems = {jt.type_id: jt.gpu_mem_mib for jt in truth.table.types}
    assert all(true_mem(j) == mems[j.name] for j in wl.trace.jobs)
    assert all(true_mem(j) <= 8 * 1024 for j in wl.trace.jobs)  # only types that fit an RTX 2080 alone


#: today's model's out-of-fold Lucid errors (issue 36's asymmetric fit with its <= 2 % lift)
TODAYS_DECILES = (-2.383, -1.263, -0.781, -0.238, -0.129, -0.053, -0.025, 0.084, 0.165, 0.37, 1.316)


def test_the_truths_memory_deciles_are_a_definition_not_todays_model(shared):
    """MEMORY_LOG_ERROR_DECILES is issue 24's measurement and defines the built-in truth; the same
    measurement on today's model gives its own errors (recorded here, so a refit that moves them is
    seen), and the truth does not follow them (issue 36 point 5: explained, not re-derived)."""
    from dlsched.models.truth import measure_memory_errors

    measured = measure_memory_errors(shared / "profiles" / "lucid" / "single_data.csv")
    assert measured == pytest.approx(TODAYS_DECILES, abs=2e-3)
    # the asymmetric fit over-predicts: its median error is below zero, issue 24's was above, and
    # its smallest value is an over-prediction by e^2.38 = 10.8x
    assert measured[5] < 0 < MEMORY_LOG_ERROR_DECILES[5] and measured[1] < MEMORY_LOG_ERROR_DECILES[1]
    assert resolve_truth().memory_error.deciles == MEMORY_LOG_ERROR_DECILES

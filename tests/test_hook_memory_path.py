"""The simulator's prediction hook asks every predictor with the job's stack (issue 36 point 3):
a wrapper around the shipped predictor must see the predictions the live service makes, not the
fit stack's larger context."""

from __future__ import annotations

import pytest

from dlsched.core.job import Job
from dlsched.predictors.resources.hook import fill_job_predictions, mem_keywords


class _Forwarding:
    """A wrapper that forwards whatever keywords it is given."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def predict_util(self, feats, gpu):
        return self.inner.predict_util(feats, gpu)

    def predict_mem_mib(self, feats, gpu, **kw):
        return self.inner.predict_mem_mib(feats, gpu, **kw)


class _StackOnly(_Forwarding):
    def predict_mem_mib(self, feats, gpu, stack=None):
        return self.inner.predict_mem_mib(feats, gpu, stack=stack)


def _job(model: str, batch: int, stack: str = "") -> Job:
    return Job(f"{model}-{batch}-{stack}", "vc", 1, 0.0, 60.0, model_name=model, batch_size=batch, stack=stack)


def test_the_keywords_a_predictor_takes():
    assert mem_keywords(lambda f, g: None) == frozenset()
    assert mem_keywords(lambda f, g, stack=None: None) == {"stack"}
    assert mem_keywords(lambda f, g, **kw: None) == {"meta", "stack"}


@pytest.mark.parametrize("wrapper", [_Forwarding, _StackOnly])
def test_a_wrapper_gets_the_shipped_predictors_stack(wrapper):
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.graph_source import graph_features

    pred = load_default()
    if pred is None:
        pytest.skip("no default predictor shipped")
    ref = [_job("ResNet18", 16), _job("ResNet18", 16, "eager")]
    wrapped = [_job("ResNet18", 16), _job("ResNet18", 16, "eager")]
    resolve = lambda name: graph_features(name, 16)  # noqa: E731 - a feature dict per reference
    assert fill_job_predictions(ref, pred, resolve, gpu="A100") == 2
    assert fill_job_predictions(wrapped, wrapper(pred), resolve, gpu="A100") == 2
    assert [j.pred_gpu_mem_mib for j in wrapped] == [j.pred_gpu_mem_mib for j in ref]
    # and that is the prediction for stack unknown (the live default): the largest known context's,
    # above the eager stack's
    feats = {**graph_features("ResNet18", 16), "batch": 16.0, "amp": 0.0}
    assert ref[0].pred_gpu_mem_mib == pred.predict_mem_mib(feats, "A100", stack="unknown")[0]
    assert ref[0].pred_gpu_mem_mib > ref[1].pred_gpu_mem_mib

"""Rolling estimate P_R (Helios Algorithm 1) on hand-made jobs, with exact expected values."""

from __future__ import annotations

import pytest

from dlsched.core.job import Job, JobState, OracleAccessError
from dlsched.predictors.duration.names import NameClusterer, closest_name, job_bucket, name_bucket
from dlsched.predictors.duration.rolling import (
    ANON_STREAM,
    FALLBACK,
    NAME_MATCH,
    NEW_USER,
    USER_GPUS,
    RollingEstimator,
)


def job(user: str, name: str, gpus: int, duration: float = 0.0, job_id: str = "x") -> Job:
    """A finished job: its finish revealed ``duration`` (estimators learn from nothing else)."""
    j = Job(job_id, "vc", gpus, 0.0, duration, user=user, name=name)
    j.state = JobState.FINISHED
    return j


def test_an_unfinished_job_teaches_nothing_unless_history_hands_its_duration() -> None:
    r = RollingEstimator()
    running = Job("r", "vc", 1, 0.0, 500.0, user="u", name="n")
    running.state = JobState.RUNNING
    with pytest.raises(OracleAccessError, match="has not finished"):
        r.observe(running)
    assert r.n_observed == 0
    r.observe(Job("h", "vc", 1, 0.0, 500.0, user="u", name="n"), 300.0)  # history: the recorded 300 s
    assert r.n_observed == 1 and r.predict(job("u", "n", 1)) == 300.0


@pytest.fixture
def est() -> RollingEstimator:
    r = RollingEstimator(decay=0.5)
    for j in (job("u1", "train_resnet_run1", 1, 100), job("u1", "train_resnet_run2", 1, 200),
              job("u1", "train_resnet_run3", 1, 400), job("u2", "bert", 2, 1000),
              job("u1", "gan", 4, 50)):
        r.observe(j)
    return r


def test_new_user_gets_mean_of_same_gpu_demand(est: RollingEstimator) -> None:
    assert est.predict_branch(job("u9", "train_resnet_run1", 1)) == (pytest.approx(700 / 3), NEW_USER)
    assert est.predict_branch(job("u9", "x", 2)) == (1000.0, NEW_USER)
    # no job with this GPU demand yet: global mean
    assert est.predict_branch(job("u9", "x", 16)) == (pytest.approx(1750 / 5), NEW_USER)


def test_known_user_same_name_uses_exponential_decay(est: RollingEstimator) -> None:
    # most recent 400 weighs 1, then 200 weighs 0.5, 100 weighs 0.25
    expected = (400 + 0.5 * 200 + 0.25 * 100) / 1.75
    assert est.predict_branch(job("u1", "train_resnet_run7", 8)) == (pytest.approx(expected), NAME_MATCH)
    assert expected == pytest.approx(300.0)


def test_known_user_similar_name_matches_by_levenshtein(est: RollingEstimator) -> None:
    # "train_resnnet" vs "train_resnet": 1 edit in 13 characters
    assert est.predict_branch(job("u1", "train_resnnet_run9", 1)) == (pytest.approx(300.0), NAME_MATCH)
    # another user's name history is not used
    assert est.predict_branch(job("u2", "train_resnet_run1", 2))[1] == USER_GPUS


def test_known_user_new_name_uses_own_jobs_with_same_gpus(est: RollingEstimator) -> None:
    assert est.predict_branch(job("u1", "completely_different", 1)) == (pytest.approx(700 / 3), USER_GPUS)
    assert est.predict_branch(job("u1", "completely_different", 4)) == (50.0, USER_GPUS)


def test_fallbacks(est: RollingEstimator) -> None:
    # user never ran 2-GPU jobs: global 2-GPU mean; never 16: the user's own mean
    assert est.predict_branch(job("u1", "other", 2)) == (1000.0, FALLBACK)
    assert est.predict_branch(job("u1", "other", 16)) == (pytest.approx(750 / 4), FALLBACK)
    empty = RollingEstimator(default_duration=1234.0)
    assert empty.predict_branch(job("u1", "a", 1)) == (1234.0, FALLBACK)


def test_anonymous_users_and_id_like_names(est: RollingEstimator) -> None:
    anon = job("unknown", "train_resnet_run1", 1, 10_000)
    est.observe(anon)
    # Philly: user "unknown" is not one person → EW decay over the same VC + GPU demand stream
    assert est.predict_branch(job("unknown", "train_resnet_run1", 1)) == (10_000.0, ANON_STREAM)
    est.observe(job("", "x", 1, 20_000))
    assert est.predict_branch(job("", "y", 1)) == (pytest.approx((0.5 * 10_000 + 20_000) / 1.5), ANON_STREAM)
    # no stream for this VC/GPU demand yet → new-user branch
    assert est.predict_branch(job("unknown", "z", 2)) == (1000.0, NEW_USER)
    # the paper's literal rule: anonymous = new user (global same-GPU mean)
    lit = RollingEstimator(anonymous="new_user")
    for d in (100, 300):
        lit.observe(job("unknown", "a", 1, d))
    assert lit.predict_branch(job("unknown", "a", 1)) == (200.0, NEW_USER)
    # a name equal to the job id identifies one job: no name matching
    assert est.predict_branch(job("u1", "train_resnet_run1", 1, job_id="train_resnet_run1"))[1] == USER_GPUS
    with pytest.raises(ValueError):
        RollingEstimator(anonymous="ignore")


def test_decay_one_is_plain_mean_and_bad_decay_rejected() -> None:
    r = RollingEstimator(decay=1.0)
    for d in (100, 200, 600):
        r.observe(job("u", "exp_seed1", 1, d))
    assert r.predict(job("u", "exp_seed2", 1)) == pytest.approx(300.0)
    with pytest.raises(ValueError):
        RollingEstimator(decay=0.0)


def test_bucket_history_is_bounded_lru() -> None:
    r = RollingEstimator(max_buckets_per_user=2)
    for name, d in (("alpha", 1), ("omega_model", 2), ("zebra_run", 3)):
        r.observe(job("u", name, 1, d))
    assert r.predict_branch(job("u", "alpha", 1))[1] == USER_GPUS      # evicted (oldest)
    assert r.predict_branch(job("u", "zebra_run", 1)) == (3.0, NAME_MATCH)


@pytest.mark.parametrize("raw, bucket", [
    ("BERT-finetune_lr1e-4_seed3", "bert_finetune_lr#e"),
    ("resnet50_run12", "resnet#"),
    ("resnet18_run3", "resnet#"),
    ("/home/a/train.sh", "train_sh"),
    ("exp_3f2a9c1d8e_v2", "exp"),
    ("gpt2-large.ft.2020-09-01", "gpt#_large_ft"),
    ("job_7_8_9", "job"),
    ("12345", "#"),
    ("", ""),
])
def test_name_bucket(raw: str, bucket: str) -> None:
    assert name_bucket(raw) == bucket


def test_job_bucket_is_the_bucket_of_an_informative_name() -> None:
    assert job_bucket(job("u", "resnet50_run12", 1, job_id="j1")) == "resnet#"
    assert job_bucket(job("u", "sia_000007", 1, job_id="sia_000007")) == ""   # the id is not a name
    assert job_bucket(job("u", "", 1)) == ""


def test_closest_name_and_clusterer() -> None:
    assert closest_name("train_resnnet", ["gan", "train_resnet"], 0.8) == "train_resnet"
    assert closest_name("gan", ["train_resnet"], 0.8) is None
    c = NameClusterer(0.8)
    a = c.add("train_resnet")
    assert c.add("train_resnnet") == a            # merged into the similar cluster
    assert c.add("gan") != a
    assert c.lookup("train_resnet_x") == a         # similar, not learned
    assert c.lookup("zzzzzz") == -1 and len(c) == 2
    assert c.add("") == -1

"""QSSF job duration / GPU-time estimation (Helios, Hu et al. SC'21, §4.2, Algorithm 1).

priority = GPUs × (λ·P_R + (1−λ)·P_M), where P_R is a rolling estimate from similar past
jobs (same user and Levenshtein-similar name, else same GPU demand) and P_M a LightGBM model
on user / VC / name bucket / GPUs / CPUs / submit time. λ defaults to 0.1 as in the authors'
simulator (the paper leaves it open).

* :class:`OnlineDurationEstimator` — inside a simulation (never learns from the future).
* :class:`CombinedDurationEstimator` — fit once on history, predict a batch.
* :func:`load_priority_file` — reuse the reference simulators' precomputed priorities.
* :func:`duration_accuracy` — online accuracy report (``dlsched estimate``).
"""

from dlsched.predictors.duration_accuracy import duration_accuracy, replay
from dlsched.predictors.duration_combined import DEFAULT_LAMBDA, CombinedDurationEstimator
from dlsched.predictors.duration_gbdt import GBDTDurationModel
from dlsched.predictors.duration_names import name_bucket
from dlsched.predictors.duration_online import OnlineDurationEstimator
from dlsched.predictors.duration_priority import PriorityFileError, load_priority_file
from dlsched.predictors.duration_rolling import RollingEstimator

__all__ = [
    "DEFAULT_LAMBDA", "CombinedDurationEstimator", "GBDTDurationModel", "OnlineDurationEstimator",
    "PriorityFileError", "RollingEstimator", "duration_accuracy", "load_priority_file",
    "name_bucket", "replay",
]

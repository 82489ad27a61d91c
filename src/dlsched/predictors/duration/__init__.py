"""QSSF job duration / GPU-time estimation (Helios, Hu et al. SC'21, §4.2, Algorithm 1).

priority = GPUs × (λ·P_R + (1−λ)·P_M), where P_R is a rolling estimate from similar past
jobs (same user and Levenshtein-similar name, else same GPU demand) and P_M a LightGBM model
on user / VC / name bucket / GPUs / CPUs / submit time. λ defaults to 0.1 as in the authors'
simulator (the paper leaves it open).

* :class:`~.online.OnlineDurationEstimator` — inside a simulation (never learns from the future).
* :class:`~.combined.CombinedDurationEstimator` — fit once on history, predict a batch.
* :func:`~.priority.load_priority_file` — reuse the reference simulators' precomputed priorities.
* :func:`~.accuracy.duration_accuracy` — online accuracy report (``dlsched estimate``).

The parts: :mod:`.rolling` (P_R), :mod:`.gbdt` (P_M and its hyper-parameters),
:mod:`.features` (P_M's input rows), :mod:`.names` (job-name buckets and matching).

Nothing is imported here, so the QSSF policy's import of :mod:`.online` does not also load
pandas through :mod:`.accuracy` and :mod:`.priority`.
"""

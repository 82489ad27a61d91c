"""Predictors that feed the schedulers, one sub-package per question asked about a job:

* :mod:`~dlsched.predictors.duration` — how long will it run (Helios QSSF estimators);
* :mod:`~dlsched.predictors.resources` — how busy will it keep a GPU and how much GPU memory will
  it need (the Horus prediction engine);
* :mod:`~dlsched.predictors.interference` — how much will it slow down next to another job;
* :mod:`~dlsched.predictors.ml` — the estimator contract, metrics and folds they share.

Kept import-light on purpose: the simulator imports ``dlsched.predictors`` without pulling in
scikit-learn, LightGBM or XGBoost, and no package ``__init__`` below imports its modules. Import
the module you need; heavy libraries load only when a model is fitted or loaded.
"""

"""Plumbing shared by the predictor families: the estimator contract (:mod:`.base`), error
metrics (:mod:`.metrics`) and the fixed fold assignment for group cross-validation
(:mod:`.folds`). It depends on none of the sibling packages, so any of them can build on it.
"""

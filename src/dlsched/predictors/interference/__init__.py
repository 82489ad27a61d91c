"""Co-location interference: models of the pairwise slowdown two jobs suffer when they share a
GPU or a node, so that a placement policy can tell which pairs are safe to pack together.

Every model follows :class:`~dlsched.predictors.interference.base.InterferenceModel` (one
profile type, :class:`~dlsched.predictors.interference.base.JobProfile`, for predicted and measured
jobs alike). They get their own package because they
predict a property of a *pair* of jobs, where :mod:`~dlsched.predictors.resources` predicts
properties of one job running alone.
"""

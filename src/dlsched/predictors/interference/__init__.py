"""Co-location interference: models of the pairwise slowdown two jobs suffer when they share a
GPU or a node, so that a placement policy can tell which pairs are safe to pack together.

Empty for now; the models arrive with the next issue. They get their own package because they
predict a property of a *pair* of jobs, where :mod:`~dlsched.predictors.resources` predicts
properties of one job running alone.
"""

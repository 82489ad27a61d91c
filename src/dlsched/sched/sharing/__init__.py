"""Co-location (GPU sharing) building blocks shared by the sharing policies and placers.

``load``: what a GPU already carries according to its holders' *predictions* (utilisation,
memory, job count); ``curve``: the Horus slowdown curve of cumulative utilisation (Eq. 9);
``profile``: a job as an :class:`~dlsched.predictors.interference.base.JobProfile`. Policies
read predictions only (an oracle reads measured resources through ``view.measured``).
"""

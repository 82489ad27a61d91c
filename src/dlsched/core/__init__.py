"""Typed domain objects shared by the simulator, the policies and the predictors."""

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, VirtualCluster
from dlsched.core.job import Job, JobState

__all__ = ["Job", "JobState", "ClusterSpec", "GpuType", "NodeSpec", "VirtualCluster"]

"""Typed domain objects shared by the simulator, the policies and the predictors."""

from dlsched.core.job import Job, JobState
from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, VirtualCluster

__all__ = ["Job", "JobState", "ClusterSpec", "GpuType", "NodeSpec", "VirtualCluster"]

"""First fit that keeps a job on one node when it fits one: the lowest-numbered node with enough
free GPUs, its lowest free GPU ids. Only a job wider than any node spans nodes (in node order).

This is the FCFS baseline's placement in Amaral et al. (SC'17, Sec. 5.2): "first machine with
room, lowest GPU ids". Plain ``first-fit`` would instead split a small job over several nodes
when no single node has room, where FCFS waits.
"""

from __future__ import annotations

from dlsched.sched.placers.first_fit import FirstFitPlacer


class FirstFitNodePlacer(FirstFitPlacer):
    name = "first-fit-node"
    single_node_only = True  # the pipeline's stages and the fast path both honour it

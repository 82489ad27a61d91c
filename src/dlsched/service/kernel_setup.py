"""How the live service builds its kernel, in one function that the service and every replay call.

The live core (:class:`~dlsched.service.core.SchedulerCore`) and the replay of its recorded
stimuli (:mod:`dlsched.service.feed`) must run the same machine, or a replay reports
disagreements the service never made (a Horus pass without its declared ``room-gains`` index; a
2-node gang refused by a copy of the one-node rule that had lost the gang exception). So neither
builds it by hand: :func:`live_kernel` makes the state, attaches the policy's plug-ins and
indexes (:func:`dlsched.sched.indexes.attach_plugins`, as every driver), wraps the placer with
the live placement rules (:func:`restrict_placement`) and runs the policy's ``prepare`` hook.
"""

from __future__ import annotations

from collections.abc import Mapping

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.decisions import Fit, Status
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.actions import rebalance
from dlsched.sched.indexes import attach_plugins
from dlsched.service.gang_members import is_gang_id
from dlsched.service.live_limits import limit_clock
from dlsched.service.reserved import bound_live


def live_kernel(policy, max_jobs_per_gpu: int, offered: Mapping[str, frozenset[str]]) -> tuple[Kernel, bool]:
    """The service's kernel on an empty cluster (starts assumed until their bind succeeds) and
    whether its placements are restricted as live (False: the placer's ``place`` cannot be
    wrapped; the caller counts it). ``offered`` is the live map pod uid -> the nodes
    kube-scheduler offered (read at each placement; a replay passes an empty one)."""
    state = ClusterState(ClusterSpec([], {}), new_queue=policy.new_queue, max_jobs_per_gpu=max_jobs_per_gpu)
    view = SchedulingView(state, oracle=False, indexes=attach_plugins(state, policy))
    kernel = Kernel(state, policy, assume=True, view=view, rebalance=rebalance)
    # max runtimes: each start of a limited job arms its ("limit", uid) timer as a Timer action
    state.add_observer(limit_clock(lambda: kernel.log.actions))
    shape = getattr(getattr(policy, "placer", None), "shape_pods", None)
    if shape is not None:   # a gang's job is cut into its pods (before the live rules wrap ``place``)
        shape()
    restricted = restrict_placement(policy, state, offered)
    on_prepare = getattr(policy, "prepare", None)
    if on_prepare is not None:
        on_prepare(view)
    bound_live(policy)   # a reserving policy's book keeps the last started records only
    return kernel, restricted


def restrict_placement(policy, state: ClusterState, offered: Mapping[str, frozenset[str]]) -> bool:
    """The live placement rules on ``policy``'s placer: a pod runs on one node (a gang's job
    spans nodes, one pod per share: service/gangs.py), and the placement of a job
    kube-scheduler filtered is restricted to the nodes it offered (its node selector, affinity
    and taint tolerations are honoured): a fit off those nodes is tried again with the other
    nodes out of placement (``ClusterState.as_if``, not a cordon inside the pass). False when the placer cannot be wrapped (it has no settable ``place``)."""
    placer = getattr(policy, "placer", None)
    inner = getattr(placer, "place", None)
    if inner is None:
        return True
    def place(view, vc, job):
        # the state being decided, not the live one captured here: a start-time forecast runs a
        # shallow copy of the policy (sharing this placer) on a twin of the state, from another
        # thread; closing the live state's nodes there would race with the live pass
        st = view.state
        fit = inner(view, vc, job)
        if not is_gang_id(job.job_id):   # gang hook: a gang's job spans nodes, one pod per share
            fit = one_node(fit, job)
        allowed = offered.get(job.job_id)
        if allowed is None or fit.placement is None or all(st.node_ids[n] in allowed for n, _ in fit.placement):
            return fit
        # the other nodes out of placement for this one question (ClusterState.as_if: no
        # cordon, so no observer hears of a node change that never happened, and the books are
        # restored exactly)
        with st.as_if(closed=[n for n in vc.nodes if st.node_ids[n] not in allowed]):
            return inner(view, vc, job)

    try:
        placer.place = place
    except AttributeError:
        return False
    return True


def one_node(fit: Fit, job: Job) -> Fit:
    """A pod runs on one node: a fit that spans nodes is refused before it is nominated (gangs
    of pods are exempt: :func:`restrict_placement`)."""
    if fit.placement is not None and len(fit.placement) > 1:
        return Fit(Status.UNSCHEDULABLE, None, f"needs {job.gpus} GPUs on one node; the placement "
                                               f"spans {len(fit.placement)} nodes and a pod runs on one")
    return fit

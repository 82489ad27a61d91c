"""A pod the API server shows bound: the confirmation of this process's nomination, or the
adoption of a pod bound outside it (another scheduler, a restart of this one), booked as it
stands -- its node, its GPUs (its annotation when valid and free), a borrowed pod's loan."""

from __future__ import annotations

from dlsched.core.job import Job, JobState
from dlsched.kernel.stimuli import BindSucceeded, JobAdopted, JobSubmitted, JobWithdrawn
from dlsched.service.host import LiveHost
from dlsched.service.live_limits import ran_before
from dlsched.service.pods import GPUS_ANNOTATION, PodFacts, parse_gpu_list
from dlsched.service.store import DoubleAssignment

RUNNING, ASSUMED = JobState.RUNNING, JobState.ASSUMED


def gpu_list(mask: int) -> list[int]:
    return [g for g in range(mask.bit_length()) if mask >> g & 1]


def bound_pod(host: LiveHost, pod: PodFacts, job: Job | None) -> None:
    """The API server says the pod is on ``pod.node_name``: confirm our nomination, or adopt it."""
    st, book = host.state, host.book
    if job is not None and job.state is ASSUMED:
        node = st.node_ids[job.placement[0][0]]
        if node == pod.node_name:
            host.handle(BindSucceeded(job))
            host.store.bound_later(pod.uid, pod.key, node, host.noms.gpus_text(pod.uid), host.now(),
                                   kind="confirm", detail="seen bound by the API server")
            host.record("confirm", uid=pod.uid)
            return
        host.forget(job, f"bound to {pod.node_name} by someone else")
    if job is not None and job.state is RUNNING:
        return
    idx = st.node_index.get(pod.node_name)
    if job is not None and idx is not None and job.vc_state.vid != st.node_vc[idx]:
        host.handle(JobWithdrawn(job, f"bound to {pod.node_name} of another VC"))   # queued in its own VC
        book.jobs.pop(pod.uid, None)
        job = None
    if idx is None:
        book.park(pod, f"bound to node {pod.node_name}, which the service does not know (yet)")
        return
    if room_of(st, idx).bit_count() < pod.gpus:
        host.counters["bound pods without room (over-committed node)"] += 1
        book.park(pod, f"bound to {pod.node_name} but its GPUs are all held")
        return
    book.unpark(pod.uid)
    now = host.now()
    host_vc = st.vcs[st.node_vc[idx]]
    lender = lender_of(host, pod, host_vc) if job is None else None
    if job is None:
        job = host.new_job(pod, host_vc.name if lender is None else host.vcs.vc_of(pod))
        book.add(pod, job)
        host.handle(JobSubmitted(job), now)
    mask = adopt_mask(host, idx, pod, job.pred_gpu_mem_mib)
    # a pod bound outside this process is not a decision: its start is booked as it stands, by
    # the kernel (JobAdopted: on a node cordoned since, too; a borrowed pod found running at a
    # restart has its loan booked again); the "adopted" line is for the readers of starts
    host.record("adopted", uid=pod.uid, node=pod.node_name, gpus=gpu_list(mask), borrowed=lender is not None)
    ran = ran_before(pod, now)
    if ran is None and job.time_limit_s is not None:
        host.counters["adopted pods with a limit but no start or bind time (counted from adoption)"] += 1
    host.limits.arm(host.handle(JobAdopted(job, ((idx, mask),), lender is not None, ran or 0.0), now))
    slots = host.noms.take_slots(pod.uid, idx, mask)
    host.record("start", uid=pod.uid, node=pod.node_name, gpus=gpu_list(mask), adopted=True)
    try:
        host.store.adopt(pod.uid, pod.key, pod.node_name, slots, now, detail="bound pod seen")
    except DoubleAssignment:
        host.counters["adopt conflicts in the store"] += 1


def lender_of(host: LiveHost, pod: PodFacts, node_vc) -> object | None:
    """The VC whose node a bound pod of another queue runs on, when the queue manager allows
    that queue to borrow there (a borrowed pod found at a restart: adopted into its own VC,
    its loan booked); None: the pod is adopted into the node's VC, as without queues."""
    quotas = host.kernel.quotas
    if quotas is None:
        return None
    st = host.state
    vid = st.vc_index.get(host.vcs.vc_of(pod))
    if vid is None or vid == node_vc.vid or not quotas.tree.may_lend_between(st.vcs[vid].name, node_vc.name):
        return None
    return node_vc


def room_of(st, idx: int) -> int:
    """GPUs of node ``idx`` that may take one more holder: free ones plus shareable ones."""
    return (~st.node_mask[idx] & ((1 << st.node_gpus[idx]) - 1)) | st.node_share[idx]


def adopt_mask(host: LiveHost, idx: int, pod: PodFacts, mem_mib: float) -> int:
    """GPUs of a pod bound outside this process (the caller checked that the node has room for
    ``pod.gpus``): its annotation when valid and free, else GPUs where its predicted memory
    ``mem_mib`` fits -- free GPUs first (lowest index), then shared ones with the most memory
    left -- so that a sharing policy's later placements on this node read a true figure; only
    when none fits, the GPUs with the most memory left, counted. Why memory matters here: the
    lowest-numbered GPU with room was often a shared one whose holder's memory plus this pod's
    exceeded the GPU, while a free GPU stood beside it (after a restart, on a sharing policy)."""
    st = host.state
    room = room_of(st, idx)
    text = pod.annotations.get(GPUS_ANNOTATION)
    if isinstance(text, str):
        idx_list = parse_gpu_list(text, st.node_gpus[idx])
        if idx_list is not None and len(idx_list) == pod.gpus:
            mask = sum(1 << g for g in idx_list)
            if mask & room == mask:
                return mask
        host.counters["GPU annotations not usable at adoption"] += 1
    need = mem_mib if mem_mib == mem_mib else st.node_mem[idx]   # no prediction: the whole GPU
    used = st.node_mask[idx]

    def order(g: int) -> tuple:
        left = st.gpu_free_mem(idx, g) if used >> g & 1 else st.node_mem[idx]
        return (left < need, bool(used >> g & 1), -left, g)

    chosen = sorted((g for g in range(st.node_gpus[idx]) if room >> g & 1), key=order)[:pod.gpus]
    if any(order(g)[0] for g in chosen):
        host.counters["pods adopted beyond their GPU's memory (no GPU with room for their prediction)"] += 1
    return sum(1 << g for g in chosen)

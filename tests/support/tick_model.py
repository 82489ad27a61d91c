"""A deliberately naive 1-second-tick model of the Helios reference simulator's conventions.

Written from the behaviour described in ../shared/traces/reference-simulators.md (no code of
the reference): per VC, every second (1) release jobs that end now (FIFO/SJF: end = start +
duration; SRTF: a running job's remaining time drops by one per tick and it ends the tick
after it reaches 0), (2) enqueue arrivals, (3) schedule: FIFO/SJF sort the queue (stable) and
start jobs in order until the first that does not fit; SRTF ranks queue + running by remaining
time, fills the VC's GPU quota greedily, preempts running jobs outside it (+7/30/60 s) and
places the pending ones inside it. Placement is Helios consolidate on 8-GPU nodes.
It exists only to check the event-driven engine on arbitrary VC sizes.
"""

from __future__ import annotations


def _consolidate(free: list[int], need: int):
    if sum(free) < need:
        return None
    avail = [i for i, f in enumerate(free) if f > 0]
    if need <= 8:
        for i in sorted(avail, key=lambda i: free[i]):
            if free[i] >= need:
                return [(i, need)]
        return None
    order = sorted(avail, key=lambda i: -free[i])
    whole, rest = divmod(need, 8)
    out = []
    for i in order:
        if len(out) < whole:
            if free[i] != 8:
                return None
            out.append((i, 8))
            continue
        if rest == 0:
            break
        return out + [(i, rest)] if free[i] >= rest else None
    if len(out) == whole and rest == 0:
        return out
    return None


def run_vc(jobs: list[dict], nodes: int, policy: str,
           priorities: dict[str, float] | None = None) -> dict[str, tuple[int, int, int]]:
    """Jobs: dicts with id, gpus, submit, duration (ints), in trace order.
    QSSF ("qssf") needs ``priorities`` (job id -> expected duration; key = that x GPUs): each tick
    the queue is sorted by GPU count and, when it holds more than this tick's arrivals, every job
    gets its priority (once) and the queue is re-sorted by it.
    Returns id -> (start, end, preemptions)."""
    free = [8] * nodes
    queue: list[dict] = []
    running: list[dict] = []
    done: dict[str, tuple[int, int, int]] = {}
    for j in jobs:
        j.update(remain=j["duration"], start=None, end=None, pre=0, alloc=None)
    i, t, n = 0, 0, len(jobs)
    while len(done) < n:
        for j in list(running):
            if policy == "srtf":
                if j["remain"] == 0:
                    j["end"] = t
                else:
                    j["remain"] -= 1
                    continue
            elif t != j["end"]:
                continue
            for node, g in j["alloc"]:
                free[node] += g
            running.remove(j)
            done[j["id"]] = (j["start"], t, j["pre"])
        new = 0
        while i < n and jobs[i]["submit"] == t:
            queue.append(jobs[i])
            i += 1
            new += 1
        if policy == "qssf":
            queue.sort(key=lambda j: j["gpus"])
            if len(queue) > new:
                for j in queue:
                    j.setdefault("prio", priorities[j["id"]] * j["gpus"])
                queue.sort(key=lambda j: j["prio"])
        if policy in ("fifo", "sjf", "qssf"):
            if policy != "qssf":
                queue.sort(key=lambda j: j["submit"] if policy == "fifo" else j["duration"])
            for j in list(queue):
                alloc = _consolidate(free, j["gpus"])
                if alloc is None:
                    break
                for node, g in alloc:
                    free[node] -= g
                j.update(alloc=alloc, start=t, end=t + j["duration"])
                queue.remove(j)
                running.append(j)
        else:
            ranked = sorted(queue + running, key=lambda j: j["remain"])
            quota = 8 * nodes
            pre, go = [], []
            for j in ranked:
                if j["gpus"] <= quota:
                    quota -= j["gpus"]
                    if j in queue:
                        go.append(j)
                elif j in running:
                    pre.append(j)
            for j in pre:
                j["pre"] += 1
                j["remain"] += 7 if j["gpus"] == 1 else (30 if j["gpus"] <= 8 else 60)
                for node, g in j["alloc"]:
                    free[node] += g
                running.remove(j)
                queue.append(j)
            for j in go:
                alloc = _consolidate(free, j["gpus"])
                if alloc is None:
                    continue
                for node, g in alloc:
                    free[node] -= g
                j["alloc"] = alloc
                if j["start"] is None:
                    j["start"] = t
                queue.remove(j)
                running.append(j)
        t += 1
    return done

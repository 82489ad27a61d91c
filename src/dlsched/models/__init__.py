"""Ground-truth models for simulated backends: how fast a job runs where it is placed and next
to whom (speed models), and when it crashes (failure models). They read ground truth (true
memory, measured utilisation, pair slowdowns); policies never see them.

Speed model protocol: ``scope`` (``"gpu"``: co-runners are jobs sharing a GPU; ``"node"``: jobs
sharing a node) and ``rate(job, state) -> float`` (work seconds done per wall second, 1 = solo
speed). The kernel calls ``rate`` for a job when it starts and for every running job whose
co-runner set changed, knowing the sets before and after each transition.

Failure model protocol: ``on_start(job, state, now) -> list[(time, job, reason)]``: failures
that the start causes; the backend fails each job at its time unless it stopped before.
"""

"""Every scheduling policy, one file each (the registry's ``POLICIES`` names them).

Queue orders (FIFO, SJF, QSSF, LAS, fair share, OBP, FFD-util, bin-pack) subclass
:class:`dlsched.sched.ordering.OrderingPolicy` and only say how jobs are keyed; SRTF and
SRTF-pred preempt; Horus and PAB share GPUs; the pairing policies after Co-scheML's Algorithm 1
(Co-scheML, Loadbalance, Mystic, the oracle, random pairing) subclass
:class:`dlsched.sched.pairing_base.PairingPolicy`. A new policy is one file here, one line in
``dlsched/registry.py`` and its tests (docs/architecture.md, "Worked example").
"""

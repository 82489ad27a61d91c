"""The topology-aware placement paper (Amaral et al., SC17) as experiments on the one engine: its
workloads (``scenarios``), the runs (``evaluation``), what they record per job (``audit``), the
figures' rows (``figures``) and the placement micro-benchmark (``bench``). The algorithms they
exercise live in :mod:`dlsched.topology`."""

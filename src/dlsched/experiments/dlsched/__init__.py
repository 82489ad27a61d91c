"""dlsched's own experiments, beyond the papers: queues that borrow, start-time estimates (ETA),
and preemption with guards."""

"""The live benchmarks' account of kube-scheduler's own work in a phase, from two scrapes of its
``/metrics``: attempts per bound pod by result, the mean time of an attempt and of a binding,
why pods entered its queues. Hand-checked numbers, no control plane."""

from __future__ import annotations

from support.benchmarks import k8s_phases

ATTEMPTS = 'scheduler_schedule_attempts_total{profile="default-scheduler",result="%s"}'
ALGO = "scheduler_scheduling_algorithm_duration_seconds"
QUEUED = 'scheduler_queue_incoming_pods_total{event="%s",queue="%s"}'


def scrape(scheduled: float, unschedulable: float, algo_s: float, algo_n: float, pending: float) -> dict[str, float]:
    return {ATTEMPTS % "scheduled": scheduled, ATTEMPTS % "unschedulable": unschedulable,
            f"{ALGO}_sum": algo_s, f"{ALGO}_count": algo_n,
            f'{ALGO}_bucket{{le="0.001"}}': algo_n,
            QUEUED % ("NodeAdd", "active"): scheduled, QUEUED % ("BackoffComplete", "active"): 0.0,
            'scheduler_pending_pods{queue="active"}': pending}


def test_a_phase_counts_what_grew_between_the_scrapes_and_leaves_gauges_out() -> None:
    k8s = k8s_phases()
    before = scrape(10, 4, 0.05, 14, 30)
    after = scrape(110, 204, 1.25, 314, 0)
    after["scheduler_binding_duration_seconds_sum"] = 2.0   # first seen in the phase: from 0
    after["scheduler_binding_duration_seconds_count"] = 100
    grew = k8s.metric_deltas(before, after)
    assert grew[ATTEMPTS % "scheduled"] == 100 and grew[ATTEMPTS % "unschedulable"] == 200
    assert abs(grew[f"{ALGO}_sum"] - 1.2) < 1e-12 and grew[f"{ALGO}_count"] == 300
    assert grew["scheduler_binding_duration_seconds_count"] == 100
    assert not any(k.startswith("scheduler_pending_pods") for k in grew)


def test_a_sum_takes_the_samples_of_one_name_whose_labels_match() -> None:
    k8s = k8s_phases()
    samples = {ATTEMPTS % "scheduled": 3.0, ATTEMPTS % "error": 1.0,
               'scheduler_schedule_attempts_total_other{result="scheduled"}': 100.0}
    assert k8s.metric_sum(samples, "scheduler_schedule_attempts_total") == 4.0
    assert k8s.metric_sum(samples, "scheduler_schedule_attempts_total", result="scheduled") == 3.0
    assert k8s.metric_sum(samples, "scheduler_schedule_attempts_total", result="unschedulable") == 0.0


def test_the_attempt_line_reads_per_bound_pod_and_per_attempt() -> None:
    k8s = k8s_phases()
    phase = k8s.Phase("gpu-drain", [1.0] * 100, 0, 1.0, 50.0, {}, 0)
    phase.sched = k8s.metric_deltas(scrape(0, 0, 0, 0, 0), scrape(100, 200, 1.2, 300, 0))
    line = k8s.attempt_line(phase, "through dlsched")
    assert line.startswith("  kube-scheduler's attempts (through dlsched): 3.00 per bound pod "
                           "(scheduled 100, unschedulable 200, error 0)")
    assert "algorithm 4.00 ms" in line                     # 1.2 s over 300 attempts
    assert "end to end nan ms" in line and "binding nan ms" in line   # never observed: said, not 0
    assert "pods queued: NodeAdd->active 100" in line and "BackoffComplete" not in line


def test_a_phase_whose_metrics_were_not_read_says_so() -> None:
    k8s = k8s_phases()
    phase = k8s.Phase("p", [], 0, 0.0, 0.0, {}, 0)
    assert k8s.attempt_line(phase, "x") == "  kube-scheduler's attempts (x): its metrics not read"

"""Prometheus metrics of the live service, read from the core's state at scrape time.

Levels (queue length, GPUs busy/shared/free, predictions and observations) are computed from
the one owner of state when Prometheus scrapes, so they can never drift from it; decisions are
counted from the durable log (a counter that survives restarts); extender latencies are the one
thing measured as calls happen. Each service has its own registry: no module-level singleton.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dlsched.predictors.resources.stack_calibration import memory_calibration_gauge
from dlsched.service.metrics_data import gpu_levels, predicted_vs_observed

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class StateCollector(Collector):
    """Everything read from the core (under its lock) at scrape time."""

    def __init__(self, core) -> None:
        self.core = core

    def collect(self) -> Iterator:
        core = self.core
        with core.lock:
            queue = GaugeMetricFamily("dlsched_queue_length", "Pending pods per VC", labels=["vc"])
            for vc in core.state.vcs:
                queue.add_metric([vc.name], vc.pending)
            gpus = GaugeMetricFamily("dlsched_gpus", "GPUs per VC by state (shared counts within busy)",
                                     labels=["vc", "state"])
            for vc, level in gpu_levels(core).items():
                for state, n in level.items():
                    gpus.add_metric([vc, state], n)
            running = GaugeMetricFamily("dlsched_running_pods", "Pods holding GPUs (nominated or bound)")
            running.add_metric([], core.state.n_running)
            filters = CounterMetricFamily("dlsched_filter_results", "Extender filter answers by outcome",
                                          labels=["outcome"])
            for outcome in ("nominated", "waiting", "re-deciding"):
                filters.add_metric([outcome], core.filter_outcomes[outcome])
            util = GaugeMetricFamily("dlsched_pod_gpu_util", "GPU utilisation of a pod (percent, 0-100)",
                                     labels=["pod", "source"])
            mem = GaugeMetricFamily("dlsched_pod_gpu_mem_mib", "GPU memory of a pod (MiB)",
                                    labels=["pod", "source"])
            rows = predicted_vs_observed(core)
            for r in rows:
                for fam, key in ((util, "util"), (mem, "mem_mib")):
                    for source in ("predicted", "observed"):
                        value = r[f"{source}_{key}"]
                        if not math.isnan(value):
                            fam.add_metric([r["pod"], source], value)
            error = GaugeMetricFamily("dlsched_prediction_abs_error",
                                      "Mean absolute error of predictions against agent readings (gpu_util: percentage points; "
                                      "gpu_mem_mib: MiB)",
                                      labels=["resource"])
            for resource, key in (("gpu_util", "util_error"), ("gpu_mem_mib", "mem_error_mib")):
                errs = [r[key] for r in rows if not math.isnan(r[key])]
                if errs:
                    error.add_metric([resource], sum(errs) / len(errs))
            calib = memory_calibration_gauge(getattr(core.predict, "calibration", None))
            counts = core.store.decision_counts()
        decisions = CounterMetricFamily("dlsched_decisions", "Decisions in the durable log by kind",
                                        labels=["kind"])
        for kind, n in sorted(counts.items()):
            decisions.add_metric([kind], n)
        yield from (queue, gpus, running, filters, util, mem, error, calib, decisions)


class LeadershipCollector(Collector):
    """This replica's side of leader election: 1 while it leads, and whom it sees leading."""

    def __init__(self, leadership: Callable[[], dict]) -> None:
        self.leadership = leadership

    def collect(self) -> Iterator:
        info = self.leadership()
        leader = GaugeMetricFamily("dlsched_leader", "1 while this replica holds the lease and answers extender "
                                   "calls itself (always 1 without leader election)", labels=["identity"])
        leader.add_metric([str(info.get("identity", ""))], 1.0 if info.get("ready") else 0.0)
        seen = GaugeMetricFamily("dlsched_leader_seen", "The leader this replica sees (1 for its identity)",
                                 labels=["leader"])
        if info.get("leader"):
            seen.add_metric([str(info["leader"])], 1.0)
        calls = CounterMetricFamily("dlsched_follower_calls", "Calls a follower forwarded to the leader, or "
                                    "refused (503) with no leader to forward to", labels=["outcome"])
        calls.add_metric(["forwarded"], info.get("calls_forwarded", 0))
        calls.add_metric(["refused"], info.get("calls_refused", 0))
        yield from (leader, seen, calls)


class ServiceMetrics:
    """The service's registry: the state collector plus per-verb extender latency histograms."""

    def __init__(self, core, leadership: Callable[[], dict] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(core))
        if leadership is not None:
            self.registry.register(LeadershipCollector(leadership))
        self.latency = Histogram("dlsched_extender_latency_seconds", "Extender call latency by verb",
                                 ["verb"], buckets=LATENCY_BUCKETS, registry=self.registry)

    def timed(self, verb: str) -> _Timer:
        return _Timer(self.latency.labels(verb))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _Timer:
    """``with metrics.timed("filter"):`` observes the block's wall time, even when it raises."""

    def __init__(self, child) -> None:
        self.child = child

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.child.observe(time.perf_counter() - self.t0)

"""Speed of the graph analysis (issue 4): ResNet-50 <= 0.2 s, BERT-base <= 0.5 s, features() call.

Exports the two zoo models once (cached under $DLSCHED_CACHE or ~/.cache/dlsched/zoo; export time
is reported but excluded), then times ``analyze`` on the parsed ModelProto (median of repeats),
``analyze`` on the raw bytes (parse included) and one ``features(batch)`` call.

    .venv/bin/python benchmarks/bench_graph.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import onnx

from dlsched.graph import analyze
from dlsched.graph.zoo import build_model

TARGETS = {"resnet50": 0.2, "bert_base_squad": 0.5}


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"{'model':16s} {'nodes':>6s} {'export s':>9s} {'parse s':>8s} {'analyze s':>10s} "
          f"{'bytes->feat s':>14s} {'features() us':>14s} {'target s':>9s}  ok")
    for name, target in TARGETS.items():
        t0 = time.perf_counter()
        data = build_model(name)
        export_s = time.perf_counter() - t0
        parse_s = _median_time(lambda data=data: onnx.load_model_from_string(data), args.repeat)
        proto = onnx.load_model_from_string(data)
        analyze(proto)  # warm-up (imports, schema cache)
        analyze_s = _median_time(lambda proto=proto: analyze(proto), args.repeat)
        end_to_end = _median_time(lambda data=data: analyze(data).features(32), args.repeat)
        a = analyze(proto)
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            a.features(32)
        feat_us = (time.perf_counter() - t0) / n * 1e6
        ok = "yes" if analyze_s <= target else "NO"
        print(f"{name:16s} {len(a.node_ops):6d} {export_s:9.2f} {parse_s:8.4f} {analyze_s:10.4f} "
              f"{end_to_end:14.4f} {feat_us:14.1f} {target:9.2f}  {ok}")
        f = a.features(32)
        print(f"  batch 32: {f['flops_per_sample'] / 1e9:.2f} GFLOP/sample, params {f['params'] / 1e6:.1f} M, "
              f"peak activations {f['peak_activation_bytes'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()

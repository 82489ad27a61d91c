#!/usr/bin/env python3
"""Write the graph features of every zoo model (``data/zoo_graph_features.json``), which the
memory-floor test reads instead of exporting the large models in the suite.

    python scripts/zoo_graph_features.py            # from the zoo cache, exporting what it lacks
    python scripts/zoo_graph_features.py --refresh  # re-export every model first (GPT-2 large: minutes, ~7 GB)

The features come from our own exporter (``dlsched.graph.zoo``) and analysis, at the batch of
``zoo_features.ZOO_FEATURES_BATCH``; ``tests/test_memory_floor.py`` checks that a live export of the
small zoo models still gives the shipped numbers."""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--refresh", action="store_true", help="re-export every zoo model (ignore the cache)")
    args = ap.parse_args(argv)
    from dlsched.graph.zoo import ZOO_NAMES, ZOO_VERSION, model_path
    from dlsched.predictors.resources.graph_source import graph_features
    from dlsched.predictors.resources.zoo_features import ZOO_FEATURES_BATCH, write_zoo_features

    feats: dict[str, dict[str, float]] = {}
    for name in ZOO_NAMES:
        t0 = time.process_time()
        if args.refresh:
            model_path(name, refresh=True)
        feats[name] = graph_features(name, ZOO_FEATURES_BATCH)
        print(f"{name}: {len(feats[name])} features, {time.process_time() - t0:.1f} s CPU", file=sys.stderr)
    path = write_zoo_features(feats, ZOO_VERSION)
    print(f"wrote {path} ({len(feats)} models at batch {ZOO_FEATURES_BATCH})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run-directory files: the pandas-free writer produces the bytes ``DataFrame.to_csv`` produced."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dlsched.sim.results import job_columns, write_csv, write_run


def _pandas_bytes(tmp_path, columns: dict) -> bytes:
    path = tmp_path / "pandas.csv"
    pd.DataFrame(columns).to_csv(path, index=False)
    return path.read_bytes()


def _ours(tmp_path, columns: dict) -> bytes:
    path = tmp_path / "ours.csv"
    write_csv(path, columns)
    return path.read_bytes()


def test_floats_match_pandas_including_edge_values(tmp_path):
    rng = np.random.default_rng(7)
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e16, 1e15 + 0.5, 1e-5, 1e-4, 5e-324, 1.7976931348623157e308,
               0.1, 1 / 3, 123456789.123, -2.5, 221001.73999999894]
    n = 4000
    floats = np.concatenate([special, rng.normal(0, 1e6, n), rng.random(n) * 1e-3,
                             np.round(rng.random(n) * 1e7), 10.0 ** rng.integers(-20, 30, n)])
    cols = {"x": floats, "y": floats[::-1].copy(), "i": np.arange(len(floats), dtype=np.int64) - 5,
            "b": (np.arange(len(floats)) % 3 == 0)}
    assert _ours(tmp_path, cols) == _pandas_bytes(tmp_path, cols)


def test_text_columns_quoted_like_pandas(tmp_path):
    cols = {"job_id": ["a", "b,c", 'say "hi"', "line\nbreak", "", "ünï", "cr\rx"],
            "vc": ["6214e9", "103959", "x", "y", "z", "w", "v"],
            "n": np.array([1.0, 2.5, np.nan, 4.0, 5.0, 6.0, 7.0])}
    assert _ours(tmp_path, cols) == _pandas_bytes(tmp_path, cols)


def test_plain_lists_inferred_like_pandas(tmp_path):
    cols = {"time": [0.0, 70.0, 130.5], "busy": [0, 8, 16], "mixed": [1, 2.5, 3], "text": ["a", None, "c"]}
    assert _ours(tmp_path, cols) == _pandas_bytes(tmp_path, cols)


def test_empty_columns_write_the_header_only(tmp_path):
    cols = {"time": [], "busy_gpus": []}
    assert _ours(tmp_path, cols) == _pandas_bytes(tmp_path, cols) == b"time,busy_gpus\n"


def _run(jobs: int = 400, predict: bool = False):
    from dlsched.core.cluster import ClusterSpec
    from dlsched.registry import make_policy
    from dlsched.sim import Simulator
    from dlsched.traces import synthetic

    trace = synthetic.generate(jobs=jobs, seed=3)
    if predict:
        for i, job in enumerate(trace.jobs):
            job.pred_gpu_util = float("nan") if i % 7 == 0 else 40.0 + i / 3
            job.pred_gpu_mem_mib = 1000.0 + i
    return Simulator(ClusterSpec.from_vc_sizes(synthetic.default_cluster(trace)), make_policy("srtf")).run(trace.jobs)


@pytest.mark.parametrize("predict", [False, True])
def test_run_directory_files_match_the_pandas_writer(tmp_path, predict):
    result = _run(predict=predict)
    summary = write_run(result, tmp_path / "run", {"trace": "synthetic"})
    jobs = job_columns(result)
    assert ("pred_gpu_util" in jobs) == predict
    assert (tmp_path / "run" / "jobs.csv").read_bytes() == _pandas_bytes(tmp_path, jobs)
    assert (tmp_path / "run" / "timeline.csv").read_bytes() == _pandas_bytes(tmp_path, result.metrics.timeline())
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == json.loads(json.dumps(summary))


def test_writing_results_does_not_import_pandas(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dlsched.core.cluster import ClusterSpec\n"
        "from dlsched.registry import make_policy\n"
        "from dlsched.sim import Simulator\n"
        "from dlsched.sim.results import write_run\n"
        "from dlsched.traces import synthetic\n"
        "t = synthetic.generate(jobs=300, seed=1)\n"
        "r = Simulator(ClusterSpec.from_vc_sizes(synthetic.default_cluster(t)), make_policy('fifo')).run(t.jobs)\n"
        f"write_run(r, {str(tmp_path / 'run')!r})\n"
        "print('pandas' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"

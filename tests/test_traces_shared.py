"""The real Philly jobs from ../shared: the reference window must select exactly its 68,503 jobs."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from dlsched.core.truth import duration as true_duration
from dlsched.traces import load_trace, load_vc_config

REFERENCE_PER_VC = {"6214e9": 33950, "11cb48": 11897, "6c71a0": 9383, "b436b2": 7222, "103959": 1450,
                    "0e4a51": 1269, "ed69ec": 1096, "ee9e8c": 1053, "7f04ca": 604, "2869ce": 315,
                    "e13805": 264}
WINDOW = {"start": "2017-10-01 00:00:00", "end": "2017-11-30 23:59:00"}


@pytest.fixture(scope="module")
def philly(shared):
    return shared / "traces" / "philly"


@pytest.mark.parametrize("name", ["reference_run/input_cluster_log_helios_format.csv.gz",
                                  "pollux_philly_gpu_jobs.csv.gz"])
def test_philly_reference_window(philly, name):
    vcs = load_vc_config(philly / "philly_vc_config.csv")
    t = load_trace(philly / name, vcs=vcs, **WINDOW)
    assert len(t) == 68503
    assert dict(Counter(j.vc for j in t.jobs)) == REFERENCE_PER_VC
    assert t.origin == datetime(2017, 10, 1, 0, 0, 45)
    assert t.jobs[0].job_id == "sia_031395" and t.jobs[0].submit_time == 0.0
    assert sum(t.report.filtered.values()) + len(t) == t.report.rows_read


def test_matches_reference_fifo_inputs(philly, shared):
    """submit_time and duration of every job equal the reference simulator's per-job log."""
    import pandas as pd

    vcs = load_vc_config(philly / "philly_vc_config.csv")
    t = load_trace(philly / "reference_run/input_cluster_log_helios_format.csv.gz", vcs=vcs, **WINDOW)
    ref = pd.read_csv(philly / "reference_run/base_vc_config/fifo_jobs.csv.gz", dtype={"vc": str},
                      usecols=["jobname", "vc", "gpu_num", "submit_time", "duration"])
    ours = pd.DataFrame([(j.job_id, j.vc, j.gpus, j.submit_time, true_duration(j)) for j in t.jobs],
                        columns=ref.columns)
    merged = ref.merge(ours, on="jobname", suffixes=("_ref", ""))
    assert len(merged) == len(ref) == len(t)
    for col in ("vc", "gpu_num", "submit_time", "duration"):
        assert (merged[col] == merged[f"{col}_ref"]).all(), col

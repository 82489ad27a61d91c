"""A sweep on a real dask.distributed cluster (one scheduler, two worker processes on 127.0.0.1)
gives the same results as the local run, and ships each workload once per worker."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dlsched.sweep.engine_local import LocalEngine
from dlsched.sweep.run import run_sweep
from dlsched.sweep.spec import load_spec

pytest.importorskip("distributed", reason="dask.distributed is not installed (the 'sweep' extra)")

SRC = Path(__file__).resolve().parents[1] / "src"
# measured per run; everything else must be identical
VARIES = ["wall_s", "peak_rss_mib"]


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """tcp://127.0.0.1:PORT of a real scheduler with two single-threaded worker processes."""
    from dlsched.sweep.devcluster import local_dask_cluster

    with local_dask_cluster(2, tmp_path_factory.mktemp("dask"), pythonpath=str(SRC)) as address:
        yield address


def test_dask_sweep_equals_the_local_sweep(tmp_path, dask_cluster):
    from dlsched.sweep.engine_dask import DaskEngine

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(textwrap.dedent("""
        base: {jobs: 400, nodes: 32}
        grid:
          policy: [fifo, sjf, srtf]
          seed: [0, 1]
        runs:
          - {policy: fifo, seed: 0, nodes: 1}   # fails: a 16-GPU job on one 8-GPU node
        """))
    spec = load_spec(spec_path)
    local = run_sweep(spec, tmp_path / "local", LocalEngine(2), emit=lambda line: None)
    engine = DaskEngine(dask_cluster)
    remote = run_sweep(spec, tmp_path / "dask", engine, emit=lambda line: None)
    assert (remote.done, remote.failed) == (local.done, local.failed) == (6, 1)
    pd.testing.assert_frame_equal(local.table.drop(columns=VARIES), remote.table.drop(columns=VARIES))
    # three workloads (seed 0, seed 1, one node): each scattered once, to both workers
    assert engine.scattered == 3 and len(engine.workers) == 2
    # files came back from the workers byte for byte
    cell = local.table.loc[0, "cell"]
    for name in ("jobs.csv", "summary.json", "timeline.csv"):
        assert (tmp_path / "dask" / "cells" / cell / name).read_bytes() == \
            (tmp_path / "local" / "cells" / cell / name).read_bytes()
    # resuming on Dask runs nothing again
    again = run_sweep(spec, tmp_path / "dask", DaskEngine(dask_cluster), emit=lambda line: None)
    assert (again.skipped, again.done, again.failed) == (6, 0, 1)


def test_unreachable_scheduler_is_one_clear_error(tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {jobs: 100, nodes: 32}\nruns: [{policy: fifo}]\n")
    from dlsched.sweep.devcluster import free_port

    port = free_port()
    res = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "out"),
                                   "--scheduler", f"tcp://127.0.0.1:{port}", "--connect-timeout", "2"])
    assert res.exit_code == 2
    assert f"error: --scheduler tcp://127.0.0.1:{port}: cannot connect" in res.output

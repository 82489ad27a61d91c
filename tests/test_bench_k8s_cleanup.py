"""The real-control-plane benchmarks (bench_bind_latency, bench_scheduler_mode) remove the temporary
folder of the service's store and log after a finished run, and keep it, named, after a failed one
(issue 38 point 5's rule for bench_service, which they did not follow: a folder left on every run)."""

from __future__ import annotations

from pathlib import Path

from support.benchmarks import k8s_phases

ROOT = Path(__file__).resolve().parents[1]


def test_a_finished_run_removes_its_folder_and_a_failed_one_keeps_it(tmp_path, capsys):
    k8s = k8s_phases()
    done, failed = tmp_path / "done", tmp_path / "failed"
    for work in (done, failed):
        work.mkdir()
        (work / "serve.log").write_text("log")
        (work / "bench.db").write_bytes(b"db")
    k8s.remove_work(done, True)
    k8s.remove_work(failed, False)
    assert not done.exists()
    assert (failed / "serve.log").read_text() == "log"
    assert f"kept {failed}" in capsys.readouterr().out


def test_both_benchmarks_remove_their_folder_in_their_finally():
    for name in ("bench_bind_latency.py", "bench_scheduler_mode.py"):
        text = (ROOT / "benchmarks" / name).read_text()
        body = text[text.index("finally:"):]
        assert "remove_work(work, finished)" in body.split("\n    ok = True")[0], name
        assert "finished = True" in text[:text.index("finally:")], name

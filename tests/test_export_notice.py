"""Before a big zoo export `predict` says what it exports, its rough cost and where it is cached, and
shows a live line while it runs (issue 37: the first `predict gpt2_large` was ~3 min of silence).
The threshold is lowered to 0 so that a tiny zoo model stands in for GPT-2 large."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import export_notice
from dlsched.cli.main import app
from dlsched.graph.export import ExportPlan, on_export

pytest.importorskip("torch")
runner = CliRunner()


def _predict(monkeypatch, cache: Path, threshold: str | None) -> tuple[int, str, str]:
    monkeypatch.setenv("DLSCHED_CACHE", str(cache))
    if threshold is None:
        monkeypatch.delenv(export_notice.NOTE_ENV, raising=False)
    else:
        monkeypatch.setenv(export_notice.NOTE_ENV, threshold)
    res = runner.invoke(app, ["predict", "ppo_lunarlander", "--batch", "8", "--json"])
    return res.exit_code, res.stdout, res.stderr


def test_big_export_is_announced_with_its_size_and_cache(monkeypatch, tmp_path):
    code, out, err = _predict(monkeypatch, tmp_path / "c", "0")
    assert code == 0, err
    params = json.loads(out)["params"]
    cache = tmp_path / "c" / "ppo_lunarlander-v1.onnx"
    lines = err.splitlines()
    first = re.fullmatch(r"note: exporting zoo model ppo_lunarlander to ONNX \(PPOPolicy, ([\d,]+) parameters, "
                         r"\d+ MiB of weights\) takes ~\d+ s and ~\d+ MB of memory on CPU, once: the graph is "
                         r"cached in (.+) \(DLSCHED_CACHE moves the cache\)", lines[0])
    assert first is not None, lines
    assert int(first.group(1).replace(",", "")) == params   # the count the export saw is the graph's
    assert first.group(2) == str(cache) and cache.is_file()
    assert re.fullmatch(rf"note: exported ppo_lunarlander in \d+ s; cached in {re.escape(str(cache))} .*", lines[1])
    code, _, err = _predict(monkeypatch, tmp_path / "c", "0")      # cached now: nothing to announce
    assert code == 0 and "note: export" not in err


def test_small_export_stays_silent_under_the_default_threshold(monkeypatch, tmp_path):
    code, _, err = _predict(monkeypatch, tmp_path / "d", None)
    assert code == 0 and "note: export" not in err
    assert (tmp_path / "d" / "ppo_lunarlander-v1.onnx").is_file()


@pytest.mark.parametrize("value", ["many", "-5", "1.5"])
def test_bad_threshold_is_one_error_line(monkeypatch, tmp_path, value):
    code, out, err = _predict(monkeypatch, tmp_path / "e", value)
    assert code == 2 and out == ""
    assert err == f"error: {export_notice.NOTE_ENV}={value!r}: expected a whole number of parameters " \
                  "(0 announces every export)\n"
    assert not (tmp_path / "e").exists()   # refused before any export


def test_estimates_follow_the_measured_exports():
    large = ExportPlan("GPT2LMHeadModel", 774_030_080, 3_096_120_320, True)
    assert large.seconds == pytest.approx(203, rel=0.01) and large.peak_bytes == pytest.approx(6.5e9, rel=0.01)
    small = ExportPlan("GPT2LMHeadModel", 124_439_808, 497_759_232, False)
    assert small.seconds == pytest.approx(44, rel=0.01) and small.peak_bytes == pytest.approx(3.0e9, rel=0.01)
    text = export_notice.plan_note("gpt2_large", large, Path("/c/gpt2_large-v1.onnx"))
    assert "774.0 M parameters, 2.9 GiB of weights) takes ~3 min and ~6.5 GB of memory" in text


def test_live_line_shows_the_phase_and_is_erased(monkeypatch):
    """On a terminal the line says 'tracing to ONNX (expected ...)' once the exporter has the module."""
    import torch

    from dlsched.graph.export import export_torch_module

    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    said: list[str] = []

    def export() -> bytes:
        data = export_torch_module(torch.nn.Linear(4, 2), torch.ones(1, 4))
        time.sleep(1.3)   # two ticks of the live line after the plan
        return data

    data = export_notice.exporting("linear", Path("/c/x.onnx"), export, say=said.append, live_on=True, threshold=0)
    assert data.startswith(b"\x08")   # ONNX protobuf (ir_version field)
    drawn = stream.getvalue()
    assert "exporting linear  tracing to ONNX (expected ~0 s)" in drawn
    assert drawn.endswith("\r\x1b[2K")   # erased at the end
    assert said[0].startswith("note: exporting zoo model linear to ONNX (Linear, 10 parameters, 0 MiB of weights)")
    assert said[1].startswith("note: exported linear in 1 s; cached in /c/x.onnx")


def test_listener_is_scoped_to_its_block():
    import torch

    from dlsched.graph.export import export_torch_module

    seen: list[ExportPlan] = []
    with on_export(seen.append):
        export_torch_module(torch.nn.Linear(3, 3), torch.ones(1, 3))
    export_torch_module(torch.nn.Linear(3, 3), torch.ones(1, 3))
    assert [(p.module, p.params, p.param_bytes, p.large) for p in seen] == [("Linear", 12, 48, False)]


def _simulate_predicting(monkeypatch, tmp_path, cache: Path, threshold: str) -> tuple[int, str]:
    monkeypatch.setenv("DLSCHED_CACHE", str(cache))
    monkeypatch.setenv(export_notice.NOTE_ENV, threshold)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration,model_name,batch_size\n"
                     "a,v,1,0,10,ppo_lunarlander,8\nb,v,1,5,10,ppo_lunarlander,8\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--nodes", "1", "--predict-resources",
                              "--out", str(tmp_path / "o")])
    return res.exit_code, res.output


def test_simulate_predict_resources_announces_a_big_export(monkeypatch, tmp_path):
    """`simulate --predict-resources` says the same note as `predict` before a big zoo export (issue 37)."""
    cache = tmp_path / "c"
    code, out = _simulate_predicting(monkeypatch, tmp_path, cache, "0")
    assert code == 0, out
    lines = [" ".join(ln.split()) for ln in out.split("\n") if "ppo_lunarlander" in ln]
    entry = cache / "ppo_lunarlander-v1.onnx"
    notes = [ln for ln in lines if ln.startswith("note: exporting zoo model ppo_lunarlander to ONNX (PPOPolicy, ")]
    assert len(notes) == 1, out   # two jobs, one model: one export, one note
    assert re.search(r"parameters, \d+ MiB of weights\) takes ~\d+ s and ~\d+ MB of memory on CPU, once: the "
                     r"graph is cached in .*ppo_lunarlander-v1\.onnx", " ".join(out.split())), out
    assert any(re.fullmatch(r"exported 1/1: ppo_lunarlander \(\d+ s\)", ln) for ln in lines), lines
    assert entry.is_file()
    code, out = _simulate_predicting(monkeypatch, tmp_path, cache, "0")   # cached: nothing announced
    assert code == 0 and "note: exporting" not in out and "exported 1/1" not in out


def test_simulate_small_export_has_progress_but_no_note(monkeypatch, tmp_path):
    code, out = _simulate_predicting(monkeypatch, tmp_path, tmp_path / "c", str(export_notice.NOTE_PARAMS))
    assert code == 0, out
    assert "exported 1/1: ppo_lunarlander" in out and "note: exporting" not in out


def test_simulate_bad_threshold_is_one_error_before_the_export(monkeypatch, tmp_path):
    code, out = _simulate_predicting(monkeypatch, tmp_path, tmp_path / "c", "lots")
    assert code == 2
    assert f"error: {export_notice.NOTE_ENV}='lots': expected a whole number of parameters" in out
    assert "Traceback" not in out and not (tmp_path / "c" / "ppo_lunarlander-v1.onnx").exists()


def test_export_first_exports_once_with_the_note_and_names_a_failure(monkeypatch, tmp_path):
    """The workloads' predictor resolves models silently: the run exports them first, with the same words."""
    from types import SimpleNamespace

    from dlsched.run.resources import export_first

    monkeypatch.setenv("DLSCHED_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv(export_notice.NOTE_ENV, "0")
    jobs = [SimpleNamespace(model_name=m, onnx_ref="") for m in ("ppo_lunarlander", "ppo_lunarlander", "no_such")]
    said: list[str] = []
    export_first(jobs, said.append)
    assert said[0].startswith("exporting 1 zoo models to ONNX on CPU") and said[0].endswith(": ppo_lunarlander")
    assert said[1].startswith("note: exporting zoo model ppo_lunarlander to ONNX (PPOPolicy, ")
    assert re.fullmatch(r"exported 1/1: ppo_lunarlander \(\d+ s\)", said[2]) and len(said) == 3
    said.clear()
    export_first(jobs, said.append)   # cached: silent
    assert said == []

    def broken(name: str):
        raise RuntimeError("no builder")

    monkeypatch.setattr("dlsched.graph.zoo.model_path", broken)
    monkeypatch.setenv("DLSCHED_CACHE", str(tmp_path / "d"))
    export_first(jobs, said.append)
    assert said[-1] == "note: could not export ppo_lunarlander (RuntimeError: no builder)"


def test_a_workload_run_exports_its_models_first_and_only_when_it_predicts(monkeypatch):
    """`simulate --workload W --predict-resources` goes through export_first (no silent export)."""
    from dlsched.run import workload

    calls: list[int] = []
    monkeypatch.setattr("dlsched.run.resources.export_first", lambda jobs, say: calls.append(len(jobs)))
    monkeypatch.setattr(workload, "give_predictions",
                        lambda jobs, *a: {"predictor": len(jobs), "noisy_prior": 0} if not a[-1] else None)
    said: list[str] = []
    _, jobs, *_ = workload.load_workload("coscheml-30", 0, "builtin", None, None, 4, None, None, True,
                                         lambda text, style="": said.append(text))
    assert calls == [len(jobs)] and any(s.startswith("predicted GPU utilisation and memory for") for s in said)
    workload.load_workload("coscheml-30", 0, "builtin", None, None, 4, None, None, False)
    workload.load_workload("coscheml-30", 0, "builtin", None, None, 4, None, None, True, perfect=True)
    assert calls == [len(jobs)]   # no predictions, or perfect ones: nothing to export

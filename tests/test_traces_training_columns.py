"""The canonical trace (the workload file) carries how each job trains: the attention mode and the
software stack that the memory predictor reads (issue 24), read when present, written only when set."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.traces import load_trace
from dlsched.traces.canonical import write_canonical

HEADER = "job_id,vc,gpus,submit_time,duration,model_name,batch_size"


def test_attention_and_stack_columns_reach_the_jobs_and_round_trip(tmp_path) -> None:
    src = tmp_path / "w.csv"
    src.write_text(f"{HEADER},attention,stack\n"
                   "a,v,1,0,60,bert_base,32,Eager,lazy\n"
                   "b,v,1,5,60,bert_base,32,,\n"
                   "c,v,1,9,60,bert_base,32,memory-efficient,gpumemnet-a100\n")
    jobs = {j.job_id: j for j in load_trace(src).jobs}
    assert (jobs["a"].attention, jobs["a"].stack) == ("eager", "lazy")
    assert (jobs["b"].attention, jobs["b"].stack) == ("", "")   # empty: the defaults (fused, unknown)
    assert (jobs["c"].attention, jobs["c"].stack) == ("memory-efficient", "gpumemnet-a100")
    out = write_canonical(load_trace(src), tmp_path / "back.csv")
    header = out.read_text().splitlines()[0]
    assert header.endswith(",attention,stack")
    again = {j.job_id: (j.attention, j.stack) for j in load_trace(out).jobs}
    assert again == {k: (j.attention, j.stack) for k, j in jobs.items()}


def test_files_without_them_are_written_as_before(tmp_path) -> None:
    src = tmp_path / "w.csv"
    src.write_text(f"{HEADER}\na,v,1,0,60,resnet50,32\n")
    out = write_canonical(load_trace(src), tmp_path / "back.csv")
    assert "attention" not in out.read_text().splitlines()[0]


def test_an_unknown_attention_mode_names_file_line_and_column(tmp_path) -> None:
    src = tmp_path / "w.csv"
    src.write_text(f"{HEADER},attention\na,v,1,0,60,bert_base,32,flash3000\n")
    res = CliRunner().invoke(app, ["trace", "stats", str(src)])
    assert res.exit_code == 2
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("error: ") and "w.csv" in line and "attention" in line and "flash3000" in line


def test_the_predictor_reads_the_jobs_attention(tmp_path) -> None:
    pytest.importorskip("onnx")
    from dlsched.graph.zoo import entry_path

    if not entry_path("bert_base_squad").is_file():
        pytest.skip("bert_base_squad not exported here (first use exports it with PyTorch)")
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    src = tmp_path / "w.csv"
    src.write_text(f"{HEADER},attention\na,v,1,0,60,bert_base_squad,32,eager\nb,v,1,0,60,bert_base_squad,32,fused\n")
    jobs = {j.job_id: j for j in load_trace(src).jobs}
    fill_job_predictions(list(jobs.values()), load_default(), graph_resolver, gpu="A100")
    assert jobs["a"].pred_gpu_mem_mib > jobs["b"].pred_gpu_mem_mib  # eager keeps the seq x seq tensors

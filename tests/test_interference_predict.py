"""``dlsched interference predict`` on a tiny hand-made Lucid-format profile set."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dlsched.cli import main

runner = CliRunner()

SINGLE = """model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label
VGG,CIFAR-10,32,0,100.0,80.0,30.0,3000,1
VGG,CIFAR-10,64,0,150.0,90.0,35.0,5000,1
PPO,LunarLander,32,0,50.0,20.0,5.0,900,0
BERT,SQuAD,32,0,80.0,99.0,60.0,20000,2
"""
COLOC = """,model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util,gmem_util,gmem
0,VGG,CIFAR-10,1,32,0,0.8,PPO,LunarLander,1,32,0,0.95,90,30,3900
1,VGG,CIFAR-10,1,32,0,0.5,BERT,SQuAD,1,32,0,0.625,99,60,23000
2,VGG,CIFAR-10,1,32,0,0.625,VGG,CIFAR-10,1,64,0,0.5,99,60,8000
"""


def _profiles(tmp_path):
    (tmp_path / "lucid").mkdir()
    (tmp_path / "lucid" / "single_data.csv").write_text(SINGLE)
    (tmp_path / "lucid" / "colocate_info.csv").write_text(COLOC)
    return str(tmp_path)


def _run(*args: str):
    return runner.invoke(main.app, ["interference", "predict", *args])


def test_three_jobs_combine_by_the_shared_rule(tmp_path):
    res = _run("--profiles", _profiles(tmp_path), "--job", "VGG:32", "--with", "PPO", "--with", "BERT",
               "--model", "constant-2", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["slowdown"] == 3.0 and doc["pairwise"] == {"PPO:32:0": 2.0, "BERT:32:0": 2.0}


def test_partners_ranked_with_measured_truth(tmp_path):
    res = _run("--profiles", _profiles(tmp_path), "--job", "VGG:32:0", "--model", "lookup", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["partners"]
    # the lookup is exact: predicted = measured = 1/speed1, best partner first
    assert [(r["partner"], r["predicted"], r["measured"]) for r in rows] == [
        ("PPO:32:0", 1.25, 1.25), ("VGG:64:0", 1.6, 1.6), ("BERT:32:0", 2.0, 2.0)]


def test_bad_job_and_gpu_are_one_error_line(tmp_path):
    root = _profiles(tmp_path)
    res = _run("--profiles", root, "--job", "GPT")
    assert res.exit_code == 2 and "job 'GPT': not profiled in lucid" in res.output and "BERT, PPO, VGG" in res.output
    res = _run("--profiles", root, "--job", "VGG:big")
    assert res.exit_code == 2 and "BATCH and AMP must be integers" in res.output
    res = _run("--profiles", root, "--job", "VGG", "--gpu", "v100")
    assert res.exit_code == 2 and "--gpu: lucid has no GPU type 'v100'" in res.output
    res = _run("--profiles", root, "--job", "VGG", "--dataset", "philly")
    assert res.exit_code == 2 and "--dataset: unknown value 'philly'" in res.output
    assert "Traceback" not in res.output

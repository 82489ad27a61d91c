"""Profile loaders: tiny hand-made tables (exact values, flags, errors) and the real sets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dlsched.profiles import ProfileError, load_gavel, load_lucid, profiles_dir

SINGLE = """model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label
VGG,CIFAR-10,32,0,100.0,80.0,30.0,3000,1
PPO,LunarLander,64,1,50.0,20.0,5.0,900,0
"""
COLOC = """,model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2,gpu_util,gmem_util,gmem
0,VGG,CIFAR-10,1,32,0,0.8,PPO,LunarLander,1,64,1,0.5,90,30,3900
1,VGG,CIFAR-10,1,32,0,0.9,NeuMF,MovieLens,1,32,0,0.5,90,30,3900
"""
ISO = """gpu,consolidated,job_type,model,batch_size,scale_factor,iso_steps_per_s_sim,iso_steps_per_s_phys
v100,1,R (batch size 16),R,16,1,10.0,10.0
v100,1,A3C,A3C,,1,4.0,4.0
v100,1,R (batch size 16),R,16,2,18.0,18.0
"""
PAIRS = """gpu,job_a,model_a,bs_a,job_b,model_b,bs_b,iso_a,iso_b,pair_a,pair_b,norm_a,norm_b,norm_sum,feasible,a_equals_iso
v100,R (batch size 16),R,16,A3C,A3C,,10,4,10,2,1.0,0.5,1.5,1,1
v100,A3C,A3C,,R (batch size 16),R,16,4,10,2,10,0.5,1.0,1.5,1,0
v100,R (batch size 16),R,16,R (batch size 16),R,16,10,10,0,0,,,,0,0
v100,A3C,A3C,,A3C,A3C,,4,4,1,1,0.25,0.25,0.5,1,0
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_lucid_tiny(tmp_path):
    root = _write(tmp_path, {"lucid/single_data.csv": SINGLE, "lucid/colocate_info.csv": COLOC})
    ps = load_lucid(root)
    (pair,) = ps.pairs  # NeuMF has no single-job profile: left out and counted
    assert pair.a.key == ("VGG", 32, False) and pair.b.key == ("PPO", 64, True)
    assert pair.slowdown_a == pytest.approx(1.25) and pair.slowdown_b == pytest.approx(2.0)
    assert pair.a.gpu_util == 80.0 and pair.a.gpu_mem_mib == 3000 and pair.a.mem_util == 30.0
    assert pair.a.speed == 100.0 and pair.a.dataset == "CIFAR-10" and pair.gpu_type == ""
    assert any("left out 1 pairs" in n for n in ps.notes)


def test_gavel_tiny_censored_and_infeasible(tmp_path):
    root = _write(tmp_path, {"gavel/isolated_throughputs.csv": ISO, "gavel/pair_throughputs_sf1.csv": PAIRS})
    ps = load_gavel(root)
    assert [p.model for p in ps.jobs["v100"]] == ["A3C", "R"]  # the scale-factor-2 row is skipped
    r = next(p for p in ps.jobs["v100"] if p.model == "R")
    assert r.speed == 160.0 and math.isnan(r.gpu_util) and math.isnan(r.gpu_mem_mib)
    a3c = next(p for p in ps.jobs["v100"] if p.model == "A3C")
    assert a3c.batch_size == 0 and math.isnan(a3c.speed)
    by = {(p.a.model, p.b.model): p for p in ps.pairs}
    assert len(ps.pairs) == 3  # the two orders of (R, A3C) are one pair
    mixed = by[("A3C", "R")]
    assert mixed.slowdown_a == 2.0 and mixed.slowdown_b == 1.0 and mixed.censored_b and not mixed.censored_a
    bad = by[("R", "R")]
    assert not bad.feasible and bad.slowdown_a == math.inf
    assert by[("A3C", "A3C")].slowdown_a == 4.0
    assert any("1 infeasible" in n and "1 job sides censored" in n for n in ps.notes)


def test_errors_name_file_and_line(tmp_path):
    with pytest.raises(ProfileError, match="nowhere: profiles folder not found"):
        profiles_dir(tmp_path / "nowhere")
    _write(tmp_path, {"lucid/single_data.csv": SINGLE.replace("100.0,80.0", "fast,80.0"),
                      "lucid/colocate_info.csv": COLOC})
    with pytest.raises(ProfileError, match=r"single_data.csv: line 2: column 'speed'"):
        load_lucid(tmp_path)
    _write(tmp_path, {"lucid/single_data.csv": SINGLE, "lucid/colocate_info.csv": COLOC.replace(",0.8,", ",0,")})
    with pytest.raises(ProfileError, match=r"colocate_info.csv: line 2: column 'speed1' must be positive"):
        load_lucid(tmp_path)
    with pytest.raises(ProfileError, match="gavel/isolated_throughputs.csv: file not found"):
        load_gavel(tmp_path)


def test_env_var_locates_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("DLSCHED_PROFILES", str(tmp_path))
    assert profiles_dir() == tmp_path


def test_real_sets(shared):
    lucid = load_lucid(shared / "profiles")
    assert len(lucid.jobs[""]) == 66 and len(lucid.pairs) == 1388
    gavel = load_gavel(shared / "profiles")
    assert gavel.gpu_types == ["k80", "p100", "v100"]
    assert {g: len(gavel.jobs[g]) for g in gavel.gpu_types} == {"k80": 26, "p100": 26, "v100": 26}
    feasible = {g: sum(p.feasible for p in gavel.pairs_on(g)) for g in gavel.gpu_types}
    assert feasible == {"k80": 306, "p100": 340, "v100": 330}
    assert sum(p.censored_a + p.censored_b for p in gavel.pairs if p.gpu_type != "v100") == 0

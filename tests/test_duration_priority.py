"""Loading precomputed QSSF priority files (HeliosArtifact ``jobname,...,priority``; Lucid ``job_id,priority``)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from dlsched.predictors.duration.priority import PriorityFileError, load_priority_file


def write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_helios_layout_keyed_by_jobname_gz(tmp_path: Path) -> None:
    p = write(tmp_path / "p.csv.gz", "user,vc,jobname,gpu_num,state,submit_time,duration,priority\n"
                                     "unknown,6214e9,sia_031395,1,COMPLETED,0,30,20\n"
                                     "unknown,11cb48,sia_031394,1,COMPLETED,70,61,83.5\n")
    assert load_priority_file(p) == {"sia_031395": 20.0, "sia_031394": 83.5}


def test_lucid_layout_keeps_ids_as_strings(tmp_path: Path) -> None:
    p = write(tmp_path / "lucid.csv", "job_id,priority\n6214e9,12\n00042,-3.5\n")
    assert load_priority_file(p) == {"6214e9": 12.0, "00042": -3.5}


def test_explicit_key_column(tmp_path: Path) -> None:
    p = write(tmp_path / "k.csv", "job_id,jobname,priority\n1,a,5\n2,b,6\n")
    assert load_priority_file(p) == {"1": 5.0, "2": 6.0}
    assert load_priority_file(p, key="jobname") == {"a": 5.0, "b": 6.0}


@pytest.mark.parametrize("text, message", [
    ("id,priority\n1,2\n", "no job id column"),
    ("job_id,prio\n1,2\n", "'priority'"),
    ("job_id,priority\n1,2\n2,fast\n", "line 3, column 'priority'"),
    ("job_id,priority\n1,2\n1,3\n", "appears more than once"),
    ("job_id,priority\n1,\n", "not a number"),
    ("", "not a readable CSV"),
])
def test_bad_files_name_file_and_column(tmp_path: Path, text: str, message: str) -> None:
    p = write(tmp_path / "bad.csv", text)
    with pytest.raises(PriorityFileError) as err:
        load_priority_file(p)
    assert str(p) in str(err.value) and message in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        load_priority_file(tmp_path / "nope.csv")
    with pytest.raises(PriorityFileError, match="'jobid'"):
        load_priority_file(write(tmp_path / "x.csv", "job_id,priority\n1,2\n"), key="jobid")


def test_reference_philly_priority_file(shared: Path) -> None:
    p = shared / "traces/philly/reference_run/input_qssf_priority_Philly_lgb.csv.gz"
    if not p.is_file():
        pytest.skip("reference priority file absent")
    prio = load_priority_file(p)
    assert len(prio) == 68_503 and prio["sia_031395"] == 20.0

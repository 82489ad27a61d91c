"""The README's and docs' figure blocks are generated (scripts/readme_figures.py) and current."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("readme_figures", REPO / "scripts" / "readme_figures.py")
readme_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_figures)


def _summary(jct: float, queue: float, queued: int) -> dict:
    groups = {k: {"jobs": 1, "avg_jct": jct * f} for k, f in (("short", 0.1), ("middle", 1.0), ("long", 10.0))}
    return {"avg_jct": jct, "avg_queue_delay": queue, "queued_jobs": queued, "groups": groups}


FIXED = {"fifo": _summary(1000.0, 800.0, 50), "sjf": _summary(400.0, 200.0, 20),
         "srtf": _summary(300.0, 100.0, 10), "qssf": _summary(350.0, 160.0, 15)}


def test_rendering_on_hand_checked_numbers() -> None:
    assert readme_figures.demo_table(FIXED).splitlines()[2:4] == [
        "| FIFO | 1,000 s | 800 s | 50 | 100 / 1,000 / 10,000 s |",
        "| SJF (oracle) | 400 s | 200 s | 20 | 40 / 400 / 4,000 s |"]
    # 350/1000, 160/800, 15/50; 350/400, 160/200, 15/20
    assert readme_figures.demo_ratios(FIXED) == ("QSSF/FIFO: JCT ×0.350, queue delay ×0.200, queued jobs ×0.30; "
                                                 "QSSF/SJF: ×0.88, ×0.80, ×0.75")


def test_check_fails_on_a_stale_readme_and_write_fixes_it(tmp_path, capsys) -> None:
    for name, summary in FIXED.items():
        (tmp_path / "demo" / name).mkdir(parents=True)
        (tmp_path / "demo" / name / "summary.json").write_text(json.dumps(summary))
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- readme-figures:demo-table -->\nold table\n<!-- /readme-figures:demo-table -->\n"
                      "<!-- readme-figures:demo-ratios -->\nold\n<!-- /readme-figures:demo-ratios -->\nend\n")
    args = ["--from", str(tmp_path / "demo"), "--readme", str(readme), "--only", "demo-table,demo-ratios"]
    assert readme_figures.main(["--check", *args]) == 1
    assert readme_figures.main(["--write", *args]) == 0
    assert readme_figures.main(["--check", *args]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("end\n") and "| QSSF (online) | 350 s |" in text


def test_sharing_and_sweep_tables_on_hand_checked_numbers() -> None:
    import pandas as pd

    row = {"makespan": 1704.46, "avg_jct": 533.84, "delivered_gpu_utilization": 0.63455, "busy_gpu_utilization": 0.85387}
    shared = {"policies": {label: row for label in readme_figures.SHARING_LABELS}}
    assert readme_figures.sharing_table(shared).splitlines()[2] == "| FIFO, no sharing | 1,704 s | 534 s | 63.5 % | 85.4 % |"
    stats = pd.DataFrame([{"nodes": 24, "policy": p, "avg_jct.mean": m, "avg_jct.ci95": c, "avg_jct.ratio": r}
                          for p, m, c, r in (("fifo", 119323.1, 147483.3, 1.0), ("sjf", 17394.9, 28918.1, 0.14578),
                                             ("srtf", 7843.8, 1984.7, 0.06574))])
    assert readme_figures.sweep_table(stats).splitlines()[2] == (
        "| 24 | 119,323 ± 147,483 s | 17,395 ± 28,918 s (×0.146) | 7,844 ± 1,985 s (×0.066) |")


def test_every_block_is_in_its_file() -> None:
    for name, block in readme_figures.BLOCKS.items():
        text = (REPO / block.file).read_text()
        assert f"<!-- readme-figures:{name} -->" in text and f"<!-- /readme-figures:{name} -->" in text, name


def test_unknown_block_is_an_error() -> None:
    with pytest.raises(SystemExit, match="--only nope: no such block"):
        readme_figures.main(["--check", "--only", "nope"])


def test_fast_figures_are_current() -> None:
    """The blocks that take seconds: `make demo`'s sharing table (~10 s), `predict` examples."""
    assert readme_figures.main(["--check", "--fast"]) == 0


@pytest.mark.slow
def test_readme_figures_are_current() -> None:
    """Every block: the demo's comparison (20,000 built-in jobs, four policies), the sharing run with
    the graph extra, the example sweep (a few minutes on 2 cores)."""
    assert readme_figures.main(["--check"]) == 0

"""Each directory layout renders the expected sections, images and numbers (synthetic fixtures, no simulator)."""

from __future__ import annotations

import re
import shutil

import pytest
from support.report_fixtures import write_comparison, write_energy, write_run

from dlsched.report import Layout, build_report, detect_layout


def images(html: str) -> int:
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', html))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    write_run(root / "run", "fifo", energy=True)
    write_comparison(root / "cmp")
    write_energy(root / "energy")
    return root


def test_layouts_are_detected(dirs):
    assert detect_layout(dirs / "run") is Layout.RUN
    assert detect_layout(dirs / "cmp") is Layout.COMPARISON
    assert detect_layout(dirs / "cmp" / "sjf") is Layout.RUN
    assert detect_layout(dirs / "energy") is Layout.ENERGY


def test_single_run_report(dirs):
    summary = __import__("json").loads((dirs / "run" / "summary.json").read_text())
    html = build_report(dirs / "run").read_text()
    assert images(html) == 3  # JCT CDF, queue delay per VC, utilisation over time
    for text in ("fifo", "consolidate", "synthetic-venus", "Helios Table 4", "Per-VC metrics", "Energy",
                 f"{summary['avg_jct']:.1f}", f"{summary['groups']['long']['avg_jct']:.1f}",
                 f"{summary['per_vc']['vc0']['avg_queue_delay']:.1f}", "61.2%",
                 # energy figures with their units, not raw keys
                 "<td>1,234.5</td><td>kWh</td>", "<th scope=\"row\">Saved</th><td>98.7</td><td>kWh</td>"):
        assert text in html, text
    assert "<script" not in html and "http://" not in html and "https://" not in html


def test_comparison_report_has_ratios_and_group_overview(dirs):
    html = build_report(dirs / "cmp").read_text()
    assert images(html) == 3
    for policy in ("fifo", "sjf", "qssf"):
        assert f"<summary>{policy}</summary>" in html and f"<th>{policy}</th>" in html
    assert "Avg JCT ratio" in html and "1.000×" in html and "All policies" in html
    assert html.count('class="groups"') == 4  # overview + one per policy


def test_energy_report_plots_series_and_figures(dirs, tmp_path):
    out = tmp_path / "sub" / "energy.html"
    html = build_report(dirs / "energy", out).read_text()
    assert images(html) == 2  # whole replay + first-week zoom (21 days of data)
    for text in ("Avg powered-off nodes", "powered on", "SMAPE", "3.91", "41.27", "87.0%", "Daily wake-ups"):
        assert text in html, text


def test_out_directory_and_missing_timeline(dirs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(dirs / "cmp" / "sjf", run)
    (run / "timeline.csv").unlink()
    path = build_report(run, tmp_path)
    assert path == tmp_path / "report.html"
    html = path.read_text()
    assert images(html) == 2 and "No timeline.csv" in html

"""The HTML report in a real headless browser (issue 12, item 6): at a 1,400 px window nothing
widens the page (wide tables scroll inside their own box, long paths break), and the screenshot
is a real rendering; at 1,280 px no table is wider than its box, so no column hides behind a
scroll bar (issue 37, item 6). Skipped where /usr/bin/chromium is absent (`apt-get install -y chromium`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.report import build_report

CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1400
NARROW = 1280
runner = CliRunner()
TREE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "queues-tree.toml"
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent: apt-get install -y chromium")
# writes the page's layout width into the DOM, which --dump-dom then prints
PROBE = ('<script>document.body.setAttribute("data-scroll-width", document.documentElement.scrollWidth);'
         'document.body.setAttribute("data-client-width", document.documentElement.clientWidth);</script>')
# every table box's content width / its visible width: content wider than the box hides columns
TABLES_PROBE = ('<script>document.body.setAttribute("data-tables", Array.from(document.querySelectorAll('
                '".table-wrap")).map(w => w.scrollWidth + "/" + w.clientWidth).join(" "));</script>')


def _chromium(profile: Path, *args: str, width: int = WIDTH) -> subprocess.CompletedProcess:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--window-size={width},1000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def measure(page: Path, work: Path) -> tuple[int, Path]:
    """(document scrollWidth at a 1,400 px window, screenshot path) for ``page``."""
    probe = work / f"{page.stem}-probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(work / "profile-dom", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=3000",
                    "--dump-dom", probe.resolve().as_uri())
    found = re.search(r'data-scroll-width="(\d+)"', dom.stdout)
    assert found, f"no width recorded; chromium said: {dom.stderr[-500:]}"
    shot = work / f"{page.stem}.png"
    _chromium(work / "profile-shot", f"--screenshot={shot}", page.resolve().as_uri())
    return int(found.group(1)), shot


def table_widths(page: Path, work: Path, width: int) -> list[tuple[int, int]]:
    """(scrollWidth, clientWidth) of every ``.table-wrap`` box of ``page`` at a ``width`` px window."""
    probe = work / f"{page.stem}-tables.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", TABLES_PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(work / "profile-tables", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=3000",
                    "--dump-dom", probe.resolve().as_uri(), width=width)
    found = re.search(r'data-tables="([^"]*)"', dom.stdout)
    assert found, f"no table widths recorded; chromium said: {dom.stderr[-500:]}"
    return [tuple(map(int, pair.split("/"))) for pair in found.group(1).split()]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("browser")
    res = runner.invoke(app, ["compare", "--jobs", "800", "--policies", "fifo,sjf,srtf", "--processes", "1",
                              "--out", str(root / "cmp")])
    assert res.exit_code == 0, res.output
    # energy replay: a 10-day diurnal series, vanilla DRS over the last 3 days (no forecaster fit)
    times = pd.date_range("2020-03-01", periods=10 * 144, freq="10min")
    active = np.round(60 + 25 * np.sin(2 * np.pi * np.arange(len(times)) / 144)).clip(0, 100)
    pd.DataFrame({"time": times, "active": active, "total": 100}).to_csv(root / "series.csv", index=False)
    res = runner.invoke(app, ["energy", "replay", "--series", str(root / "series.csv"), "--out", str(root / "energy"),
                              "--policy", "vanilla", "--eval-start", "2020-03-08", "--eval-end", "2020-03-10"])
    assert res.exit_code == 0, res.output
    # the widest table the reports have: Horus Table 6, 15 columns, in a folder with a very long name
    wide = root / ("sharing_" + "x" * 160)
    res = runner.invoke(app, ["experiment", "horus-table6", "--seeds", "1", "--out", str(wide)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["simulate", "--cluster", str(TREE), "--jobs", "800", "--policy", "qssf",
                              "--out", str(root / "queues")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["reproduce", "topo-table1", "horus-table6", "--html", str(root / "reproduce.html")])
    assert res.exit_code == 0, res.output
    pages = {"reproduce": root / "reproduce.html", "comparison": build_report(root / "cmp"), "run": build_report(root / "cmp" / "sjf"),
             "energy": build_report(root / "energy"), "sharing": build_report(wide, root / "sharing.html"),
             "queues": build_report(root / "queues")}
    for name, page in pages.items():
        if page.name == "report.html":
            pages[name] = page.rename(page.with_name(f"{name}.html"))
    return pages


@pytest.mark.parametrize("kind", ["comparison", "run", "energy", "sharing", "reproduce"])
def test_report_fits_a_1400px_window(reports, kind, tmp_path):
    width, shot = measure(reports[kind], tmp_path)
    assert width <= WIDTH, f"{kind} report is {width} px wide at a {WIDTH} px window"
    assert shot.is_file() and shot.stat().st_size > 20_000  # a rendered page, not a blank one
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wide_table_keeps_every_column(reports):
    page = reports["sharing"].read_text(encoding="utf-8")
    assert page.count('<div class="table-wrap">') >= 2 and ".table-wrap { overflow-x:auto; max-width:100%;" in page
    text = page.replace("<wbr>", "")
    for column in ("paper_makespan_min", "paper_std_min", "paper_gain", "makespan_min", "delivered_util", "requeued"):
        assert f"<th>{column}</th>" in text  # split into tables that fit, none left out


@pytest.mark.parametrize("kind", ["sharing", "queues", "run", "comparison"])
def test_no_table_overflows_its_box_at_1280px(reports, kind, tmp_path):
    widths = table_widths(reports[kind], tmp_path, NARROW)
    assert widths, f"{kind} report has no tables"
    hidden = [(i, scroll, client) for i, (scroll, client) in enumerate(widths) if scroll > client]
    assert not hidden, f"{kind} report at {NARROW} px: table(s) wider than their box (index, content, box): {hidden}"

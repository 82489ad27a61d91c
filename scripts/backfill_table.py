"""Write or check the experiment tables of docs/backfill.md from the kept per-seed numbers.

``dlsched experiment backfill --results docs/data/backfill-builtin.json`` keeps every run's numbers;
this script renders the tables from that file with the experiment's own code
(:func:`dlsched.experiments.dlsched.backfill.markdown`) and puts them between the
``<!-- backfill-table -->`` markers of the doc; the Philly slice's tables likewise from
docs/data/backfill-philly.json (``--philly ... --results``) between ``<!-- backfill-table-philly -->``. ``--check`` exits 1 when the doc's tables are not
what the numbers give (``tests/test_backfill_table.py`` runs it); ``--write`` rewrites them. The
experiment itself takes tens of minutes, so no test reruns it; this keeps the doc and the numbers
(and the statistics code) in step.

    PYTHONPATH=src python scripts/backfill_table.py --write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "backfill.md"
DATA = ROOT / "docs" / "data" / "backfill-builtin.json"
PHILLY_DATA = ROOT / "docs" / "data" / "backfill-philly.json"
BEGIN, END = "<!-- backfill-table -->", "<!-- /backfill-table -->"
PHILLY = ("<!-- backfill-table-philly -->", "<!-- /backfill-table-philly -->")


def render(data_path: Path) -> str:
    """The tables for the numbers in ``data_path`` (its ``workload`` names the jobs; none: built-in)."""
    from dlsched.experiments.dlsched.backfill import BUILTIN, markdown

    data = json.loads(data_path.read_text(encoding="utf-8"))
    return markdown(data["results"], data["jobs"], data["limits"], data["nodes"], data.get("workload", BUILTIN))


def splice(doc: str, tables: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """``doc`` with the text between the markers replaced by ``tables``."""
    begin, end = markers
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        raise ValueError(f"no {begin} ... {end} block in the doc")
    return pattern.sub(lambda _: f"{begin}\n{tables}\n{end}", doc, count=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    ap.add_argument("--doc", type=Path, default=DOC)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--philly-data", type=Path, default=PHILLY_DATA)
    args = ap.parse_args()
    try:
        doc = args.doc.read_text(encoding="utf-8")
        fresh = splice(splice(doc, render(args.data)), render(args.philly_data), PHILLY)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write:
        args.doc.write_text(fresh, encoding="utf-8")
        print(f"wrote {args.doc}")
        return 0
    if fresh != doc:
        print(f"error: {args.doc} is out of date; run: PYTHONPATH=src python scripts/backfill_table.py --write",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

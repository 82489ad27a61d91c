"""docs/graph.md's `dlsched predict` examples name models that exist (issue 37: the doc said
`predict bert_base_squad-v1.onnx`, a cache file name, which fails as written)."""

from __future__ import annotations

import re
from pathlib import Path

from dlsched.graph.zoo import ZOO_NAMES

DOC = Path(__file__).resolve().parent.parent / "docs" / "graph.md"


def test_every_predict_example_names_a_zoo_model_or_the_documented_bad_file() -> None:
    targets = re.findall(r"^\$ dlsched predict ([^\s;]+)", DOC.read_text(), flags=re.MULTILINE)
    assert "bert_base_squad" in targets and len(targets) >= 3
    for target in targets:
        assert target in ZOO_NAMES or target == "bad.onnx", target   # bad.onnx: the error example

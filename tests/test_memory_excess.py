"""``scripts/memory_excess.py`` (issue 36): non-tensor memory is measured - FakeTensor, a spike is
a row's non-tensor memory above the same model's other batches, and the room of a
batch-independent term is the model's smallest non-tensor memory less the context."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
spec = importlib.util.spec_from_file_location("memory_excess", REPO / "scripts" / "memory_excess.py")
me = importlib.util.module_from_spec(spec)
spec.loader.exec_module(me)


def rows() -> pd.DataFrame:
    """Model a: 2,500 MiB outside its tensors at every batch; model b: the same but 12,000 at 16."""
    b = [8, 16, 32, 64]
    fake = [1000.0, 2000.0, 4000.0, 8000.0]
    out = []
    for model, extra in (("a", [2500.0] * 4), ("b", [2500.0, 12000.0, 2500.0, 2500.0])):
        for bb, f, e in zip(b, fake, extra):
            out.append({"model": model, "batch": bb, "fake_last_mib": f, "mem_mib": f + e, "pred": f + 2400.0})
    return pd.DataFrame(out)


def test_spike_is_the_row_above_the_models_other_batches() -> None:
    d = me.with_excess(rows()).set_index(["model", "batch"])
    np.testing.assert_allclose(d.loc[("a", 16), ["nontensor", "others", "spike"]], [2500.0, 2500.0, 0.0])
    np.testing.assert_allclose(d.loc[("b", 16), ["nontensor", "others", "spike"]], [12000.0, 2500.0, 9500.0])
    # the other batches of b see the spike only through the median of the rest, which ignores it
    np.testing.assert_allclose(d.loc[("b", 8), "others"], 2500.0)
    np.testing.assert_allclose(d.loc[("b", 16), "deficit"], 12000.0 - 2400.0)


def test_a_batch_independent_term_cannot_cover_a_one_batch_spike() -> None:
    d = me.with_room(me.with_excess(rows()), context_mib=2000.0).set_index(["model", "batch"])
    # room = smallest non-tensor memory (2,500) less the context: 500 MiB for both models
    np.testing.assert_allclose(d["room"].to_numpy(), 500.0)
    assert d.loc[("b", 16), "covered"] == "no"      # 9,600 MiB short, 500 of room
    assert d.loc[("a", 16), "covered"] == "yes"     # 100 MiB short

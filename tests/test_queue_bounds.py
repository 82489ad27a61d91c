"""Queue trees are bounded and checked in linear time; decayed usage never cancels (issue 37)."""

from __future__ import annotations

import math
import time

import pytest

from dlsched.kernel.queue_tree import (
    MAX_DEPTH,
    MAX_QUEUES,
    DecayedUsage,
    QueueSpec,
    QueueTree,
    decayed_seconds,
)
from dlsched.traces.cluster_queues import parse_queues_text
from dlsched.traces.model import TraceError


def _chain(n: int, reverse: bool = False) -> str:
    """``n`` queues, each the parent of the next (q0 on top); bottom first when ``reverse``."""
    parts = ['[[queues]]\nname = "q0"\n'] + [f'[[queues]]\nname = "q{i}"\nparent = "q{i - 1}"\n' for i in range(1, n)]
    return "".join(reversed(parts) if reverse else parts)


def _forest(n: int, depth: int) -> str:
    """``n`` queues in chains of ``depth`` (a valid tree as deep as the limit allows)."""
    return "".join(f'[[queues]]\nname = "q{i}"\n' + (f'parent = "q{i - 1}"\n' if i % depth else "")
                   for i in range(n))


def _seconds(text: str) -> float:
    start = time.perf_counter()
    parse_queues_text(text, "cm")
    return time.perf_counter() - start


def test_a_tree_as_deep_as_the_limit_is_accepted_and_one_level_more_is_not() -> None:
    specs = parse_queues_text(_chain(MAX_DEPTH + 1), "cm")
    assert len(specs) == MAX_DEPTH + 1 and specs[-1].parent == f"q{MAX_DEPTH - 1}"
    assert len(QueueTree(specs).ancestors[f"q{MAX_DEPTH}"]) == MAX_DEPTH
    with pytest.raises(TraceError, match=rf"queue q{MAX_DEPTH + 1} is {MAX_DEPTH + 1} levels below its top-level "
                                         rf"queue q0: at most {MAX_DEPTH} \(the limit\)"):
        parse_queues_text(_chain(MAX_DEPTH + 2), "cm")


@pytest.mark.parametrize("reverse", [False, True])
def test_a_3000_deep_chain_is_an_error_not_a_recursion_error(reverse) -> None:
    with pytest.raises(TraceError) as err:
        parse_queues_text(_chain(3000, reverse), "ConfigMap d/q key queues.toml")
    message = str(err.value)
    assert message.startswith("ConfigMap d/q key queues.toml, line ") and f"at most {MAX_DEPTH} (the limit)" in message
    specs = [QueueSpec("q0", None)] + [QueueSpec(f"q{i}", None, parent=f"q{i - 1}") for i in range(1, 3000)]
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH} \\(the limit\\)"):  # the API refuses it too
        QueueTree(reversed(specs) if reverse else specs)


def test_a_cycle_far_from_its_start_is_found() -> None:
    specs = [QueueSpec(f"q{i}", None, parent=f"q{(i + 1) % 50}") for i in range(50)]
    with pytest.raises(ValueError, match=r"queue q0: its parents form a cycle \(q0 -> q1 -> .* -> q49 -> q0\)"):
        QueueTree(specs)


def test_size_limit_names_the_limit() -> None:
    text = "".join(f'[[queues]]\nname = "q{i}"\n' for i in range(MAX_QUEUES + 1))
    with pytest.raises(TraceError, match=f"lists {MAX_QUEUES + 1:,} queues: at most {MAX_QUEUES:,} \\(the limit\\)"):
        parse_queues_text(text, "cm")
    with pytest.raises(ValueError, match=f"at most {MAX_QUEUES:,}"):
        QueueTree(QueueSpec(f"q{i}") for i in range(MAX_QUEUES + 1))


def test_validation_is_linear_in_the_number_of_queues() -> None:
    # before issue 37 the parent walk was cubic on a chain (500: 1.8 s, 1,000: 9.6 s, 5,000 never
    # ended) and quadratic on a flat tree (5,000: 5.3 s); now 5x the queues cost ~5x, not 25x
    small, large = _forest(1000, MAX_DEPTH), _forest(5000, MAX_DEPTH)
    _seconds(small)  # warm up the imports
    t_small, t_large = min(_seconds(small) for _ in range(2)), min(_seconds(large) for _ in range(2))
    start = time.perf_counter()
    with pytest.raises(TraceError, match="the limit"):
        parse_queues_text(_chain(5000, reverse=True), "cm")
    t_chain = time.perf_counter() - start
    print(f"\nqueue tree validation: 1,000 queues {t_small:.3f} s, 5,000 {t_large:.3f} s; "
          f"a 5,000-long chain refused in {t_chain:.3f} s")
    assert t_large < 12 * t_small + 0.05, (t_small, t_large)
    assert t_large < 3.0 and t_chain < 3.0


@pytest.mark.parametrize("half_life", [1e20, 1e100, 1e308])
def test_decayed_usage_does_not_cancel_at_huge_half_lives(half_life) -> None:
    usage = DecayedUsage(half_life)
    usage.change(8, 0.0)
    assert usage.at(3600.0) == pytest.approx(8 * 3600.0, rel=1e-12)   # was exactly 0 from ~1e17 on
    usage.change(-8, 3600.0)
    assert usage.at(7200.0) == pytest.approx(8 * 3600.0, rel=1e-12)
    assert decayed_seconds(1e-300, half_life) == pytest.approx(1e-300)   # x underflows: dt itself


@pytest.mark.parametrize("dt,half_life", [(1.0, 1.0), (3600.0, 7 * 86400.0), (1e6, 10.0), (1e-9, 1.0)])
def test_decayed_usage_matches_the_closed_form_where_it_is_exact(dt, half_life) -> None:
    exact = (1 - 2 ** (-dt / half_life)) * half_life / math.log(2)
    assert decayed_seconds(dt, half_life) == pytest.approx(exact, rel=1e-9)
    usage = DecayedUsage(half_life)
    usage.value = 100.0
    usage.change(3, 0.0)
    assert usage.at(dt) == pytest.approx(100.0 * 2 ** (-dt / half_life) + 3 * exact, rel=1e-9)


def test_summary_json_is_strict() -> None:
    # a weight of 1e-320 (the file now refuses it) made usage / weight infinite and summary.json
    # held Infinity, which strict parsers refuse: a non-finite number is null, listed in non_finite
    import json

    from dlsched.metrics.strict_json import dumps, strict_summary

    clean, places = strict_summary({"a": 1.0, "per_queue": {"vc01": {"usage_per_weight": math.inf,
                                                                     "x": [1.0, math.nan]}}})
    assert places == ["per_queue.vc01.usage_per_weight", "per_queue.vc01.x[1]"]
    assert clean["per_queue"]["vc01"] == {"usage_per_weight": None, "x": [1.0, None]}
    assert clean["non_finite"] == places
    text = dumps({"y": -math.inf})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict {c}")) == {"y": None,
                                                                                         "non_finite": ["y"]}
    assert strict_summary(clean) == (clean, places)   # idempotent: a rewritten summary keeps its list


def test_the_api_refuses_what_the_files_refuse() -> None:
    with pytest.raises(ValueError, match="queue a: weight 1e-320: want a number from 1e-06 to 1e"):
        QueueSpec("a", weight=1e-320)
    with pytest.raises(ValueError, match="queue a: borrow_limit inf: want a whole number >= 0"):
        QueueSpec("a", borrow_limit=math.inf)
    with pytest.raises(ValueError, match="queue a: lend_limit -1"):
        QueueSpec("a", lend_limit=-1)


def test_strict_json_takes_numpy_scalars() -> None:
    import json

    import numpy as np

    from dlsched.metrics.strict_json import dumps

    assert json.loads(dumps({"a": np.float64(1.5), "b": np.int64(3), "c": np.float32("inf")})) == {
        "a": 1.5, "b": 3, "c": None, "non_finite": ["c"]}

"""The one rule for queues that borrow, as the simulator, a forecast's twin and the live service apply it."""

from __future__ import annotations

import pytest

from dlsched.kernel.queue_tree import borrowing_blocker
from dlsched.registry import make_policy


@pytest.mark.parametrize("name, cap, words", [
    ("fifo", 1, ""),
    ("qssf", 1, ""),
    ("srtf", 1, "non-preemptive ordering policy; srtf preempts on its own"),
    ("easy", 1, "easy holds reservations"),
    ("fifo", 2, "exclusive GPUs (max_jobs_per_gpu = 1)"),
])
def test_each_blocker_is_named(name, cap, words):
    got = borrowing_blocker(make_policy(name), cap)
    assert (got == "") if not words else (words in got), got


def test_the_driver_names_its_own_setting():
    assert borrowing_blocker(make_policy("fifo"), 2, "--max-jobs-per-gpu 1, not 2") == \
        "queues that borrow need exclusive GPUs (--max-jobs-per-gpu 1, not 2)"

"""Polling helpers for tests that wait on a real server (a control plane, a service process)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(fn: Callable[[], T], timeout: float = 60.0, step: float = 0.2, what: str = "") -> T:
    """``fn()``'s first truthy value, tried every ``step`` seconds; AssertionError after ``timeout``
    naming ``what`` was waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = fn()
        if out:
            return out
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout} s" if what else f"not reached in {timeout} s")

"""The two ways dlsched reaches Kubernetes, for real-control-plane tests that run in both
(issue 34, point 3): ``extender`` (kube-scheduler calls dlsched; pods keep the default
scheduler) and ``scheduler`` (``serve --mode scheduler``; pods name ``schedulerName: dlsched``
and dlsched binds them itself).

A test module imports the ``mode`` fixture (``from support.modes import mode_fixture  # noqa: F401``);
its tests then run once per mode, on the module's one control plane (the fixture is module-
scoped and needs nothing of the plane, so pytest runs a module's tests mode by mode).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.control_plane import free_port
from support.service_proc import ServiceProcess

MODES = ("extender", "scheduler")
SCHEDULER_NAME = "dlsched"


@pytest.fixture(scope="module", params=MODES, name="mode")
def mode_fixture(request) -> str:
    """The mode a test runs in (its parameter), named ``mode`` in the tests."""
    return request.param


def for_mode(mode: str, body: dict) -> dict:
    """``body`` (a pod) as the mode wants it: in scheduler mode it names dlsched as its scheduler."""
    if mode == "scheduler":
        body.setdefault("spec", {})["schedulerName"] = SCHEDULER_NAME
    return body


def service(mode: str, extender_port: int, api_url: str, token: str, db: str, policy: str, log: Path,
            *extra: str) -> ServiceProcess:
    """``dlsched serve`` for ``mode``: on kube-scheduler's extender port in extender mode; in
    scheduler mode on another port (kube-scheduler must reach no dlsched) with ``--mode scheduler``."""
    if mode == "scheduler":
        return ServiceProcess(free_port(), api_url, token, db, policy, log, extra=("--mode", "scheduler", *extra))
    return ServiceProcess(extender_port, api_url, token, db, policy, log, extra=tuple(extra))

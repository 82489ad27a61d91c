"""A pod keeps running on a node cordoned after it started; the start-time forecast (ETA and
what-if) copies the state with that pod running there and cordons the node afterwards. (The copy
used to cordon first, and its start of the running pod was refused: `job e: node n2 is cordoned`
for every what-if or ETA while a running pod sat on a cordoned node.)"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dlsched.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[1] / "docs/examples/stimuli-events.jsonl"


def test_whatif_at_a_moment_with_a_running_pod_on_a_cordoned_node():
    for at in ("56", "60"):   # n2 is cordoned at these moments of the example, with pod e on it
        res = CliRunner().invoke(app, ["whatif", str(EXAMPLE), "--policy", "fifo", "--at", at])
        assert res.exit_code == 0, res.output
        assert "1 pending" in res.output and "running" in res.output
        assert "cordoned" not in res.output


def test_the_forecast_copy_keeps_the_cordon():
    from dlsched.cli.policy_factory import build_policy
    from dlsched.service.whatif_log import state_at
    from dlsched.sim.eta import EtaEstimator
    from dlsched.sim.twin import copy_cordons, copy_state

    policy = build_policy("fifo")
    moment = state_at(EXAMPLE, policy, 60.0)
    state = moment.state
    cordoned = [n for n in range(len(state.node_ids)) if state.node_cordoned[n]]
    assert cordoned, "the example has a cordoned node at 60 s"
    twin = copy_state(state, cordons=False)
    assert not any(twin.node_cordoned)
    copy_cordons(state, twin)
    assert [n for n in range(len(twin.node_ids)) if twin.node_cordoned[n]] == cordoned
    result = EtaEstimator(policy).estimate(state, moment.now)
    assert result is not None

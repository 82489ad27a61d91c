"""A tuned service's log replays with the parameters it ran with: `serve --policy las --threshold
3600` records them in its config line, and `replay`, `replay --stimuli` and `whatif LOG` start
the recorded policy from them (``--param`` overrides; an older log without them: defaults)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.run.replay import replay_config
from dlsched.service.log import recorded_params

EXAMPLE = Path(__file__).resolve().parents[1] / "docs/examples/stimuli-events.jsonl"


def _tuned_log(tmp_path: Path, policy: str, params: dict) -> Path:
    lines = EXAMPLE.read_text().splitlines()
    config = json.loads(lines[0])
    config.update(policy=policy, params=params)
    out = tmp_path / "tuned.jsonl"
    out.write_text("\n".join([json.dumps(config), *lines[1:]]) + "\n")
    return out


def test_recorded_params_read_from_the_config_line():
    assert recorded_params({"params": {"threshold": 3600.0, "queues": None}}) == {"threshold": 3600.0}
    assert recorded_params({"policy": "las"}) == {}
    assert recorded_params({"params": "junk"}) == {}


def test_replay_runs_the_recorded_parameters_and_param_overrides(tmp_path):
    log = _tuned_log(tmp_path, "las", {"threshold": 3600.0})
    config = json.loads(log.read_text().splitlines()[0])
    assert replay_config(log, config).policy.params.threshold == 3600.0
    assert replay_config(log, config, params={"threshold": "60"}).policy.params.threshold == 60.0
    # another policy starts from its own defaults, not from the recorded one's parameters
    assert replay_config(log, config, policy="fifo").policy.name == "fifo"


def test_replay_stimuli_of_a_tuned_log_rebuilds_the_tuned_policy(tmp_path):
    log = _tuned_log(tmp_path, "las", {"threshold": 3600.0})
    ok = CliRunner().invoke(app, ["replay", str(log), "--stimuli"])
    assert ok.exit_code == 0, ok.output
    assert "with las" in ok.output
    # a recorded value the policy refuses is named, not ignored
    bad = _tuned_log(tmp_path, "las", {"threshold": -5.0})
    res = CliRunner().invoke(app, ["replay", str(bad), "--stimuli"])
    assert res.exit_code == 2, res.output
    assert "threshold" in res.output

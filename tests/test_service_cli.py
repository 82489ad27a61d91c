"""``dlsched serve``: bad input is one ``error:`` line naming the option, exit code 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi")

from dlsched.cli import main  # noqa: E402

runner = CliRunner()


@pytest.mark.parametrize("args, message", [
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--policy", "sjf"], "policy sjf is an oracle"),
    (["--policy", "srtf"], "(srtf-pred is SRTF by predicted remaining time)"),
    (["--policy", "oracle-pairing"], "policy oracle-pairing is an oracle"),
    (["--placement", "best-fit:x"], "the weight after ':' must be a number"),
    (["--kubeconfig", "/no/such/kubeconfig"], "--kubeconfig: /no/such/kubeconfig does not exist"),
    (["--vc-map", "team-a"], "--vc-map: 'team-a' is not NAMESPACE=VC"),
    (["--gpu", "Z9"], "--gpu: unknown GPU type 'Z9'"),
    (["--db", "nosuch://x"], "--db nosuch://x:"),
    ([], "give --kubeconfig FILE or --api-server URL"),
])
def test_bad_input_is_one_error_line(args, message, monkeypatch, tmp_path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    if "--kubeconfig" not in args and args:
        args = [*args, "--api-server", "https://127.0.0.1:1"]
    if "--db" not in args:
        args = [*args, "--db", f"sqlite:///{tmp_path}/s.db"]
    res = runner.invoke(main.app, ["serve", *args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and message in lines[-1], res.output
    assert "Traceback" not in res.output

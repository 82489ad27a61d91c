"""``dlsched serve`` is described like a run (issue 32, point 1; issue 37's serve inputs): its policy
part is ``simulate``'s PolicyConfig, it takes the same generated policy flags and ``--param``,
the policy object the running service holds has the values given, and the effective
configuration is printed at start-up, returned by ``GET /api/v1/state`` and written to the event
log's config line. Bad values (a misspelt parameter, ``nan``/``inf`` for a timeout) are one
``error:`` line naming the option, exit code 2.

The service is built by the CLI itself (``dlsched serve`` through Typer): only the two calls that
need a real cluster are replaced -- reconciling with the API server (``LiveService.start``) and
serving HTTP (``uvicorn.run``) -- so no control plane is needed."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi")

from dlsched.cli import main
from dlsched.registry import POLICIES, policy_params
from dlsched.run.config import OptionError, PredictionConfig, ServiceConfig, ServiceTimings

runner = CliRunner()
TOKEN = "operator-secret"


@pytest.fixture
def serve(monkeypatch, tmp_path):
    """``serve(*args)`` -> (CLI result, the service the command built, its HTTP app)."""
    import uvicorn

    from dlsched.cli import serve_cmd
    from dlsched.service.runtime import LiveService

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    built: dict = {}
    assemble = serve_cmd.assemble

    def keep(*args, **kwargs):
        built["service"], api = assemble(*args, **kwargs)
        return built["service"], api

    monkeypatch.setattr(serve_cmd, "assemble", keep)
    monkeypatch.setattr(LiveService, "start", lambda self: {"nodes": 0, "pods": 0})   # an empty cluster
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: built.__setitem__("app", app))

    def run(*args: str):
        built.clear()
        res = runner.invoke(main.app, ["serve", "--api-server", "http://127.0.0.1:1", "--token", TOKEN,
                                       "--db", f"sqlite:///{tmp_path}/s.db", *args])
        return res, built.get("service"), built.get("app")
    return run


def _guard(attr: str):
    return lambda pol: getattr(pol.guard, attr)


#: per policy, cases of (command-line arguments, {parameter: (how the running policy object holds it,
#: the value expected)}); every field of every live policy's Params is set to a non-default value
#: in some case (test_every_parameter_is_covered)
CASES: dict[str, list[tuple[list[str], dict]]] = {
    "srtf-pred": [(["--min-run-s", "120", "--param", "max_evictions=2", "--grace-s", "45", "--source", "job"],
                   {"min_run_s": (_guard("min_run_s"), 120.0), "max_evictions": (_guard("max_evictions"), 2),
                    "grace_s": (_guard("grace_s"), 45.0), "source": (lambda p: p.source, "job")})],
    "qssf": [(["--param", "lam=0.2", "--refit-every", "3600"],
              {"lam": (lambda p: p.estimator.lam, 0.2), "refit_every": (lambda p: p.estimator.refit_every, 3600.0)}),
             (["--priority-file", "{tmp}/prio.csv"],
              {"priority_file": (lambda p: p.priorities, {"job-a": 2.5, "job-b": 7.0})})],
    "las": [(["--threshold", "3600", "--param", "queues=4"],
             {"threshold": (lambda p: p.threshold, 3600.0), "queues": (lambda p: p.queues, 4)})],
    "fairshare": [(["--half-life", "3600"],
                   {"half_life": (lambda p: p.tracker.half_life, 3600.0)})],
    "horus": [(["--k", "2", "--beta", "7", "--param", "rounds=5"],
               {"k": (lambda p: p.k, 2), "beta": (lambda p: p.beta, 7), "rounds": (lambda p: p.rounds, 5)})],
    "horus-f": [(["--param", "k=4", "--param", "beta=3", "--rounds", "2"],
                 {"k": (lambda p: p.k, 4), "beta": (lambda p: p.beta, 3), "rounds": (lambda p: p.rounds, 2)})],
    "pab": [(["--warmup", "30", "--max-drop", "0.3", "--t-wait", "10", "--profile", "shared",
              "--param", "min_run_s=60", "--max-evictions", "3", "--grace-s", "20"],
             {"warmup": (lambda p: p.warmup, 30.0), "max_drop": (lambda p: p.max_drop, 0.3),
              "t_wait": (lambda p: p.t_wait, 10.0), "profile": (lambda p: p.profile, "shared"),
              "min_run_s": (_guard("min_run_s"), 60.0), "max_evictions": (_guard("max_evictions"), 3),
              "grace_s": (_guard("grace_s"), 20.0)})],
    "coscheml": [(["--window", "16", "--interference-model", "constant-2"],
                  {"window": (lambda p: p.window, 16), "interference_model": (lambda p: p.model_spec, "constant-2")})],
    "loadbalance": [(["--param", "window=8"], {"window": (lambda p: p.window, 8)})],
    "mystic": [(["--window", "5"], {"window": (lambda p: p.window, 5)})],
    "random-pairing": [(["--pairing-seed", "7", "--window", "9"],
                        {"pairing_seed": (lambda p: p.seed, 7), "window": (lambda p: p.window, 9)})],
}

def _reserving_cases() -> list[tuple[list[str], dict]]:
    """easy / conservative: their queue order's own parameters and the estimate's, set live."""
    return [(["--param", "order=fairshare", "--param", "half_life=3600", "--param", "estimate=limit",
              "--param", "correction=double"],
             {"order": (lambda p: p.order.name, "fairshare"), "half_life": (lambda p: p.order.tracker.half_life, 3600.0),
              "estimate": (lambda p: p.estimates.kind, "limit"),
              "correction": (lambda p: p.estimates.correction, "double")}),
            (["--param", "order=qssf", "--param", "lam=0.2", "--param", "refit_every=3600"],
             {"order": (lambda p: p.order.name, "qssf"), "lam": (lambda p: p.estimator.lam, 0.2),
              "refit_every": (lambda p: p.estimator.refit_every, 3600.0)})]


for _name in ("easy", "conservative"):
    CASES[_name] = _reserving_cases() + [(["--param", "on_overrun=stop", "--param", "stop_grace=30"],
                                          {"on_overrun": (lambda p: p.on_overrun, "stop"),
                                           "stop_grace": (lambda p: p.stop_grace, 30.0)})]

#: parameter values refused live (one error line, tested below): an oracle's estimate
REFUSED: dict[str, dict[str, str]] = {"easy": {"estimate": "truth"}, "conservative": {"estimate": "truth"}}


def _live_policies_with_params() -> dict[str, set[str]]:
    """Registered policies that can run live (not oracles) and declare parameters: name -> fields."""
    out = {}
    for name, cls in POLICIES.items():
        params = policy_params(name)
        if params is not None and dataclasses.fields(params) and not getattr(cls, "oracle", False):
            out[name] = {f.name for f in dataclasses.fields(params)}
    return out


def test_every_parameter_is_covered():
    """A new live policy with a parameter (or a new parameter) fails here until a case sets it."""
    want = _live_policies_with_params()
    assert set(CASES) == set(want)
    for name, fields in want.items():
        covered = {key for _, checks in CASES[name] for key in checks} | set(REFUSED.get(name, {}))
        assert covered == fields, name
        defaults = {f.name: f.default for f in dataclasses.fields(policy_params(name))}
        for _, checks in CASES[name]:
            for key, (_, expected) in checks.items():
                assert expected != defaults[key], (name, key)   # a non-default value, or the test proves nothing


@pytest.mark.parametrize("policy, key, value", [(p, k, v) for p, kv in REFUSED.items() for k, v in kv.items()])
def test_a_refused_parameter_value_is_one_error_line(serve, policy, key, value):
    res, service, _ = serve("--policy", policy, "--param", f"{key}={value}")
    assert res.exit_code == 2 and "error: " in res.output and key in res.output, res.output
    assert "Traceback" not in res.output and service is None


@pytest.mark.parametrize("policy, index", [(p, i) for p, cases in CASES.items() for i in range(len(cases))])
def test_the_running_policy_has_the_parameters(serve, tmp_path, policy, index):
    (tmp_path / "prio.csv").write_text("job_id,priority\njob-a,2.5\njob-b,7.0\n")
    args, checks = CASES[policy][index]
    res, service, _ = serve("--policy", policy, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert res.exit_code == 0, res.output
    pol = service.core.policy
    assert pol.name == policy
    for key, (held, expected) in checks.items():
        got = held(pol)
        assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected, (key, got)
        shown = service.config["params"][key]
        assert shown == (str(tmp_path / "prio.csv") if key == "priority_file" else expected), (key, shown)
    assert f"policy {policy} (" in res.output   # the start-up block names the policy and its parameters


def test_las_threshold_and_qssf_lam_as_the_issue_writes_them(serve):
    res, service, _ = serve("--policy", "las", "--threshold", "3600")
    assert res.exit_code == 0, res.output
    assert service.core.policy.threshold == 3600.0
    assert "policy las (threshold=3600.0, queues=3), placement consolidate, backfill off" in res.output
    res, service, _ = serve("--policy", "qssf", "--param", "lam=0.2")
    assert res.exit_code == 0, res.output
    assert service.core.policy.estimator.lam == 0.2
    assert "policy qssf (lam=0.2, refit_every=86400.0, priority_file=None)" in res.output


def test_a_guard_grace_period_becomes_the_eviction_default(serve):
    """``grace_s`` is the eviction grace period a pod without an annotation gets (docs/service.md),
    which live was always its default before; ``--grace-seconds`` still wins."""
    res, service, _ = serve("--policy", "srtf-pred", "--grace-s", "45")
    assert res.exit_code == 0, res.output
    assert service.core.default_grace == 45 and service.config["eviction_grace_s"] == 45
    assert "eviction grace 45 s (the policy's grace_s)" in res.output
    res, service, _ = serve("--policy", "srtf-pred", "--grace-s", "45", "--grace-seconds", "12")
    assert service.core.default_grace == 12 and "eviction grace 12 s (--grace-seconds)" in res.output


def test_state_endpoint_returns_the_configuration(serve):
    from fastapi.testclient import TestClient

    res, _, app = serve("--policy", "horus", "--beta", "7", "--max-jobs-per-gpu", "2", "--eta-interval", "0")
    assert res.exit_code == 0, res.output
    body = TestClient(app).get("/api/v1/state", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    config = body["config"]
    assert config["policy"] == "horus" and config["placement"] == "horus-cost"
    assert config["params"] == {"k": None, "beta": 7, "rounds": None}
    assert config["max_jobs_per_gpu"] == 2 and config["eta_interval"] == 0.0
    assert config["store"].startswith("sqlite:///") and TOKEN not in json.dumps(config)   # no secret shown


def test_the_event_log_config_line_keeps_the_parameters(serve, tmp_path):
    log = tmp_path / "events.jsonl"
    res, _, _ = serve("--policy", "las", "--threshold", "900", "--record", str(log))
    assert res.exit_code == 0, res.output
    first = json.loads(log.read_text().splitlines()[0])
    assert first["kind"] == "config" and first["policy"] == "las" and first["placement"] == "consolidate"
    assert first["params"] == {"threshold": 900.0, "queues": 3}
    assert first["max_jobs_per_gpu"] == 1 and first["default_gpu"] == "V100"


def test_a_flag_of_another_policy_is_a_note(serve):
    res, service, _ = serve("--policy", "fifo", "--threshold", "3600")
    assert res.exit_code == 0, res.output
    assert "note: --threshold is read only by las; fifo ignores it" in res.output
    assert service.config["params"] == {}


def _one_error(res, *parts: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], res.output
    assert all(p in errors[0] for p in parts), res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("args, parts", [
    (["--policy", "qssf", "--param", "lamda=0.2"], ("--param lamda: not a parameter of qssf", "lam, refit_every")),
    (["--policy", "qssf", "--lamda", "0.2"], ("No such option: --lamda", "--lam")),
    (["--policy", "las", "--param", "threshold=soon"], ("--param threshold expects a number, got 'soon'",)),
    (["--policy", "las", "--param", "threshold"], ("--param expects NAME=VALUE, got 'threshold'",)),
    (["--policy", "las", "--threshold", "5", "--param", "threshold=6"], ("--param threshold is also given",)),
    (["--policy", "fifo", "--param", "lam=0.2"], ("--param lam: not a parameter of fifo", "it is a parameter of qssf, easy and conservative")),
    (["--policy", "fifo", "--priority-file", "x.csv"], ("--priority-file is for the policies",)),
    (["--policy", "qssf", "--lam", "7"], ("--lam",)),
])
def test_a_bad_parameter_is_one_error_line(serve, args, parts):
    res, service, _ = serve(*args)
    _one_error(res, *parts)
    assert service is None   # refused before anything was built


@pytest.mark.parametrize("option", ["--observe-after", "--unseen-pod-ttl", "--eta-interval", "--eta-threshold",
                                    "--gang-permit-timeout", "--gang-arrival-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e12"])
def test_a_non_finite_or_absurd_duration_is_one_error_line(serve, option, value):
    res, service, _ = serve(option, value)
    _one_error(res, option)
    assert service is None


@pytest.mark.parametrize("option", ["--lease-duration", "--renew-deadline", "--retry-period"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_bad_lease_timing_is_one_error_line(serve, tmp_path, option, value):
    res = runner.invoke(main.app, ["serve", "--leader-elect", "--api-server", "http://127.0.0.1:1",
                                   "--db", "postgresql+psycopg://u:p@127.0.0.1:1/x", option, value])
    _one_error(res, option)


def test_service_config_checks_its_values_and_is_frozen():
    with pytest.raises(OptionError, match="--eta-interval must be a finite number") as err:
        ServiceTimings(eta_interval=math.nan)
    assert err.value.key == "eta_interval"
    with pytest.raises(OptionError, match="--gang-permit-timeout .* at most 3,600"):
        ServiceTimings(gang_permit_timeout=7200.0)
    with pytest.raises(OptionError, match="--observe-after"):
        PredictionConfig(observe_after=-1.0)
    config = ServiceConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.nudge = False  # type: ignore[misc]
    from dlsched.run.params import policy

    with pytest.raises(OptionError, match="threshold must be a finite number"):
        policy("las", threshold=math.inf)   # every policy number is finite (issue 37)
    described = ServiceConfig(policy=policy("las", threshold=3600.0)).describe()
    assert described["params"]["threshold"] == 3600.0
    json.dumps(described, allow_nan=False)   # strict JSON


def test_the_shipped_deployment_passes_its_policy_parameters(serve):
    """deploy/deployment.yaml shows how to pass parameters; its policy part, run as written (the
    rest needs the cluster's PostgreSQL), builds a policy that holds them."""
    from pathlib import Path

    import yaml

    from dlsched.run.options import policy_options

    root = Path(__file__).resolve().parents[1]
    docs = list(yaml.safe_load_all((root / "deploy/deployment.yaml").read_text()))
    cmd = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["command"]
    policy_part = {"--policy", "--placement", "--param"} | {o.flag for o in policy_options().values()}
    args = [x for i, flag in enumerate(cmd) if flag in policy_part for x in (flag, cmd[i + 1])]
    assert "--param" in args
    res, service, _ = serve(*args)
    assert res.exit_code == 0, res.output
    given = dict(cmd[i + 1].split("=", 1) for i, flag in enumerate(cmd) if flag == "--param")
    assert given and all(str(service.config["params"][key]) == value for key, value in given.items())


def test_build_service_with_values_takes_the_parameters(monkeypatch, tmp_path):
    """The positional ``build_service`` (in-process callers such as the gang test) builds through
    the same ServiceConfig: its ``params`` reach the running policy, a misspelt one is refused."""
    from dlsched.cli.serve_cmd import build_service
    from dlsched.service.runtime import LiveService

    monkeypatch.setattr(LiveService, "start", lambda self: {})
    args = (None, False, None, "http://127.0.0.1:1", None, True, f"sqlite:///{tmp_path}/b.db", "t",
            "default-scheduler", "", "default", 1, None)
    service, _ = build_service("las", *args, params={"threshold": 60})
    assert service.core.policy.threshold == 60.0 and service.config["params"]["threshold"] == 60.0
    service.stop()
    with pytest.raises(OptionError, match="policy las has no parameter 'treshold'"):
        build_service("las", *args, params={"treshold": 60})

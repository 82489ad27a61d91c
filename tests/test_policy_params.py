"""Every registered policy's parameters reach it the same way through ``--param``, a sweep spec
and the library, and an undeclared parameter is an error naming the policy and what it declares
(issue 21, point 1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.registry import POLICIES, make_placer
from dlsched.run.config import NoParams, OptionError
from dlsched.run.options import OPTIONS, configs_from_options
from dlsched.run.params import PolicyContext, all_params, constructor_options, policy
from dlsched.sweep.cell import CellError, config_of
from dlsched.sweep.spec import load_spec

runner = CliRunner()


def _other_values(tmp_path: Path) -> dict[str, object]:
    """A valid value other than the default for every policy parameter (a new parameter must add one)."""
    prio = tmp_path / "prio.csv"
    prio.write_text("jobname,priority\nsia_000001,1\n")
    return {"lam": 0.3, "refit_every": 3600.0, "priority_file": prio, "threshold": 600.0, "queues": 2,
            "half_life": 7200.0, "k": 2, "beta": 4, "rounds": 3, "warmup": 30.0, "max_drop": 0.25, "t_wait": 0.0,
            "profile": "shared", "window": 8, "interference_model": "horus-paper-curve", "min_combined": 1.5,
            "pairing_seed": 7, "min_run_s": 600.0, "max_evictions": 2, "grace_s": 30.0, "source": "job",
            # easy and conservative
            "order": "las", "estimate": "capped", "correction": "double", "on_overrun": "run", "stop_grace": 30.0}


def _text(value: object) -> str:
    return str(value)


def test_every_policy_with_options_of_its_own_declares_them(tmp_path):
    fields = {name: set(kinds) for name, kinds in all_params().items()}
    assert fields["horus"] == fields["horus-f"] == {"k", "beta", "rounds"}
    guards = {"min_run_s", "max_evictions", "grace_s"}   # sched/preemption.py, on every preemptive policy
    assert fields["pab"] == {"warmup", "max_drop", "t_wait", "profile"} | guards
    assert fields["srtf"] == guards and fields["srtf-pred"] == {"source"} | guards
    assert fields["coscheml"] == {"window", "interference_model"}
    assert fields["oracle-pairing"] == {"window", "min_combined"}
    assert fields["random-pairing"] == {"window", "pairing_seed"}
    assert fields["loadbalance"] == fields["mystic"] == {"window"}
    assert fields["fifo"] == fields["sjf"] == fields["obp"] == set()
    values = _other_values(tmp_path)
    assert set().union(*fields.values()) <= set(values), "give every new parameter a test value above"


def test_a_parameter_name_means_one_type_in_every_policy():
    seen: dict[str, tuple[type, bool]] = {}
    for name, kinds in all_params().items():
        for key, kind in kinds.items():
            assert seen.setdefault(key, kind) == kind, f"{name}.{key} is {kind}, elsewhere {seen[key]}"
            assert key not in OPTIONS or OPTIONS[key].section == "params", f"{name}.{key} shadows a run option"


@pytest.mark.parametrize("name", list(POLICIES))
def test_params_round_trip_through_param_flags_sweep_and_library(tmp_path, name):
    values = {k: v for k, v in _other_values(tmp_path).items() if k in all_params()[name]}
    expected = POLICIES[name].Params(**values) if values else NoParams()
    assert expected != (POLICIES[name].Params() if values else None)
    [by_flags], unread = configs_from_options({"policy": name, "param": [f"{k}={_text(v)}" for k, v in values.items()]})
    assert unread == [] and by_flags.policy.params == expected
    spec = tmp_path / "spec.yaml"
    spec.write_text("runs:\n  - {" + ", ".join([f"policy: {name}"] + [f"{k}: {v}" for k, v in values.items()]) + "}\n")
    [cell] = load_spec(spec).cells
    assert config_of(cell.params) == by_flags  # the whole frozen run, not only the parameters
    assert policy(name, **values).params == expected
    # the constructor takes what the parameters say
    options = constructor_options(name, expected, PolicyContext())
    POLICIES[name](make_placer(getattr(POLICIES[name], "default_placement", None)), **options)


def test_an_undeclared_param_names_the_policy_and_what_it_declares(tmp_path):
    with pytest.raises(OptionError, match=r"--param beta: not a parameter of pab \(pab declares warmup, max_drop, "
                                          r"t_wait, profile, min_run_s, max_evictions, grace_s\); it is a parameter of horus and horus-f"):
        configs_from_options({"policy": "pab", "param": ["beta=3"]})
    with pytest.raises(OptionError, match=r"not a parameter of fifo \(fifo declares no parameters\)"):
        configs_from_options({"policy": "fifo", "param": ["nope=1"]})
    with pytest.raises(OptionError, match=r"policy horus has no parameter 'window' \(horus declares k, beta, rounds\)"):
        policy("horus", window=3)
    result = runner.invoke(app, ["simulate", "--jobs", "20", "--policy", "mystic", "--param", "k=2",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "error: --param k: not a parameter of mystic (mystic declares window)" in result.output
    assert "Traceback" not in result.output


def test_a_sweep_cell_rejects_a_parameter_its_policy_does_not_declare(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("runs:\n  - {policy: horus, window: 4}\n")
    [cell] = load_spec(spec).cells
    with pytest.raises(CellError, match=r"window: policy horus does not read window \(read by coscheml, loadbalance, "
                                        r"mystic, oracle-pairing, random-pairing; horus declares k, beta, rounds\)"):
        config_of(cell.params)


@pytest.mark.parametrize(("param", "message"), [
    ("beta=0", "--param beta must be >= 1 jobs per round, got 0"),
    ("k=zero", "--param k expects an integer, got 'zero'"),
])
def test_a_bad_parameter_value_is_one_error_line(tmp_path, param, message):
    result = runner.invoke(app, ["simulate", "--jobs", "20", "--policy", "horus", "--param", param,
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and f"error: {message}" in result.output and "Traceback" not in result.output


def test_pab_and_pairing_checks_run_when_the_config_is_built():
    for name, values, text in (("pab", {"max_drop": 1.0}, "max_drop must be between 0 and 1"),
                               ("pab", {"profile": "some"}, "profile must be 'all' or 'shared'"),
                               ("loadbalance", {"window": 0}, "window must be >= 1 job"),
                               ("oracle-pairing", {"min_combined": -1.0}, "min_combined must be a finite number")):
        with pytest.raises(OptionError, match=text):
            policy(name, **values)
    assert dataclasses.asdict(policy("horus-f").params) == {"k": None, "beta": 15, "rounds": None}


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "inf", "nan"])
def test_every_number_parameter_refuses_non_finite_values(value):
    # one rule for every policy (LAS took threshold=inf where fair share refused half_life=inf):
    # through the library, --param text and a sweep alike, the error names the parameter
    floats = [(name, key) for name, kinds in all_params().items() for key, (kind, _) in kinds.items()
              if kind is float]
    assert ("las", "threshold") in floats and ("fairshare", "half_life") in floats and len(floats) >= 10
    for name, key in floats:
        with pytest.raises(OptionError, match=f"--param {key} must be a finite number") as err:
            policy(name, **{key: value})
        assert err.value.key == key


@pytest.mark.parametrize("cls,key", [("LasParams", "threshold"), ("QssfParams", "refit_every")])
def test_params_classes_refuse_infinity_when_built_directly(cls, key):
    from dlsched.sched.policies import las, qssf

    params = getattr(las, cls, None) or getattr(qssf, cls)
    with pytest.raises(ValueError, match="finite number"):
        params(**{key: float("inf")})


def test_las_threshold_inf_on_the_command_line_is_one_error_line(tmp_path):
    result = runner.invoke(app, ["simulate", "--jobs", "20", "--policy", "las", "--param", "threshold=inf",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip() == "error: --param threshold must be a finite number, got inf"

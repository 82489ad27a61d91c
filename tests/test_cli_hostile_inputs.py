"""Issue 25's hostile inputs: each is one `error:` line naming the file/option (exit 2, no traceback),
a bounded check before the work, or a printed note; BOM-prefixed CSVs load."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from support.cli_run import one_error, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


@pytest.fixture()
def corrupt_gz(tmp_path) -> Path:
    """A valid gzip header followed by random bytes."""
    path = tmp_path / "t.csv.gz"
    head = gzip.compress(b"job_id,submit_time\n")[:10]
    path.write_bytes(head + random.Random(7).randbytes(400))
    return path


@pytest.mark.parametrize("argv", [
    ("simulate", "--trace", "{gz}", "--nodes", "2", "--out", "{tmp}/run"),
    ("trace", "stats", "{gz}"),
    ("energy", "replay", "--series", "{gz}", "--out", "{tmp}/e"),
    ("forecast", "--series", "{gz}"),
])
def test_corrupt_gzip_is_a_clear_error_naming_the_file(argv, corrupt_gz, tmp_path) -> None:
    argv = [a.replace("{gz}", str(corrupt_gz)).replace("{tmp}", str(tmp_path)) for a in argv]
    line = one_error(*run_cli(*argv))
    assert line.startswith(f"error: {corrupt_gz}: ") and "gzip" in line


def test_bom_csv_loads_and_its_format_is_detected(tmp_path) -> None:
    plain = FIXTURES / "helios_log.csv"
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    code, with_bom = run_cli("trace", "stats", bom)
    assert code == 0, with_bom
    code, without = run_cli("trace", "stats", plain)
    def same(lines: list[str], path: Path) -> list[str]:
        return [" ".join(ln.replace(str(path), "X").replace(path.name, "X").split()) for ln in lines]

    assert same(with_bom, bom) == same(without, plain)


def test_format_detection_names_the_option() -> None:
    code, lines = run_cli("trace", "stats", FIXTURES / "vc_config.csv")
    line = one_error(code, lines)
    assert "--trace-format" in line and "fmt=" not in line


def _bomb(levels: int = 9) -> str:
    rows = ["defaults:", "  gpus: 8", "  cpus: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, levels + 1):
        rows.append(f"  x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(rows) + "\ngroups:\n  - vc: a\n    nodes: 1\n"


def test_yaml_alias_bomb_is_refused_with_the_limit(tmp_path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    line = one_error(*run_cli("cluster", "show", path))
    assert line == (f"error: {path}: its YAML aliases (*name) expand to more than 100,000 values "
                    "(the limit; a cluster file needs a few dozen)")


def test_huge_node_count_in_a_cluster_file_is_refused(tmp_path) -> None:
    path = tmp_path / "big.toml"
    path.write_text('[[groups]]\nvc = "a"\nnodes = 1000000000\n')
    line = one_error(*run_cli("cluster", "show", path))
    assert line == (f"error: {path}, line 3: groups[1].nodes = 1,000,000,000: the file describes more than "
                    "100,000 nodes in all (the limit)")


@pytest.mark.parametrize("suffix,text,expected", [
    (".yaml", 'defaults:\n  gpus: "eight"\ngroups:\n  - vc: a\n    nodes: 2\n',
     "line 2: defaults.gpus = 'eight': want a whole number >= 1 (inherited by groups[1])"),
    (".yaml", 'groups:\n  - vc: a\n    nodes: 2\n  - vc: b\n    nodes: 1\n    gpus: "eight"\n',
     "line 6: groups[2].gpus = 'eight': want a whole number >= 1"),
    (".toml", '[defaults]\ngpus = "eight"\n[[groups]]\nvc = "a"\nnodes = 2\n',
     "line 2: defaults.gpus = 'eight': want a whole number >= 1 (inherited by groups[1])"),
])
def test_bad_value_in_a_cluster_file_names_file_line_and_key(tmp_path, suffix, text, expected) -> None:
    if suffix == ".yaml":
        pytest.importorskip("yaml")
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    assert one_error(*run_cli("cluster", "show", path)) == f"error: {path}, {expected}"
    line = one_error(*run_cli("simulate", "--cluster", path, "--jobs", "20", "--out", tmp_path / "r"))
    assert line == f"error: {path}, {expected}"


@pytest.mark.parametrize("option,value,expected", [
    ("--load", "0", "--load must be between 0.01 and 10 (offered GPU load, 1 = the cluster exactly busy), got 0"),
    ("--load", "nan", ("--load must be between 0.01 and 10 (offered GPU load, 1 = the cluster exactly busy), "
                       "got nan")),
    ("--days", "-1", "--days must be > 0 and at most 3,650 (ten years), got -1"),
    ("--days", "1e300", "--days must be > 0 and at most 3,650 (ten years), got 1e+300"),
    ("--seed", "-1", "--seed must be >= 0, got -1"),
])
def test_trace_generate_domains(tmp_path, option, value, expected) -> None:
    out = tmp_path / "g.csv"
    assert one_error(*run_cli("trace", "generate", out, "--jobs", "50", option, value)) == f"error: {expected}"
    assert not out.exists()


def test_trace_generate_with_days_submits_inside_the_span(tmp_path) -> None:
    from dlsched.traces.api import load_trace

    out = tmp_path / "g.csv"
    code, _ = run_cli("trace", "generate", out, "--jobs", "200", "--days", "2")
    assert code == 0
    times = [j.submit_time for j in load_trace(out).jobs]
    assert min(times) >= 0 and max(times) <= 2 * 86400


def test_submit_time_beyond_the_bound_is_an_error(tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,duration,gpus,vc\n1,0,100,1,a\n2,1e300,100,1,a\n")
    line = one_error(*run_cli("simulate", "--trace", trace, "--nodes", "1", "--out", tmp_path / "r"))
    assert line == (f"error: {trace}, line 3, column 'submit_time': beyond 1e+10 s (about 317 years; the limit "
                    "for times and durations): '1e+300'")


def test_node_series_with_more_active_than_total_is_an_error(tmp_path) -> None:
    series = tmp_path / "s.csv"
    series.write_text("time,active,total\n2020-01-01 00:00,2,3\n2020-01-01 00:01,5,3\n")
    line = one_error(*run_cli("forecast", "--series", series))
    assert line == (f"error: {series}, line 3, column 'active': active 5 is more than total 3 "
                    "(busy cannot exceed total; 1 such rows)")


EXAMPLE_LOG = Path(__file__).resolve().parents[1] / "docs" / "examples" / "replay-events.jsonl"


def test_the_shipped_replay_example_replays(tmp_path) -> None:
    code, lines = run_cli("replay", EXAMPLE_LOG, "--out", tmp_path / "r")
    assert code == 0 and lines[-1].startswith("replayed 7 jobs with fifo: avg JCT 53.0 s")


@pytest.mark.parametrize("old,new,expected", [
    ('"name":"n2",', "", "line 3 (node): 'name' is missing or empty (want a text), got None"),
    ('"node":"n2"', '"node":"n9"', ("line 11 (start): starts c on node 'n9', which no earlier 'node' line "
                                    "names (named: n1, n2)")),
    ('"gpus":2,"submit', '"gpus":"two","submit', "line 4 (submit): 'gpus' must be a whole number >= 0, got 'two'"),
    ('"kind":"finish","at":1700000030.0', '"kind":"finish","at":1699999000.0',
     "line 19 (finish): b finishes at 1,699,999,000.000, before its start at 1,700,000,001.000"),
])
def test_replay_log_faults_name_the_line(tmp_path, old, new, expected) -> None:
    text = EXAMPLE_LOG.read_text()
    assert old in text
    log = tmp_path / "events.jsonl"
    log.write_text(text.replace(old, new, 1))
    assert one_error(*run_cli("replay", log, "--out", tmp_path / "r")) == f"error: LOG {log}: {expected}"


def test_replay_torn_last_line_is_a_note(tmp_path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(EXAMPLE_LOG.read_text() + '{"kind":"fin')
    code, lines = run_cli("replay", log, "--out", tmp_path / "r")
    assert code == 0
    assert lines[0] == (f"note: LOG {log}: line 32, the last, is torn (not JSON; the service stopped mid-write?): "
                        "left out of the replay")


@pytest.fixture()
def small_series(tmp_path) -> Path:
    """Three weeks of 10-minute samples (the forecaster's minimum history and a window)."""
    import datetime as dt

    t0 = dt.datetime(2020, 1, 1)
    rows = [f"{t0 + dt.timedelta(minutes=10 * i):%Y-%m-%d %H:%M},{(i * 7) % 20},30" for i in range(3000)]
    path = tmp_path / "series.csv"
    path.write_text("time,active,total\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("argv,expected", [
    (["--boot-delay-s", "inf"], "--boot-delay-s must be a finite number of at most 86,400 s, got inf"),
    (["--idle-timeout-s", "nan"], "--idle-timeout-s must be a finite number of at most 2,592,000 s, got nan"),
    (["--boot-delay", "nan"], "--boot-delay must be a finite number of at most 1,440 minutes, got nan"),
    (["--boot-delay", "5", "--boot-delay-s", "300"],
     "give --boot-delay-s (seconds) or the deprecated --boot-delay (minutes), not both"),
    (["--cooling-factor", "nan"], "--cooling-factor must be a finite number, got nan"),
    (["--price", "inf"], "--price must be a finite number, got inf"),
])
def test_energy_replay_options_name_themselves(small_series, tmp_path, argv, expected) -> None:
    line = one_error(*run_cli("energy", "replay", "--series", small_series, "--out", tmp_path / "e", *argv))
    assert line == f"error: {expected}"
    assert not (tmp_path / "e").exists()


def test_energy_replay_takes_seconds_and_the_old_minutes_with_a_note(small_series, tmp_path) -> None:
    import json

    code, _ = run_cli("energy", "replay", "--series", small_series, "--out", tmp_path / "s",
                   "--boot-delay-s", "600", "--json")
    assert code == 0
    code, old = run_cli("energy", "replay", "--series", small_series, "--out", tmp_path / "m", "--boot-delay", "10",
                     "--json")
    assert code == 0
    assert old[0] == ("note: --boot-delay 10 is in minutes and deprecated; use --boot-delay-s 600 (seconds, the "
                      "unit simulate's --boot-delay takes)")
    seconds = json.loads((tmp_path / "s" / "summary.json").read_text())
    minutes = json.loads((tmp_path / "m" / "summary.json").read_text())
    seconds.pop("seconds"), minutes.pop("seconds")  # wall-clock timings
    assert seconds == minutes


@pytest.mark.parametrize("text,expected", [
    ("garbage: [\n", "not a usable kubeconfig (while parsing a flow node)"),
    ("users: [{name: u, user: {token: SECRET-TOKEN-456}}]\n",
     "not a usable kubeconfig (Invalid kube-config file. Expected key current-context in {path})"),
])
def test_serve_with_an_invalid_kubeconfig_is_one_error_and_prints_no_token(tmp_path, text, expected) -> None:
    pytest.importorskip("kubernetes")
    pytest.importorskip("fastapi")
    kubeconfig = tmp_path / "kc.yaml"
    kubeconfig.write_text(text)
    code, lines = run_cli("serve", "--kubeconfig", kubeconfig, "--db", f"sqlite:///{tmp_path}/s.db")
    assert lines == [f"error: --kubeconfig {kubeconfig}: {expected.format(path=kubeconfig)}"]
    assert code == 2


@pytest.mark.parametrize("db,expected", [
    ("nosuch://x", "not a database URL dlsched can open (use sqlite:///FILE or postgresql://USER@HOST/DB)"),
    ("sqlite:////no/such/dir/s.db", "cannot open the store: unable to open database file"),
])
def test_serve_db_errors_name_no_sqlalchemy_class(tmp_path, db, expected) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("fastapi")
    code, lines = run_cli("serve", "--api-server", "https://127.0.0.1:1", "--db", db)
    assert one_error(code, lines) == f"error: --db {db}: {expected}"


def test_bom_canonical_trace_is_detected_and_simulated(tmp_path) -> None:
    plain = tmp_path / "g.csv"
    assert run_cli("trace", "generate", plain, "--jobs", "60")[0] == 0
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    code, lines = run_cli("simulate", "--trace", bom, "--nodes", "20", "--out", tmp_path / "r")
    assert code == 0, lines
    assert any(ln.startswith("60 jobs simulated in ") for ln in lines), lines


def test_negative_seed_names_the_option(tmp_path) -> None:
    line = one_error(*run_cli("trace", "generate", tmp_path / "w.csv", "--workload", "horus-wsmall", "--seed", "-1"))
    assert line == "error: --seed must be >= 0, got -1"
    line = one_error(*run_cli("estimate", "--jobs", "100", "--seed", "-1"))
    assert "'--seed'" in line and "-1 is not in the range x>=0" in line

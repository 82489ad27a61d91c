"""Forged and damaged event logs: ``replay``, ``replay --stimuli`` and ``whatif`` read the log
through one reader (service/log.py), so each damage is one ``error:`` line naming the file, the
line and the field (exit 2), or a ``note:`` saying what was assumed -- never silent, never a
kernel internal. The what-if's own defaults (the moment it looks at, a policy compared with
itself, a pod that can never fit) are said too."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
STIMULI = EXAMPLES / "stimuli-events.jsonl"
WHATIF = EXAMPLES / "whatif-events.jsonl"


def run(*argv: object) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"escaped: {result.exception!r}")
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


def one_error(code: int, lines: list[str]) -> str:
    assert code == 2, lines
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    assert "internal error" not in errors[0]
    return errors[0]


def forged(tmp_path: Path, source: Path, edit) -> Path:
    """``source``'s lines through ``edit`` (a function of the list of lines), written to a new log."""
    lines = source.read_text().splitlines()
    out = tmp_path / "forged.jsonl"
    out.write_text("\n".join(edit(lines)) + "\n")
    return out


def replace_at(number: int, old: str, new: str):
    def edit(lines: list[str]) -> list[str]:
        assert old in lines[number - 1], lines[number - 1]
        lines[number - 1] = lines[number - 1].replace(old, new, 1)
        return lines
    return edit


def test_a_bind_of_a_job_never_placed_names_the_line_not_the_kernel(tmp_path):
    """The pass that placed b is gone: its BindSucceeded (now line 15) finds b pending."""
    log = forged(tmp_path, STIMULI, lambda lines: lines[:13] + lines[14:])
    error = one_error(*run("replay", log, "--stimuli"))
    assert error == (f"error: LOG {log}: line 15 (BindSucceeded): the kernel cannot follow it: "
                     "job b confirmed while PENDING")


@pytest.mark.parametrize("value", ["1e400", "NaN", "-Infinity"])
def test_a_non_finite_time_is_an_error_naming_the_line(tmp_path, value):
    log = forged(tmp_path, STIMULI, replace_at(14, '"at":1700000001.0', f'"at":{value}'))
    for argv in (("replay", log, "--stimuli"), ("whatif", log, "--policy", "fifo"),
                 ("replay", log, "--out", tmp_path / "r")):
        error = one_error(*run(*argv))
        assert error.startswith(f"error: LOG {log}: line 14 (PassRequested): 'at' must be a time in seconds"), error


def test_a_clock_going_backwards_is_an_error(tmp_path):
    log = forged(tmp_path, STIMULI, replace_at(20, '"at":1700000002.0', '"at":1699999000.0'))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error == (f"error: LOG {log}: line 20 (PassRequested): 'at' 1,699,999,000.000 is before line 18's "
                     "1,700,000,002.000; the service's clock never goes back (a log edited or merged by hand?)")


def test_an_unknown_gpu_type_is_an_error(tmp_path):
    log = forged(tmp_path, STIMULI, replace_at(2, '"gpu_type":"V100"', '"gpu_type":"Z900"'))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error.startswith(f"error: LOG {log}: line 2 (NodeChanged): 'gpu_type': ") and "Z900" in error


def test_an_unknown_stimulus_and_one_for_a_job_never_submitted_are_errors(tmp_path):
    log = forged(tmp_path, STIMULI, replace_at(10, '"stimulus":"BindSucceeded"', '"stimulus":"BindWorked"'))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error.startswith(f"error: LOG {log}: line 10 (BindWorked): 'stimulus' 'BindWorked' is not one the "
                            "service records (known: JobSubmitted,")
    log = forged(tmp_path, STIMULI, replace_at(10, '"uid":"a"', '"uid":"zz"'))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error == (f"error: LOG {log}: line 10 (BindSucceeded): the kernel cannot follow it: a BindSucceeded "
                     "for job 'zz', which no earlier JobSubmitted submitted")


def test_a_job_submitted_without_gpus_names_the_field(tmp_path):
    log = forged(tmp_path, STIMULI, replace_at(12, '"gpus":4', '"gpus":"four"'))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error == f"error: LOG {log}: line 12 (JobSubmitted): 'gpus' must be a whole number >= 0, got 'four'"


def test_a_torn_last_line_is_a_note_and_the_rest_replays(tmp_path):
    log = forged(tmp_path, STIMULI, lambda lines: [*lines, '{"kind":"stimulus","at":17000'])
    code, lines = run("replay", log, "--stimuli")
    assert code == 0, lines
    torn = len(STIMULI.read_text().splitlines()) + 1
    assert lines[0] == (f"note: LOG {log}: line {torn}, the last, is torn (not JSON; the service stopped "
                        "mid-write?): left out of the replay")
    assert "8 of 8 nominations agree" in lines[-1]


def test_a_log_without_its_config_line_says_what_it_assumed(tmp_path):
    """Recorded under qssf with best-fit; without the config line the replay runs FIFO, and says so."""
    log = forged(tmp_path, STIMULI, lambda lines: lines[1:])
    code, lines = run("replay", log, "--stimuli")
    assert code == 0, lines
    assert lines[0] == (f"note: LOG {log}: no 'config' line (the log's start is missing?): assumed policy fifo "
                        "with its own placement, no backfill, one job per GPU, default GPU V100")
    assert "with fifo:" in lines[-1] or "with fifo:" in lines[-2]


def test_a_second_config_line_ends_what_is_read(tmp_path):
    config = STIMULI.read_text().splitlines()[0]
    log = forged(tmp_path, STIMULI, lambda lines: [*lines, config])
    code, lines = run("replay", log, "--stimuli")
    assert code == 0, lines
    assert lines[0].startswith(f"note: LOG {log}: line {len(STIMULI.read_text().splitlines()) + 1} is a second "
                               "'config' line")
    assert "8 of 8 nominations agree" in lines[-1]


# -- whatif LOG: what it looks at and why --------------------------------------------------------
def test_whatif_without_at_looks_at_the_last_moment_with_a_pending_pod(tmp_path):
    code, lines = run("whatif", WHATIF, "--policy", "qssf")
    assert code == 0, lines
    assert lines[0] == ("note: --at not given: the what-if looks at 20 s, the last moment of the log with a "
                        "pending pod (the log spans 0 to 90 s; --at SECONDS picks another)")
    assert any(ln.startswith("what-if at 20 s of ") and "1 pending" in ln for ln in lines)


def test_whatif_on_a_log_where_nothing_ever_waits_says_so(tmp_path):
    log = tmp_path / "quiet.jsonl"
    quiet = [
        '{"kind":"config","at":0.0,"policy":"fifo","placement":"","max_jobs_per_gpu":1,"default_gpu":"V100"}',
        '{"kind":"node","at":100.0,"name":"n1","vc":"default","gpus":8,"gpu_type":"V100","cordoned":false}',
        '{"kind":"submit","at":100.0,"uid":"a","pod":"default/a","vc":"default","gpus":2}',
        '{"kind":"start","at":100.0,"uid":"a","node":"n1","gpus":[0,1]}',
        '{"kind":"confirm","at":100.0,"uid":"a"}',
        '{"kind":"finish","at":160.0,"uid":"a"}']
    log.write_text("".join(line + "\n" for line in quiet))
    code, lines = run("whatif", log, "--policy", "qssf")
    assert code == 0, lines
    assert lines[0] == (f"note: LOG {log}: no pod was pending at any moment of the log, so the what-if at its "
                        "last event (60 s) has nothing to compare; --at SECONDS picks another moment (0 to 60)")


def test_whatif_of_the_recorded_policy_with_itself_gets_a_note():
    code, lines = run("whatif", WHATIF, "--policy", "fifo")
    assert code == 0, lines
    assert any(ln.startswith("note: --policy fifo is the recorded policy with its placement and parameters: "
                             "both runs are the same") for ln in lines)
    code, lines = run("whatif", WHATIF, "--policy", "qssf")
    assert not any("is the recorded policy" in ln for ln in lines)


def test_whatif_says_why_a_pod_never_starts(tmp_path):
    """A pod asking for 16 GPUs in a VC of 8-GPU nodes: never, with the reason."""
    def edit(lines: list[str]) -> list[str]:
        out = []
        for ln in lines:
            if '"uid":"train-2"' in ln and ('"kind":"submit"' in ln or '"JobSubmitted"' in ln):
                ln = ln.replace('"gpus":4', '"gpus":16')
            out.append(ln)
        return out
    log = forged(tmp_path, WHATIF, edit)
    assert '"gpus":16' in log.read_text()
    code, lines = run("whatif", log, "--policy", "qssf", "--at", "20")
    assert code == 0, lines
    assert any(ln.startswith("note: default/train-2 never starts in either run: it needs 16 GPUs") for ln in lines), \
        lines


def test_a_pod_running_on_a_node_cordoned_later_is_rebuilt_for_a_what_if():
    """n2 is cordoned at 55 s while e (started at 4 s) runs on it: the start is booked, then the cordon."""
    from dlsched.registry import make_policy
    from dlsched.service.whatif_log import state_at

    moment = state_at(STIMULI, make_policy("qssf", "best-fit"), 56.0)
    st = moment.state
    n2 = st.node_index["n2"]
    assert st.node_cordoned[n2] and {j.job_id for j in st.node_holders[n2]} == {"c", "e"}
    assert st.n_pending == 1 and moment.names == {"c": "default/c", "d": "default/d", "e": "default/e",
                                                  "f": "default/f"}
    st.check_invariants()


@pytest.mark.parametrize("line,old,new,expected", [
    (2, '"gpus":8', '"gpus":1e30', "line 2 (NodeChanged): 'gpus' is 1e+30, more than 1,024"),
    (1, '"max_jobs_per_gpu":1', '"max_jobs_per_gpu":1000', "line 1 (config): 'max_jobs_per_gpu' is 1000, more than 16"),
    (1, '"placement":"best-fit"', '"placement":"no-such"', ("line 1 (config): the recorded policy qssf with placement "
                                                          "no-such cannot be rebuilt")),
    (10, '"stimulus":"BindSucceeded"', '"stimulus":["BindSucceeded"]', ("line 10 (['BindSucceeded']): 'stimulus' "
                                                                      "['BindSucceeded'] is not one the service records")),
])
def test_absurd_or_mistyped_fields_are_errors_naming_the_line(tmp_path, line, old, new, expected):
    log = forged(tmp_path, STIMULI, replace_at(line, old, new))
    error = one_error(*run("replay", log, "--stimuli"))
    assert error.startswith(f"error: LOG {log}: {expected}"), error


def test_a_stimulus_trailing_its_pass_by_a_moment_is_read(tmp_path):
    """A stimulus carries its pass's start time; lines the pass wrote may be a moment later."""
    log = forged(tmp_path, STIMULI, replace_at(15, '"at":1700000001.0', '"at":1700000001.4'))
    code, lines = run("replay", log, "--stimuli")
    assert code == 0 and "8 of 8 nominations agree" in lines[-1], lines

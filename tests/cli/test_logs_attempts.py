"""`arctl logs` of a run with several jobs (a --force rerun, a resume), of a job's output that holds terminal control
sequences, and --follow of lines written in pieces (found by a hunt of `arctl logs`, 2026-12-05). The workspaces
are built by hand: a registry row and the run's job/<job id>/ folders with submitit's log files."""

from __future__ import annotations

import json
import os
import re
import time

from log_follow import following  # tests/support/log_follow.py
from logged_run import registered_run  # tests/support/logged_run.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states

RULE = re.compile(r"^[─-]{20,}$")


def _job(run_dir, job: str, out: str | None, err: str | None, age_s: float = 0.0):
    """job/<job>/ with its stdout and stderr (None: not written yet), ``age_s`` old."""
    folder = run_dir / "job" / job
    folder.mkdir(parents=True)
    for suffix, text in (("out", out), ("err", err)):
        if text is not None:
            (folder / f"{job}_0_log.{suffix}").write_text(text)
            os.utime(folder / f"{job}_0_log.{suffix}", (time.time() - age_s,) * 2)
    os.utime(folder, (time.time() - age_s,) * 2)
    return folder


def _logs(*args: str):
    res = CliRunner().invoke(app, ["logs", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def _headers(out: str) -> list[str]:
    """The title of each file's section (the line after a rule)."""
    lines = out.splitlines()
    return [lines[i + 1] for i, line in enumerate(lines[:-1]) if RULE.match(line)]


def test_a_queued_reruns_logs_are_said_to_be_an_earlier_jobs_and_its_earlier_jobs_are_listed(tmp_path):
    """From a hunt: a run rerun with --force and still waiting in the local queue printed its previous job's files
    ("completed", "Job completed successfully") under its new job's header as if they were its own, --json too,
    and no command said the run's earlier jobs' folders were there."""
    ws, run_id, run_dir = registered_run(tmp_path, states.PENDING, "queue:4242", host="another-host")
    older = _job(run_dir, "1000", "first try\n", "[arctl job] preempted\n", age_s=600)
    last = _job(run_dir, "1111", "Job completed successfully\n", "[arctl job] completed\n", age_s=60)
    out = _logs(run_id, "--workdir", str(ws.root))
    assert out.splitlines()[0].split()[:4] == [run_id, states.PENDING, "job", "queue:4242"], out
    assert f"earlier jobs of this run (most recent first):\n  {last}\n  {older}\n" in out, out
    assert "no log files of job queue:4242 yet; below: the logs of earlier job 1111, not job queue:4242's" in out
    assert [h.split("  ")[0] for h in _headers(out)] == [
        "job 1111 (an earlier attempt's): 1111_0_log.out", "job 1111 (an earlier attempt's): 1111_0_log.err"], out
    assert "first try" not in out and "[arctl job] completed" in out
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json"))
    assert (doc["state"], doc["job_id"]) == (states.PENDING, "queue:4242")
    assert [(f["path"], f["job"], f["earlier_attempt"]) for f in doc["logs"]] == [
        (str(last / f"1111_0_log.{s}"), "1111", True) for s in ("out", "err")]
    assert doc["earlier_jobs"] == [str(last), str(older)]


def test_the_earlier_files_shown_are_one_jobs(tmp_path):
    """The newest earlier job's files, never one file of each of two jobs (the old fallback took the two newest
    files of any job: the newest job's stderr beside an older job's stdout)."""
    ws, run_id, run_dir = registered_run(tmp_path, states.PENDING, "queue:4242", host="another-host")
    _job(run_dir, "1000", "old out\n", "old err\n", age_s=600)
    last = _job(run_dir, "1111", None, "new err\n", age_s=60)  # killed before it wrote its stdout
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json"))
    assert [(f["path"], f["lines"]) for f in doc["logs"]] == [(str(last / "1111_0_log.err"), ["new err"])], doc


def test_a_rerun_jobs_own_logs_are_shown_as_such_with_its_earlier_jobs_listed(tmp_path):
    """After a resume or rerun the current job's files are shown, unlabelled, and the earlier job's folder listed."""
    ws, run_id, run_dir = registered_run(tmp_path, states.COMPLETED, "2222")
    first = _job(run_dir, "1111", "first attempt\n", "[arctl job] preempted\n", age_s=600)
    _job(run_dir, "2222", "second attempt\n", "[arctl job] completed\n")
    out = _logs(run_id, "--workdir", str(ws.root))
    assert [h.split("  ")[0] for h in _headers(out)] == ["2222_0_log.out", "2222_0_log.err"], out
    assert f"earlier jobs of this run (most recent first):\n  {first}\n" in out and "no log files" not in out
    assert "second attempt" in out and "first attempt" not in out
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json"))
    assert [(f["job"], f["earlier_attempt"]) for f in doc["logs"]] == [("2222", False)] * 2
    assert doc["earlier_jobs"] == [str(first)]


def test_a_debug_runs_logs_in_its_job_folder_are_its_own_once_it_has_started(tmp_path, monkeypatch):
    """The debug executor's job ("debug" in the registry) writes submitit's DEBUG_<n> files into job/ itself: its
    own, unlabelled; a debug run still waiting for the runs its launch runs before it has not written them."""
    ws, run_id, run_dir = registered_run(tmp_path, states.COMPLETED, "debug", executor="debug")
    (run_dir / "job").mkdir()
    (run_dir / "job" / "DEBUG_140_0_log.out").write_text("debug out\n")
    out = _logs(run_id, "--workdir", str(ws.root))
    assert [h.split("  ")[0] for h in _headers(out)] == ["DEBUG_140_0_log.out"] and "no log files" not in out, out
    doc = json.loads(_logs(run_id, "--workdir", str(ws.root), "--json"))
    assert [(f["job"], f["earlier_attempt"]) for f in doc["logs"]] == [("debug", False)]
    following(monkeypatch, [({"state": states.PENDING}, None)])  # the debug launch runs another run first
    out = _logs(run_id, "--workdir", str(ws.root))
    assert "no log files of job debug yet; below: the logs of earlier job DEBUG_140, not job debug's" in out, out


HOSTILE = "title \x1b]0;PWNED\x07 clear \x1b[2J home \x1b[H c1 \x9b2J bell \x07 bs \x08 \x1b[1;31mred\x1b[0m\ttab\n"


def test_a_jobs_control_sequences_do_not_reach_the_terminal(tmp_path):
    """From a hunt: `arctl logs` wrote the job's output raw: a job's OSC retitled the user's terminal and its
    ``\\x1b[2J`` cleared it. Every control character but \\t \\n \\r is written as an escape; colours (SGR) stay."""
    ws, run_id, run_dir = registered_run(tmp_path, states.COMPLETED, "2222")
    _job(run_dir, "2222", HOSTILE, "")
    out = _logs(run_id, "--workdir", str(ws.root))
    line = next(line for line in out.splitlines() if line.startswith("title "))
    assert line == ("title \\x1b]0;PWNED\\x07 clear \\x1b[2J home \\x1b[H c1 \\x9b2J bell \\x07 bs \\x08 "
                    "\x1b[1;31mred\x1b[0m\ttab"), repr(line)
    kept = re.sub(r"\x1b\[[0-9;]*m", "", out)  # the job's colours, and the reset after them
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", kept), repr(out)
    raw = _logs(run_id, "--workdir", str(ws.root), "--json")  # JSON escapes them itself
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x80-\x9f]", raw), repr(raw)
    assert json.loads(raw)["logs"][0]["lines"][0] == HOSTILE.rstrip("\n")




def _append(path, text: str):
    return lambda: path.open("a").write(text)


def test_follow_holds_an_unended_line_back_and_heads_each_files_new_lines(tmp_path, monkeypatch):
    """From a hunt: --follow wrote an unterminated last line ("progress 50%") with a newline, and its end came
    later under the stderr's header. A line is written once it has ended (or the run has), under its file's header."""
    ws, run_id, run_dir = registered_run(tmp_path, states.RUNNING, "2222")
    folder = _job(run_dir, "2222", "start\nprogress 50%", "e1\n")
    out_log, err_log = folder / "2222_0_log.out", folder / "2222_0_log.err"
    running = {"state": states.RUNNING}
    following(monkeypatch, [
        (running, None),  # the first look
        (running, lambda: (_append(out_log, " and done\nclear \x1b[2J")(), _append(err_log, "e2\n")())),
        ({"state": states.COMPLETED}, _append(out_log, "ed without end")),
    ])
    out = _logs(run_id, "--follow", "--workdir", str(ws.root))
    lines = out.splitlines()
    assert "progress 50% and done" in lines and "progress 50%" not in lines, out
    assert "clear \\x1b[2Jed without end" in lines, out  # the run ended: its unended line written
    assert lines[-1] == f"-- {run_id} {states.COMPLETED}", out
    section = None
    where = {}
    for i, line in enumerate(lines):
        if i and RULE.match(lines[i - 1]):
            section = line.split("  ")[0]
        where.setdefault(line, []).append(section)
    assert where["progress 50% and done"] == ["2222_0_log.out"] and where["e2"] == ["2222_0_log.err"], out
    assert where["clear \\x1b[2Jed without end"] == ["2222_0_log.out"], out


def test_follow_of_a_queued_rerun_goes_on_to_its_own_jobs_logs(tmp_path, monkeypatch):
    """A queued rerun followed: its earlier job's files are marked so, and once its job starts, that job's files
    come under their own headers."""
    ws, run_id, run_dir = registered_run(tmp_path, states.PENDING, "queue:4242")
    _job(run_dir, "1111", "old\n", "[arctl job] completed\n", age_s=60)
    pending = {"state": states.PENDING, "job_id": "queue:4242"}
    following(monkeypatch, [
        (pending, None),
        ({"state": states.RUNNING, "job_id": "2222"}, lambda: _job(run_dir, "2222", "new out\n", "new err\n")),
        ({"state": states.COMPLETED, "job_id": "2222"}, None),
    ])
    out = _logs(run_id, "--follow", "--tail", "0", "--workdir", str(ws.root))
    assert [h.split("  ")[0] for h in _headers(out)] == [
        "job 1111 (an earlier attempt's): 1111_0_log.out", "job 1111 (an earlier attempt's): 1111_0_log.err",
        "2222_0_log.out", "2222_0_log.err"], out
    assert out.index("new out") > out.index("2222_0_log.out") and out.count("old") == 1, out

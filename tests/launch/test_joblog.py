"""arctl.launch.joblog: the job's log lines and its last attempt, read by the four readers of a job's log."""

from __future__ import annotations

import re

from arctl.launch import job, joblog


def _attempt(n: int) -> str:
    return joblog.log_line(joblog.attempt_message("e_a_s0_0123456789", n, "node1", "101"))


def test_the_line_an_attempt_starts_with_is_the_one_found(tmp_path):
    log = tmp_path / "101_0_log.err"
    log.write_text("\n".join(["before arctl's first line", _attempt(1), "one", _attempt(2), "two", "three"]) + "\n")
    assert joblog.last_attempt_lines(log) == [_attempt(2), "two", "three"]
    assert joblog.last_attempt(["no attempt line", "here"]) == ["no attempt line", "here"]
    assert joblog.last_attempt_lines(tmp_path / "missing.err") is None


def test_a_tail_reads_the_last_bytes_only(tmp_path):
    log = tmp_path / "101_0_log.err"
    body = _attempt(1) + "\n" + "x" * 100 + "\nlast\n"
    log.write_text(body)
    lines = joblog.last_attempt_lines(log, tail_bytes=20)
    assert lines[-1] == "last" and "".join(lines) in body.replace("\n", "") and _attempt(1) not in lines


def test_the_job_reads_back_the_error_line_it_writes(tmp_path, capsys):
    """reported_failure finds the ERROR line _log writes (one prefix, one home), of the last attempt only."""
    (tmp_path / "j").mkdir()
    job._log(joblog.attempt_message("e_a_s0_0123456789", 1, "node1", "101"))
    job._log(f"{job.ERROR_MARK}first attempt's reason")
    job._log(joblog.attempt_message("e_a_s0_0123456789", 2, "node1", "101"))
    job._log(f"{job.ERROR_MARK}second [x] reason{job.NOT_RECORDED}")
    (tmp_path / "j" / "101_0_log.err").write_text(capsys.readouterr().err)
    assert job.reported_failure([tmp_path / "none", tmp_path / "j"]) == "second [x] reason"
    assert re.match(joblog.LINE_START, joblog.log_line("m"))

"""provenance.json records the code each attempt of a run's job started with, and the claims report says where
it was not the launch's (from a hunt: 3 of 13 runs of a sweep waited in a queue while arctl's evaluation was
edited, ran the edit, and provenance and the claims report said one code for all 13)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from arctl.launch import job, provenance
from arctl.launch.provenance import (
    code_hash,
    code_version,
    read_provenance,
    record_attempt,
    record_resume,
    started_other_code,
    write_provenance,
)
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status
from arctl.report.claims_render import _run_version, other_code_warning

RUN_ID = "e_a_s0_0123456789"


def _run_dir(root: Path) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny", "run_id": RUN_ID,
              "trainer": {"total_steps": 2}, "wandb": {"mode": "disabled", "id": RUN_ID}}
    return prepare_run_dir(root / "runs" / RUN_ID, config)


def test_a_job_that_starts_after_an_edit_records_the_code_it_runs(tmp_path, monkeypatch):
    """The launch records the code on disk at submission; an edit while the job waits (arctl's code hash moves:
    its real value, then another one) is what the job imports when it starts, and what it records."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    # git's answer, the same at both asks (git is asked with a 3 s limit: under load, or in a copy without git, it
    # says None; CI's fresh-machine pass saw that at the job's ask and not at the launch's)
    monkeypatch.setattr(provenance, "git_state", lambda *a, **k: ("c" * 40, False))
    run_dir = _run_dir(tmp_path)
    launched = write_provenance(run_dir, code_version())  # what the launcher writes at submission
    assert launched["code_sha256"] == code_hash()
    monkeypatch.setattr(provenance, "code_hash", lambda root=None: "e" * 64)  # evaluate.py edited meanwhile
    assert job.RunJob()(str(run_dir)) == "completed"
    prov = read_provenance(run_dir)
    assert {k: prov[k] for k in launched} == launched  # the launch's record stays
    [attempt] = prov["attempts"]
    assert attempt["code_sha256"] == "e" * 64 and attempt["git_commit"] == launched["git_commit"]
    assert attempt["attempt"] == 1 and attempt["submission"] == 0 and attempt["at"] >= prov["created_at"]
    assert started_other_code(prov) == [(prov, attempt)]
    assert ", attempt 1 ran arctl " in _run_version(prov) and _run_version(prov).endswith(", code eeeeeeeeeeee)")


def test_every_attempt_is_recorded_in_process_and_a_full_disk_does_not_fail_the_job(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    run_dir = _run_dir(tmp_path)
    write_provenance(run_dir)
    assert job.run_job(run_dir)[0] == "completed"
    record_resume(run_dir)  # `arctl resume` (its launcher's record), then the job again under edited code
    monkeypatch.setattr(provenance, "code_hash", lambda root=None: "e" * 64)
    assert job.run_job(run_dir)[0] == "completed"
    prov = read_provenance(run_dir)
    assert [(a["attempt"], a["submission"]) for a in prov["attempts"]] == [(1, 0), (2, 1)]
    assert prov["attempts"][0]["code_sha256"] == prov["code_sha256"] == code_hash()
    assert prov["attempts"][1]["code_sha256"] == "e" * 64 != prov["resumed"][0]["code_sha256"]
    assert started_other_code(prov) == [(prov["resumed"][0], prov["attempts"][1])]

    def full(path, text, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(provenance, "atomic_write", full)
    capsys.readouterr()
    assert job.run_job(run_dir)[0] == "completed"  # the record is lost, never the training
    assert read_status(run_dir)["state"] == "completed"
    assert "the code this attempt runs was not recorded in provenance.json" in capsys.readouterr().err
    assert len(read_provenance(run_dir)["attempts"]) == 2


A = {"arctl_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": True, "code_sha256": "1" * 64}
EDITED = {**A, "code_sha256": "2" * 64}


def _prov(*attempts: dict, **more) -> dict:
    return {**A, "created_at": 1.0, **more,
            "attempts": [{**a, "attempt": i + 1, "submission": a.get("submission", 0), "at": 2.0 + i}
                         for i, a in enumerate(attempts)]}


def test_the_code_of_an_attempt_is_named_where_it_is_not_the_launch_s():
    assert _run_version(_prov(A, A)) == f"arctl 0.1.0 ({'a' * 12}-dirty, code {'1' * 12})"  # the same: said once
    assert _run_version(_prov(EDITED)) == (f"arctl 0.1.0 ({'a' * 12}-dirty, code {'1' * 12}), "
                                           f"attempt 1 ran arctl 0.1.0 ({'a' * 12}-dirty, code {'2' * 12})")
    # git that did not answer at the job's start: the same code by its hash, nothing said
    assert _run_version(_prov({**A, "git_commit": None, "git_dirty": None})) == _run_version(_prov(A))
    # a resume under the edited code, whose job ran it: the resume says it, its attempt does not again
    resumed = _prov(A, {**EDITED, "submission": 1}, resumed=[{**EDITED, "at": 2.5}])
    assert _run_version(resumed).count("code 2222") == 1 and "resumed by" in _run_version(resumed)
    assert started_other_code(resumed) == []


def test_the_claims_warning_counts_the_runs_that_ran_other_code_and_names_one():
    provs = {"r_grpo_s0": _prov(A), "r_grpo_s1": _prov(A, EDITED), "r_grpo_s2": _prov(EDITED), "r_old": {}}
    line = other_code_warning(provs)
    assert line.startswith("2 of 4 run(s) ran other code than they were launched with (their jobs started after an "
                           "edit of arctl), e.g. r_grpo_s1: ")
    assert f"code {'1' * 12}), started with arctl 0.1.0 ({'a' * 12}-dirty, code {'2' * 12})" in line
    assert "\n" not in line
    assert other_code_warning({"r_grpo_s0": _prov(A), "r_old": {}}) is None
    # a clean commit that does not say the code apart (no real edit leaves git clean): the hashes do
    clean = {**A, "git_dirty": False}
    moved = _prov({**clean, "code_sha256": "2" * 64}, **clean)
    assert (f"submitted with arctl 0.1.0 ({'a' * 12}, code {'1' * 12}), started with arctl 0.1.0 ({'a' * 12}, "
            f"code {'2' * 12})") in other_code_warning({"r": moved})
    assert _run_version(moved) == f"arctl 0.1.0 ({'a' * 12}), attempt 1 ran arctl 0.1.0 ({'a' * 12}, code {'2' * 12})"


def test_the_claims_report_warns_and_shows_the_code_each_run_ran(tmp_path):
    from wandb_workspace import _write_run, run_id

    from arctl.report.claims_render import build_claims_report

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-uniform", "ar-uniform")):
        for seed in (0, 1):
            _write_run(ws, experiment, arm, seed, list(range(21)))
            started = EDITED if (arm, seed) == ("grpo", 1) else A
            write_provenance(ws / "runs" / run_id(experiment, arm, seed), A)
            record_attempt(ws / "runs" / run_id(experiment, arm, seed), 1, started)
    report = build_claims_report(sweeps=["priors"], workdir=ws, out_dir=tmp_path / "out", progress=False, processes=1)
    edited = run_id("main-grpo", "grpo", 1)
    [line] = [w for w in report.warnings if "ran other code" in w]
    assert line.startswith("1 of 4 run(s) ran other code than they were launched with") and edited in line
    versions = {u["run_id"]: u["code_version"] for u in report.runs}
    assert versions[edited].endswith(f"attempt 1 ran arctl 0.1.0 ({'a' * 12}-dirty, code {'2' * 12})")
    assert sum("attempt 1 ran" in v for v in versions.values()) == 1
    assert line in (tmp_path / "out" / "claims.html").read_text().replace("&#x27;", "'")

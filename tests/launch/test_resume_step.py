"""After a stop, the job's last line and status.json's ``resume_step`` say the step the next attempt resumes from
(the backend's newest complete checkpoint), and the dry run of the stopped run says that step. From a hunt: after
a TERM the verl backend abandons the step in progress and writes no checkpoint, yet the job logged "preempted
(signals: SIGTERM); checkpoint written" with only an older checkpoint on disk, and `arctl resume --dry-run` said
"resumes from its last checkpoint" without which."""

from __future__ import annotations

import os
import signal
import sys
import types
from pathlib import Path

import pytest

from arctl.backends.base import BackendDefaults
from arctl.backends.tiny import TinyBackend
from arctl.backends.verl import VerlBackend
from arctl.backends.verl import checkpoints as verl_checkpoints
from arctl.backends.verl.rehearsal import save_checkpoint as verl_save
from arctl.launch import job, states
from arctl.launch.rundir import prepare_run_dir
from arctl.launch.status_file import read_status, write_status

STUBS = "arctl_test_resume_step_stubs"  # a module of stub backends, loaded by the registry as a plugin's


def _stop_here(stop_event) -> None:
    """A TERM to this process, as scancel sends it; returns once the job entry asked the backend to stop."""
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop_event.wait(10)


class VerlStops(VerlBackend):
    """A verl run that saved step 10 and is stopped by a TERM during step 15; then ``then(checkpoints)``: what its
    stop leaves (the real verl backend's ``resume_step`` reads it)."""

    def __init__(self, then, first: int | None = 10):
        self.then, self.first = then, first

    def train(self, config, run_dir, stop_event=None):
        ckpt = Path(run_dir) / "checkpoints"
        if self.first:
            verl_save(ckpt, self.first)
        _stop_here(stop_event)
        self.then(ckpt)
        return "preempted"


def _abandoned(ckpt: Path) -> None:
    """Step 15 abandoned while its save had begun: a folder without arctl's completion marker."""
    partial = verl_checkpoints.folder(ckpt, 15)
    (partial / "actor").mkdir(parents=True)
    (partial / "data.pt").write_text("half")


class VerlFails(VerlBackend):
    """A verl run that saved step 10 and fails during step 15's save (an exception: a full disk, a NaN)."""

    def train(self, config, run_dir, stop_event=None):
        ckpt = Path(run_dir) / "checkpoints"
        verl_save(ckpt, 10)
        _abandoned(ckpt)
        raise RuntimeError("step 15 failed")


class TinyStops(TinyBackend):
    """A tiny run stopped before it saved anything (as in its warm-up: WarmupInterrupted ends it preempted)."""

    def train(self, config, run_dir, stop_event=None):
        _stop_here(stop_event)
        return "preempted"


class SaysNothing(BackendDefaults):
    """A plugin backend that does not say where a resume starts."""

    name = "says-nothing"

    def train(self, config, run_dir, stop_event=None):
        _stop_here(stop_event)
        return "preempted"


class Completes(BackendDefaults):
    name = "completes"

    def train(self, config, run_dir, stop_event=None):
        return "completed"


@pytest.fixture
def stubs(monkeypatch):
    module = types.ModuleType(STUBS)
    module.ABANDONS = VerlStops(_abandoned)
    module.SAVES = VerlStops(lambda ckpt: verl_save(ckpt, 15))
    module.NOTHING = VerlStops(lambda ckpt: None, first=None)
    module.TINY_NOTHING = TinyStops()
    module.SAYS_NOTHING = SaysNothing()
    module.COMPLETES = Completes()
    module.FAILS = VerlFails()
    monkeypatch.setitem(sys.modules, STUBS, module)

    def use(name: str) -> None:
        monkeypatch.setenv("ARCTL_TEST_BACKEND", f"{STUBS}:{name}")

    return use


def _run_dir(tmp_path: Path) -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "verl", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": 30}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    return prepare_run_dir(tmp_path / "runs" / config["run_id"], config)


def _stop(run_dir: Path, capsys) -> tuple[str, dict]:
    """Run the job entry in this process until the backend's stop; its last log line and status.json."""
    result, received = job.run_job(run_dir)
    assert (result, received) == ("preempted", [signal.SIGTERM])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[arctl job ")]
    return lines[-1].split("] ", 1)[1], read_status(run_dir)


@pytest.mark.parametrize(("stub", "said", "step"), [
    ("ABANDONS", "resumes from step 10 (its newest complete checkpoint)", 10),
    ("SAVES", "resumes from step 15 (its newest complete checkpoint)", 15),
    ("NOTHING", "no checkpoint yet: the next attempt starts over", 0),
    ("TINY_NOTHING", "no checkpoint yet: the next attempt starts over", 0),
], ids=["verl-step-abandoned", "verl-stop-saved", "verl-none-yet", "tiny-none-yet"])
def test_the_preempted_line_and_status_say_the_step_the_next_attempt_resumes_from(tmp_path, stubs, capsys, stub,
                                                                                    said, step):
    stubs(stub)
    run_dir = _run_dir(tmp_path)
    line, status = _stop(run_dir, capsys)
    assert line == f"preempted (signals: SIGTERM); {said}"
    assert status["state"] == "preempted" and status["signal"] == "SIGTERM" and status["resume_step"] == step


def test_a_backend_that_cannot_say_makes_no_claim_of_a_checkpoint(tmp_path, stubs, capsys):
    stubs("SAYS_NOTHING")
    run_dir = _run_dir(tmp_path)
    line, status = _stop(run_dir, capsys)
    assert line == "preempted (signals: SIGTERM)"
    assert status["state"] == "preempted" and status["resume_step"] is None


def test_the_next_attempt_clears_the_step_its_run_was_to_resume_from(tmp_path, stubs, capsys):
    """While an attempt runs the recorded step is no longer where the run resumes."""
    stubs("ABANDONS")
    run_dir = _run_dir(tmp_path)
    assert _stop(run_dir, capsys)[1]["resume_step"] == 10
    stubs("COMPLETES")
    assert job.run_job(run_dir) == ("completed", [])
    assert read_status(run_dir)["resume_step"] is None


def test_a_failed_run_records_the_step_its_next_attempt_resumes_from_and_status_says_it(tmp_path, stubs, capsys):
    """From a hunt: `arctl status` of a failed verl run showed the step it reached (14) where its next attempt
    resumes from its newest complete checkpoint (10); the job now records that step as it fails, as on a stop."""
    import json

    from typer.testing import CliRunner

    from arctl.cli.main import app
    from arctl.launch.registry import Registry, RunRecord, new_claim_token
    from arctl.launch.workspace import Workspace

    stubs("FAILS")
    ws = Workspace(tmp_path / "ws")
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": "verl", "run_id": "e_a_s0_0123456789",
              "trainer": {"total_steps": 30}, "wandb": {"mode": "disabled", "id": "e_a_s0_0123456789"}}
    run_dir = prepare_run_dir(ws.run_dir(config["run_id"]), config)
    with pytest.raises(RuntimeError, match="step 15 failed"):
        job.run_job(run_dir)
    status = read_status(run_dir)
    assert (status["state"], status["resume_step"]) == ("failed", 10)
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=config["run_id"], experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(config["run_id"], state=states.FAILED, step=14, claim=None, before_claim=None, error="boom")
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh"])
    [row] = [line for line in res.output.splitlines() if line.startswith(config["run_id"]) and " e/a/s0" in line]
    assert "14 (resumes from 10)" in row, res.output
    [doc] = json.loads(CliRunner().invoke(app, ["status", "--workdir", str(ws.root), "--no-refresh", "--json"]).stdout)
    assert doc["resume_step"] == 10


def _preempted_plan(tmp_path, resume_step: int | None, abandoned_only: bool = False) -> str:
    """The dry run's reason for run lt/a/s0 (the `count` backend) once a stop ended it preempted, its status.json
    holding ``resume_step`` as the job entry writes it (none: an older arctl's job)."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved, launch, plan
    from arctl.launch.registry import Registry
    from arctl.launch.workspace import Workspace

    def items():
        return items_from_resolved(resolve_experiment("lt", [], arms=["a"]))

    ws = Workspace(tmp_path / "ws")
    launch(items(), ws, executor="debug")
    run_id = items()[0].run_id
    run_dir = ws.run_dir(run_id)
    if abandoned_only:  # only a save that never finished (verl's layout)
        for f in (run_dir / "checkpoints").iterdir():
            f.unlink()
        _abandoned(run_dir / "checkpoints")
    with Registry(ws.registry_path) as reg:
        reg.update(run_id, state=states.PREEMPTED)
    write_status(run_dir, state="preempted", signal="SIGTERM",
                 **({} if resume_step is None else {"resume_step": resume_step}))
    [planned] = plan(items(), ws)
    assert planned.action == "resume"
    return planned.reason


def test_the_dry_run_says_the_step_a_preempted_run_resumes_from(specs, tmp_path):
    assert _preempted_plan(tmp_path, 10) == "preempted: resumes from step 10"


def test_the_dry_run_of_a_run_without_a_complete_checkpoint_says_it_starts_over(specs, tmp_path):
    assert _preempted_plan(tmp_path, 0, abandoned_only=True) == ("preempted: starts from the beginning (it has no "
                                                                 "complete checkpoint)")


def test_the_dry_run_keeps_its_wording_where_the_job_recorded_no_step(specs, tmp_path):
    assert _preempted_plan(tmp_path, None) == "preempted: resumes from its last checkpoint"


def test_the_tiny_backend_resumes_from_its_newest_intact_checkpoint(tmp_path):
    """As the tiny trainer's resume finds it (:func:`arctl.backends.tiny.checkpoint.newest_intact`): a damaged newest
    checkpoint is skipped; none: it starts over; none intact: it cannot say (the next attempt fails, naming them)."""
    import torch

    from arctl.backends.base import get_backend
    from arctl.backends.tiny.checkpoint import save_checkpoint

    tiny, run_dir = get_backend("tiny"), tmp_path / "run"
    assert tiny.resume_step({}, run_dir) == 0
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    for step in (2, 4):
        newest = save_checkpoint(run_dir, step, model, optimizer, torch.Generator(), "wid", keep=3)
    assert tiny.resume_step({}, run_dir) == 4
    newest.write_bytes(newest.read_bytes()[:-1] + b"?")  # flipped bytes: its checksum no longer holds
    assert tiny.resume_step({}, run_dir) == 2
    for path in (run_dir / "checkpoints").glob("step_*.pt"):
        path.write_bytes(b"")
    assert tiny.resume_step({}, run_dir) is None


def test_the_verl_backend_resumes_from_its_newest_complete_checkpoint(tmp_path):
    """As the verl trainer's resume finds it (:func:`arctl.backends.verl.checkpoints.repair` points verl's tracker at
    it): a save that never finished or a damaged folder is skipped; none: it starts over."""
    from arctl.backends.base import get_backend

    verl, run_dir = get_backend("verl"), tmp_path / "run"
    ckpt = run_dir / "checkpoints"
    assert verl.resume_step({}, run_dir) == 0
    _abandoned(ckpt)  # global_step_15, never marked complete
    assert verl.resume_step({}, run_dir) == 0
    verl_save(ckpt, 10)
    assert verl.resume_step({}, run_dir) == 10
    verl_save(ckpt, 20)
    assert verl.resume_step({}, run_dir) == 20
    (verl_checkpoints.folder(ckpt, 20) / "data.pt").write_text("truncated")  # not the size it was saved with
    assert verl.resume_step({}, run_dir) == 10


def test_the_dry_run_of_a_killed_run_asks_its_backend_for_the_step(specs, tmp_path, monkeypatch):
    """From the hunt of jobs killed at any instant: a job killed with SIGKILL (an OOM kill, a lost node) writes no
    ``resume_step``, and the dry run said only "resumes from its last checkpoint". Its backend, which reads the run's
    checkpoints as its resume will, names the step now (the count backend here cannot say: the wording above)."""
    asked = []

    def backend_says(config, run_dir):
        asked.append(Path(run_dir).name)
        return 6

    monkeypatch.setattr(job, "resume_step", backend_says)
    assert _preempted_plan(tmp_path, None) == "preempted: resumes from step 6"
    assert asked and asked[0].startswith("lt_a_s0")

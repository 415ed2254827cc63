"""A launch interrupted (Ctrl-C; SIGTERM and SIGHUP, which the launcher takes as one) while sbatch runs: the job
SLURM accepted meanwhile is cancelled and the "interrupted" line names it, and a launch interrupted after its jobs
went out, while it records them, says which. From a hunt: sbatch was killed with its answer, the job id, so its
held job stayed queued for ever, and the launch said "nothing was submitted"; a terminal's Ctrl-C reached sbatch
too (the same process group); an interrupt while the jobs were recorded said only "interrupted"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from interrupts import group_killed_at_exit  # tests/support/interrupts.py

from arctl.cli.main import INTERRUPTED_EXIT
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace

ANSWER_DELAY_S = 1  # the stand-in sbatch answers this long after it signalled arctl (SLURM's round trip)


def _shims(tmp_path: Path, monkeypatch, signal_at: int, sig: str, group: bool, answers: bool = True) -> Path:
    """SLURM's programs, first on PATH; each call is logged in ``calls``. The ``signal_at``-th sbatch call, once
    SLURM took its job (logged), sends ``sig`` to arctl (its parent), or with ``group`` to arctl's whole process
    group as a terminal's Ctrl-C does (arctl leads its own session here), and answers ANSWER_DELAY_S later (job
    100 + the call's number), or with ``answers`` false hangs (its pid in ``sbatch.pid``)."""
    calls = tmp_path / "calls"
    target = "-$PPID" if group else "$PPID"
    then = f"sleep {ANSWER_DELAY_S}" if answers else f"echo $$ > {tmp_path}/sbatch.pid; exec sleep 120"
    slurm_shims.use(
        tmp_path / "bin", monkeypatch, srun="exit 0\n",
        sbatch=(f'n=$(($(cat {tmp_path}/n 2>/dev/null || echo 0) + 1)); echo $n > {tmp_path}/n\n'
                f'echo "sbatch $((100 + n))" >> {calls}\n'
                f'if [ "$n" -eq {signal_at} ]; then kill -{sig} {target}; {then}; fi\n'
                'echo "Submitted batch job $((100 + n))"\n'),
        scontrol=(f'echo "scontrol $*" >> {calls}\n'
                  "echo 'MaxArraySize            = 1001'\n"),
        scancel=f'echo "scancel $*" >> {calls}\n')
    return calls


def _sweep(ws: Path, *overrides: str) -> subprocess.Popen:
    """``arctl sweep lt3 --executor slurm`` in a session of its own, SIGINT and SIGHUP at their defaults (as a
    terminal starts it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "arctl.cli.main", "sweep", "lt3", *overrides, "--executor", "slurm", "--workdir",
         str(ws)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGHUP)])


def _finished(proc: subprocess.Popen) -> tuple[int, str]:
    with group_killed_at_exit(proc):
        _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("sig, group, said", [("INT", True, "interrupted: "), ("TERM", False, "interrupted: by SIGTERM; "),
                                              ("HUP", False, "interrupted: by SIGHUP; ")],
                         ids=["terminal-ctrl-c", "sigterm", "sighup"])
def test_the_job_sbatch_accepted_as_the_launch_was_interrupted_is_cancelled_and_named(specs, tmp_path, monkeypatch,
                                                                                      sig, group, said):
    calls = _shims(tmp_path, monkeypatch, signal_at=1, sig=sig, group=group)
    ws = tmp_path / "ws"
    code, err = _finished(_sweep(ws))
    assert code == INTERRUPTED_EXIT, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (f"{said}sbatch accepted job 101, then the launch was interrupted (job "
                                            "cancelled); nothing was submitted; its claims are undone"), err
    assert calls.read_text().splitlines() == ["scontrol show config", "sbatch 101", "scancel 101"]
    # the same command again submits the runs once more, and only once
    code, err = _finished(_sweep(ws))
    assert code == 0, err
    assert [c for c in calls.read_text().splitlines() if c.startswith(("sbatch", "scancel"))] == [
        "sbatch 101", "scancel 101", "sbatch 102"]
    with Registry(Workspace(ws).registry_path) as reg:
        assert sorted(r.job_id for r in reg.list()) == ["102_0", "102_1", "102_2"]
    assert not (tmp_path / "bin" / "unexpected.log").exists()


def test_a_later_array_interrupted_in_sbatch_is_cancelled_and_the_earlier_ones_said(specs, tmp_path, monkeypatch):
    """Two arrays (cluster.max_array_size=2): the first is out and recorded, the second, accepted as the launch
    was interrupted, is cancelled; the line says both."""
    calls = _shims(tmp_path, monkeypatch, signal_at=2, sig="INT", group=False)
    ws = tmp_path / "ws"
    code, err = _finished(_sweep(ws, "cluster.max_array_size=2"))
    assert code == INTERRUPTED_EXIT, err
    assert err.strip().splitlines()[-1] == (
        "interrupted: sbatch accepted job 102, then the launch was interrupted (job cancelled); submitted before it: "
        f"2 run(s) (job(s) 101_0, 101_1), recorded (`arctl status --workdir {ws}` shows them); the others are "
        "undone"), err
    assert [c for c in calls.read_text().splitlines() if c.startswith(("sbatch", "scancel"))] == [
        "sbatch 101", "sbatch 102", "scancel 102"]
    with Registry(Workspace(ws).registry_path) as reg:
        assert sorted(r.job_id for r in reg.list()) == ["101_0", "101_1"]


def test_an_sbatch_that_does_not_answer_after_the_interrupt_is_stopped_and_said(specs, tmp_path, monkeypatch):
    """sbatch hangs after the interrupt: the launch waits SBATCH_ANSWER_WAIT_S for it, then stops it and says that
    it may have queued a job (it cannot name one)."""
    import arctl.launch.launcher as launcher
    from arctl.compose import resolve_sweep

    monkeypatch.setattr(launcher, "SBATCH_ANSWER_WAIT_S", 0.5)
    calls = _shims(tmp_path, monkeypatch, signal_at=1, sig="TERM", group=False, answers=False)
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(KeyboardInterrupt) as info:  # a SIGTERM to this process, taken as Ctrl-C by the launch
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    assert info.value.__notes__ == [
        "sbatch had not answered 0.5 s after the interrupt and was stopped: it may have queued a held job all the "
        "same (`squeue -u $USER -t PD` shows it)", "nothing was submitted; its claims are undone"]
    assert calls.read_text().splitlines() == ["scontrol show config", "sbatch 101"]  # nothing to cancel by its id
    with pytest.raises(ProcessLookupError):  # stopped (and reaped), not left hanging
        os.kill(int((tmp_path / "sbatch.pid").read_text()), 0)


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_interrupt_while_the_submitted_jobs_are_recorded_says_which_went_out(specs, tmp_path, monkeypatch, where):
    """From the hunt: the record can wait up to SQLite's busy timeout; a Ctrl-C there said only "interrupted"
    while the jobs were out (recorded, or adopted by the next `arctl status`)."""
    from arctl.compose import resolve_sweep

    calls = _shims(tmp_path, monkeypatch, signal_at=0, sig="INT", group=False)
    real = Registry.update_claimed

    def interrupted(self, *args, **kwargs):
        if where == "before":
            raise KeyboardInterrupt
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Registry, "update_claimed", interrupted)
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(KeyboardInterrupt) as info:
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="slurm", members=["lt3"])
    assert info.value.__notes__ == [f"submitted before it: 3 run(s) (job(s) 101_0, 101_1, 101_2), recorded (`arctl "
                                    f"status --workdir {ws.root}` shows them)"]
    assert "scancel" not in calls.read_text()


def test_a_stop_right_after_sbatch_answered_still_gets_its_job_id_to_the_caller(tmp_path, monkeypatch):
    """From the review of the move to ``run_to_its_answer``: a Ctrl-C in the instant after sbatch's answer was read,
    before its job id went into the list, lost the id, and the held job stayed queued for ever. The answer is read
    from where ``run_to_its_answer`` put it as soon as it had it."""
    import arctl.launch.launcher as launcher
    from arctl.launch.launcher import sbatch_answers

    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch='echo "Submitted batch job 4242"\n', srun="exit 0\n")
    real = launcher.run_to_its_answer

    def answered_then_interrupted(command, wait_s, **kwargs):
        real(command, wait_s, **kwargs)
        raise KeyboardInterrupt  # as the answer is returned, before the caller has read it

    monkeypatch.setattr(launcher, "run_to_its_answer", answered_then_interrupted)
    from submitit.core import utils

    with sbatch_answers() as answers, pytest.raises(KeyboardInterrupt):
        utils.CommandFunction(["sbatch", "--parsable"])()
    assert answers == [("4242", "")]

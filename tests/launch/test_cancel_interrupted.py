"""`arctl cancel` itself interrupted (from the hunt "arctl itself interrupted").

- ``--now`` stops (SIGSTOP) the job's processes level by level before it kills them all: a Ctrl-C, SIGTERM or SIGHUP
  while it looked up the processes left the job's controller stopped for good (state T), its training went on, and
  its local slot stayed taken. Now those signals wait until all are killed, and a process the cancel stopped is never
  left stopped (:func:`arctl.launch.control._kill_local_job`).
- A plain cancel sent its TERM before it recorded the request in the registry: a Ctrl-C in between left the run
  PREEMPTED while its folder said cancelled. Now the request is recorded before the signal."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import arctl.launch.control as control
from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.refresh import refresh
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.status_file import CANCEL_FILE, mark_submitted, read_status, write_status
from arctl.launch.workspace import Workspace

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states in /proc")

RUN_ID = "e_a_s0_0123456789"

# a local job's processes: a controller, its task, the task's child (as submitit's controller, the training and a data
# loader); the controller writes the two pids below it into argv[1] once they are up
TREE = textwrap.dedent("""\
    import json, subprocess, sys, time
    inner = "import subprocess, sys, time; g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); print(g.pid, flush=True); time.sleep(120)"
    task = subprocess.Popen([sys.executable, "-c", inner], stdout=subprocess.PIPE, text=True)
    child = int(task.stdout.readline())
    open(sys.argv[1] + ".tmp", "w").write(json.dumps([task.pid, child]))
    import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(120)
""")

# kills the tree whose controller is argv[1] with _kill_local_job, a signal (argv[3]) sent to this process from the
# process table's look-up number argv[2], as a Ctrl-C or a `kill` lands while the cancel runs
KILLER = textwrap.dedent("""\
    import os, signal, sys
    import arctl.launch.control as control
    pid, at, sig = int(sys.argv[1]), int(sys.argv[2]), getattr(signal, sys.argv[3])
    if sig != signal.SIGINT:  # at its default action, as in a terminal (under nohup, say, the test's SIGHUP is ignored)
        signal.signal(sig, signal.SIG_DFL)
    real, calls = control._children, []
    def children():
        calls.append(1)
        if len(calls) == at:
            os.kill(os.getpid(), sig)
        return real()
    control._children = children
    try:
        print("killed", control._kill_local_job(pid, lambda: True), flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def _state(pid: int) -> str | None:
    """The state letter of process ``pid`` (R, S, T, Z, ...), None where it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return None


@pytest.fixture
def tree(tmp_path):
    """A local job's process tree: [controller, task, task's child] (the controller a child of this process)."""
    pids = tmp_path / "pids.json"
    controller = subprocess.Popen([sys.executable, "-c", TREE, str(pids)])
    all_pids = [controller.pid]
    try:
        deadline = time.monotonic() + 60
        while not pids.exists():
            assert controller.poll() is None and time.monotonic() < deadline, "the job's processes did not start"
            time.sleep(0.05)
        all_pids += json.loads(pids.read_text())
        yield controller, all_pids
    finally:
        for pid in reversed(all_pids):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        controller.wait(timeout=30)


def _gone(pid: int, controller: subprocess.Popen) -> bool:
    if pid == controller.pid:  # this process's child: reaped here
        try:
            controller.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + 5  # another's (reparented once the controller was killed): reaped there
    while _state(pid) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    return _state(pid) in (None, "Z")


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_kill_cut_short_by_an_error_leaves_no_process_of_the_job_stopped(tree, monkeypatch, at):
    """An interrupt the signals' hold cannot stop (raised inside the look-up at its ``at``-th call): the job is left
    running as it was, none of its processes stopped (before: the controller, and the task, stayed in state T)."""
    controller, pids = tree
    real, calls = control._children, []

    def children():
        calls.append(1)
        if len(calls) == at:
            raise KeyboardInterrupt
        return real()

    monkeypatch.setattr(control, "_children", children)
    with pytest.raises(KeyboardInterrupt):
        control._kill_local_job(controller.pid, lambda: True)
    time.sleep(0.2)  # a SIGCONT is delivered at once; a stopped process stays so
    now = {pid: _state(pid) for pid in pids}
    assert all(s not in (None, "T", "Z") for s in now.values()), now  # all alive, none stopped


@pytest.mark.parametrize(("sig", "at"), [("SIGINT", 1), ("SIGINT", 2), ("SIGINT", 3), ("SIGTERM", 2), ("SIGHUP", 1)])
def test_a_signal_while_the_job_is_stopped_waits_until_all_its_processes_are_killed(tree, sig, at):
    """A real Ctrl-C, SIGTERM or SIGHUP to the cancelling process while it looks up the job's processes: the kill is
    finished first, then the signal acts as it would have (Ctrl-C: KeyboardInterrupt; TERM, HUP: the process ends)."""
    controller, pids = tree
    killer = subprocess.run([sys.executable, "-c", KILLER, str(controller.pid), str(at), sig], capture_output=True,
                            text=True, timeout=120)
    if sig == "SIGINT":
        assert (killer.returncode, killer.stdout) == (130, "interrupted\n"), killer.stderr
    else:  # ended by the signal, once the kill was done (at its default action: no word)
        assert (killer.returncode, killer.stdout) == (-getattr(signal, sig), ""), killer.stderr
    assert {pid: _state(pid) for pid in pids if not _gone(pid, controller)} == {}  # none left, stopped or not


def test_a_kill_whose_controller_is_not_the_jobs_lets_it_go_on(tree):
    """The pid is another process's now (``still_it()`` False): nothing killed, nothing left stopped, as before."""
    controller, pids = tree
    assert control._kill_local_job(controller.pid, lambda: False) is False
    now = {pid: _state(pid) for pid in pids}
    assert all(s not in (None, "T", "Z") for s in now.values()), now


def _local_run(tmp_path: Path) -> tuple[Workspace, RunRecord]:
    """A local run whose job (process 4242, taken for alive) trains: status.json "running"."""
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    mark_submitted(ws.run_dir(RUN_ID))
    write_status(ws.run_dir(RUN_ID), state="running", executor="local", job_id="4242", host=socket.gethostname(),
                 started_at=time.time())
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="local", job_id="4242")
        return ws, reg.get(RUN_ID)


def test_a_cancel_interrupted_right_after_its_term_leaves_the_run_cancelled(tmp_path, monkeypatch):
    """A Ctrl-C right after the TERM (before: the registry had no request, and the job's stop checkpoint made the run
    PREEMPTED, while its folder said cancelled and `arctl repair` rebuilt it CANCELLED)."""
    ws, rec = _local_run(tmp_path)
    alive = [True]
    sent = []

    def kill(pid, sig):
        sent.append((pid, sig))
        raise KeyboardInterrupt  # right after the signal

    monkeypatch.setattr(control, "local_job_alive", lambda *a: alive[0])
    monkeypatch.setattr(control.os, "kill", kill)
    with Registry(ws.registry_path) as reg:
        with pytest.raises(KeyboardInterrupt):
            cancel_runs(reg, ws, [rec])
        assert sent == [(4242, signal.SIGTERM)]
        assert reg.get(RUN_ID).cancel_requested is not None  # recorded before the signal
        # the job heeds the TERM: it saves its checkpoint and ends, saying so as a job that a cancel asked writes
        assert (ws.run_dir(RUN_ID) / CANCEL_FILE).exists()
        write_status(ws.run_dir(RUN_ID), state="preempted", cancelled=True, ended_at=time.time(), resume_step=3)
        alive[0] = False
        monkeypatch.setattr("arctl.launch.refresh.local_job_alive", lambda *a: False)
        [after] = refresh(reg, ws, [reg.get(RUN_ID)])
    status = read_status(ws.run_dir(RUN_ID))
    assert (after.state, after.error) == (states.CANCELLED, None)
    assert (status["state"], status["cancelled"]) == ("preempted", True)  # the folder agrees: `arctl repair` reads it so


@pytest.mark.parametrize("gone", [ProcessLookupError, PermissionError])
def test_a_cancel_that_signalled_nothing_leaves_no_request_in_the_registry(tmp_path, monkeypatch, gone):
    """The request recorded before the signal is taken back where the signal reached no job of the run (it ended
    meanwhile; another user's process): the run is what its job reports, a later stop of it no cancel."""
    ws, rec = _local_run(tmp_path)

    def kill(pid, sig):
        raise gone(pid)

    monkeypatch.setattr(control, "local_job_alive", lambda *a: True)
    monkeypatch.setattr(control.os, "kill", kill)
    with Registry(ws.registry_path) as reg:
        ((_, said),) = cancel_runs(reg, ws, [rec])
        row = reg.get(RUN_ID)
    assert said.startswith(control.NOT_CANCELLED)
    assert (row.state, row.cancel_requested, row.phase) == (states.RUNNING, None, None)
    assert not (ws.run_dir(RUN_ID) / CANCEL_FILE).exists()


# cancels the SLURM run of the workspace argv[1] with cancel_runs; prints what its folder and registry keep
SLURM_CANCEL = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    import arctl.launch.control as control
    from arctl.launch.control import cancel_runs
    from arctl.launch.registry import Registry
    from arctl.launch.status_file import CANCEL_FILE
    from arctl.launch.workspace import Workspace
    ws = Workspace(Path(sys.argv[1]))
    control.SCANCEL_ANSWER_WAIT_S = float(sys.argv[3])
    with Registry(ws.registry_path) as reg:
        try:
            cancel_runs(reg, ws, [reg.get(sys.argv[2])])
            print("not interrupted")
        except KeyboardInterrupt as stop:
            print(json.dumps({"interrupted": True, "request_kept": (ws.run_dir(sys.argv[2]) / CANCEL_FILE).exists(),
                              "notes": getattr(stop, "__notes__", [])}))
""")


def _running_slurm_run(tmp_path: Path) -> Workspace:
    """A workspace whose run RUN_ID trains as SLURM job 77."""
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(RUN_ID).mkdir(parents=True)
    write_status(ws.run_dir(RUN_ID), state="running", executor="slurm", job_id="77", started_at=time.time())
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=RUN_ID, experiment="e", arm="a", seed=0)], new_claim_token())
        reg.update(RUN_ID, claim=None, before_claim=None, state=states.RUNNING, executor="slurm", job_id="77")
    return ws


@pytest.mark.parametrize("reaches", [True, False, None], ids=["scancel-got-through", "scancel-refused", "scancel-hangs"])
def test_a_ctrl_c_while_scancel_answers_keeps_the_request_where_it_got_through(tmp_path, reaches):
    """From a hunt: a Ctrl-C while scancel ran (a terminal's, to the whole group; or the cancel's own, which made
    subprocess.run kill scancel) withdrew the cancel's requests from the run folders, though SLURM may already have had
    scancel's request: the job stopped as preempted, not cancelled. scancel now runs in a session of its own and its
    answer is awaited: got through, the request stays; refused, it is withdrawn; no answer in time, scancel is stopped
    and the line says the jobs may be cancelled all the same."""
    import slurm_shims  # tests/support/slurm_shims.py

    ws = _running_slurm_run(tmp_path)
    calls = tmp_path / "calls"
    answer = {True: "exit 0", None: "sleep 60",
              False: 'echo "scancel: error: Kill job error on job id 77: Access/permission denied" >&2; exit 1'}[reaches]
    # the request reaches SLURM, then the user presses Ctrl-C (to the canceller's group), then the answer comes back
    # the canceller leads its own group (as a terminal starts it): -$PPID is its whole group, scancel too where it shares it
    bin_dir = slurm_shims.install(tmp_path / "bin", scancel=f'echo "scancel $*" >> {calls}\nkill -INT -$PPID\nsleep 1\n'
                                                            f'echo answered >> {calls}\n{answer}\n')
    wait_s = 3 if reaches is None else 30
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen([sys.executable, "-c", SLURM_CANCEL, str(ws.root), RUN_ID, str(wait_s)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out, err = proc.communicate(timeout=120)
    assert calls.read_text().splitlines() == ["scancel 77", "answered"], err  # scancel was left to answer
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["interrupted"] and doc["request_kept"] is bool(reaches), (doc, err)
    assert (doc["notes"] == ["scancel had not answered 3 s after the interrupt and was stopped: it may have cancelled "
                             "the jobs all the same (`arctl status` says)"]) is (reaches is None), doc


@pytest.mark.parametrize("reaches", [True, False], ids=["scancel-got-through", "scancel-refused"])
def test_a_ctrl_c_right_after_scancel_answered_reads_its_answer(tmp_path, monkeypatch, reaches):
    """A Ctrl-C in the instant between scancel's answer and the cancel acting on it (from the review of the change
    above: whether scancel had got through was a flag set after the answer, so such a stop withdrew the requests of
    jobs SLURM had cancelled). The answer itself now decides: got through, the request stays; refused, it goes."""
    import slurm_shims  # tests/support/slurm_shims.py

    ws = _running_slurm_run(tmp_path)
    answer = "exit 0" if reaches else \
        'echo "scancel: error: Kill job error on job id 77: Access/permission denied" >&2; exit 1'
    bin_dir = slurm_shims.install(tmp_path / "bin", scancel=f"{answer}\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    real = control.run_to_its_answer

    def answered_then_interrupted(command, wait_s, **kwargs):
        real(command, wait_s, **kwargs)
        raise KeyboardInterrupt  # as the answer is returned, before the caller has read it

    monkeypatch.setattr(control, "run_to_its_answer", answered_then_interrupted)
    with Registry(ws.registry_path) as reg, pytest.raises(KeyboardInterrupt):
        cancel_runs(reg, ws, [reg.get(RUN_ID)])
    assert (ws.run_dir(RUN_ID) / CANCEL_FILE).exists() is reaches

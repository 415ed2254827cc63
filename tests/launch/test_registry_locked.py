"""A process that holds the registry's write lock (a hung process, a `sqlite3` shell left in a transaction, a
database browser) no longer makes `arctl status`, `logs` and `cancel` hang silently.

From a hunt: every open ran a write transaction (CREATE TABLE IF NOT EXISTS), and a write waited SQLite's busy
timeout of 60 s per try for up to 100 tries: `arctl status` printed nothing for up to ~100 minutes. Now an open
whose file has its tables reads without the write lock, a write waits at most ``WRITE_WAIT_S`` in all (saying
once on stderr which process it waits for), and then fails in one line naming that process (exit 2).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from arctl.launch import registry
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace

HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE runs SET step=step WHERE 0")
print("held", flush=True)
sys.stdin.readline()  # holds the write lock until told (or until the test's end closes stdin)
conn.execute("COMMIT")
"""


def _workspace(tmp_path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="e_a_s0_aaaa", experiment="e", arm="a", seed=0)], new_claim_token())
    return ws


@pytest.fixture
def holder(tmp_path):
    """Start a process that holds the write lock of a registry path (as a `sqlite3` shell in a transaction
    does); it lets go when its stdin is closed."""
    procs = []

    def start(path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_an_open_reads_while_another_process_holds_the_write_lock(tmp_path, holder):
    """Run in a process of its own: before the fix, the open waited for the write lock (an hour and more)."""
    ws = _workspace(tmp_path)
    holder(ws.registry_path)
    read = ("import sys; from arctl.launch.registry import Registry\n"
            "with Registry(sys.argv[1]) as reg: print([r.run_id for r in reg.list()])")
    try:
        out = subprocess.run([sys.executable, "-c", read, str(ws.registry_path)], capture_output=True, text=True,
                             timeout=120)  # a guard only: it answers at once
    except subprocess.TimeoutExpired:
        pytest.fail("opening the registry waited for another process's write lock")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['e_a_s0_aaaa']"


def test_a_write_waits_at_most_the_cap_then_names_the_holder(tmp_path, holder, monkeypatch, capsys):
    ws = _workspace(tmp_path)
    proc = holder(ws.registry_path)
    monkeypatch.setattr(registry, "WRITE_WAIT_S", 0.5)
    monkeypatch.setattr(registry, "SAY_WAIT_AFTER_S", 0.0)
    monkeypatch.setattr(registry, "BUSY_STEP_S", 0.05)  # several tries: it says whom it waits for after the first
    with Registry(ws.registry_path) as reg:
        assert reg.get("e_a_s0_aaaa").step is None  # reading needs no write lock
        with pytest.raises(RegistryError) as err:
            reg.update("e_a_s0_aaaa", step=3)
    assert err.value.kind == "locked"
    message = str(err.value)
    assert message.startswith(f"{ws.registry_path}: process {proc.pid} (")
    assert "has held its write lock for more than 0.5 s" in message
    assert message.endswith("end its transaction or stop that process, then run the command again")
    assert "\n" not in message
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(f"waiting for process {proc.pid} (") and "python" in said[0]
    assert f"to release {ws.registry_path}" in said[0]


def test_a_write_waits_for_a_writer_that_lets_go(tmp_path, holder, monkeypatch):
    """Concurrent launches and jobs wait on each other's short writes: a wait over several tries (each of
    BUSY_STEP_S) ends in the write, as before."""
    ws = _workspace(tmp_path)
    proc = holder(ws.registry_path)
    monkeypatch.setattr(registry, "BUSY_STEP_S", 0.05)
    with Registry(ws.registry_path) as reg:
        done = threading.Event()

        def write():
            reg.update("e_a_s0_aaaa", step=7)
            done.set()

        worker = threading.Thread(target=write)
        worker.start()
        assert not done.wait(0.3)  # still waiting for the holder (several busy tries by now)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        worker.join(timeout=60)
        assert done.is_set()
        assert reg.get("e_a_s0_aaaa").step == 7


def test_an_older_registry_still_gets_its_new_columns(tmp_path):
    """Skipping the schema's write transaction where it is complete: a file lacking a column still gets it."""
    path = tmp_path / "registry.sqlite"
    Registry(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN warning")
    conn.close()
    with Registry(path) as reg:
        assert "warning" in {row[1] for row in reg._conn.execute("PRAGMA table_info(runs)")}


def test_status_and_cancel_say_which_process_holds_the_registry_and_exit_2(tmp_path, holder, monkeypatch):
    from arctl.cli.main import app

    ws = _workspace(tmp_path)
    with Registry(ws.registry_path) as reg:  # a run the status must write: it has no job to ask
        reg.update("e_a_s0_aaaa", state="RUNNING", executor="debug", job_id="debug", claim=None, before_claim=None)
    proc = holder(ws.registry_path)
    monkeypatch.setattr(registry, "WRITE_WAIT_S", 0.3)
    monkeypatch.setattr(registry, "SAY_WAIT_AFTER_S", 0.0)
    res = CliRunner().invoke(app, ["cancel", "e_a_s0_aaaa", "--workdir", str(ws.root)])
    assert res.exit_code == 2, res.output
    assert f"process {proc.pid} (" in res.output and "has held its write lock" in res.output
    assert "Traceback" not in res.output


def test_status_shows_what_it_found_unsaved_while_another_process_holds_the_write_lock(tmp_path, holder, monkeypatch):
    """From the review of the fix above: `arctl status`, a command that only reads, still waited the writes' whole
    minute and failed, its refresh having found a run to record. Its refresh waits READ_WRITE_WAIT_S, then shows what
    it found with the note that it is not saved; exit 0."""
    from arctl.cli.main import app
    from arctl.launch.status_file import write_status

    ws = _workspace(tmp_path)
    with Registry(ws.registry_path) as reg:  # a run the status must write: its job said it completed
        reg.update("e_a_s0_aaaa", state="RUNNING", executor="local", job_id="2222", claim=None, before_claim=None)
    ws.run_dir("e_a_s0_aaaa").mkdir(parents=True)
    write_status(ws.run_dir("e_a_s0_aaaa"), state="completed")
    holder(ws.registry_path)
    monkeypatch.setattr(registry, "READ_WRITE_WAIT_S", 0.3)
    monkeypatch.setattr(registry, "SAY_WAIT_AFTER_S", 0.0)
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "e_a_s0_aaaa" in said and "the states shown were found now and not saved" in said, res.output
    assert "has held its write lock" in said, res.output

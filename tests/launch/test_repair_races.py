"""`arctl repair` against the processes that write the registry at the same time, with real processes.

From a hunt: an `arctl run` started while `arctl repair` rebuilt the registry wrote its row into the old
file, which the repair then moved aside as ``registry.sqlite.damaged-<time>``: its job trained recorded
only there, and the next `arctl run` of it was refused. Two repairs in one second kept the second's old
registry over the first's (the only record of sweep memberships and queued job ids)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.launch import repair
from arctl.launch.executors import LaunchError
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace

# `arctl repair` that stops after writing the new registry, before the swap, until the file argv[2] is made
PAUSED_REPAIR = """
import pathlib, sys, time
from arctl.launch import repair
from arctl.launch.workspace import Workspace
real = repair._rebuild
def paused(*args):
    done = real(*args)
    print("rebuilt", flush=True)
    while not pathlib.Path(sys.argv[2]).exists():
        time.sleep(0.02)
    return done
repair._rebuild = paused
try:
    print("kept", repair.rebuild_registry(Workspace(pathlib.Path(sys.argv[1]))).kept, flush=True)
except repair.LaunchError as err:
    print("refused", err, flush=True)
"""

# what a launch does first: open the registry and claim its run (argv[2]); "hold" keeps it open (till killed)
WRITER = """
import pathlib, sys, time
from arctl.launch.registry import Registry, RunRecord, new_claim_token
print("opening", flush=True)
reg = Registry(pathlib.Path(sys.argv[1]))
reg.claim([RunRecord(run_id=sys.argv[2], experiment="e", arm=sys.argv[2], seed=0)], new_claim_token())
reg.add_members([("sweep-x", sys.argv[2])])
print("written", flush=True)
if sys.argv[3:] == ["hold"]:
    time.sleep(120)
reg.close()
"""


def _python(code: str, *args) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)


def _workspace(tmp_path: Path, rows=("r0",)) -> Workspace:
    """A workspace whose registry has ``rows`` (members of sweep-x) and whose runs/ has r0's folder."""
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id=r, experiment="e", arm=r, seed=0) for r in rows], new_claim_token())
        reg.add_members([("sweep-x", r) for r in rows])
    ws.run_dir("r0").mkdir(parents=True)
    (ws.run_dir("r0") / "config.yaml").write_text("experiment: e\narm: r0\nseed: 0\nrun_id: r0\n")
    return ws


def _rows(path: Path, tmp_path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The run ids and memberships of a registry file (a kept one: a copy with its log, opened elsewhere)."""
    where = tmp_path / f"read-{time.monotonic_ns()}"
    where.mkdir()
    shutil.copy(path, where / "registry.sqlite")
    if path.with_name(path.name + "-wal").exists():
        shutil.copy(path.with_name(path.name + "-wal"), where / "registry.sqlite-wal")
    with Registry(where / "registry.sqlite") as reg:
        members = reg._conn.execute("SELECT name, run_id FROM members ORDER BY name, run_id").fetchall()
        return [r.run_id for r in reg.list()], [tuple(m) for m in members]


def _kept(ws: Workspace) -> list[Path]:
    return sorted(p for p in ws.root.glob("registry.sqlite.damaged-*") if not p.name.endswith(("-wal", "-shm")))


def test_a_launch_during_a_repair_writes_its_row_into_the_new_registry(tmp_path):
    ws = _workspace(tmp_path)
    go = tmp_path / "go"
    fixer = _python(PAUSED_REPAIR, ws.root, go)
    writer = None
    try:
        assert fixer.stdout.readline().strip() == "rebuilt"
        writer = _python(WRITER, ws.registry_path, "r9")
        assert writer.stdout.readline().strip() == "opening"
        time.sleep(1.5)  # time enough to write (which the old code did, into the file the repair moves aside)
        go.touch()
        out, _ = fixer.communicate(timeout=60)
        assert out.startswith("kept "), out
        assert writer.communicate(timeout=90)[0].strip() == "written"  # it waited for the repair, then wrote
    finally:
        for proc in (fixer, writer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    runs, members = _rows(ws.registry_path, tmp_path)
    assert runs == ["r0", "r9"] and ("sweep-x", "r9") in members  # the launch's run is in the registry in use
    (kept,) = _kept(ws)
    assert _rows(kept, tmp_path)[0] == ["r0"]  # the old registry, as it was when the repair started


def test_a_second_repair_is_refused_while_one_runs_and_the_old_registry_is_kept(tmp_path, monkeypatch):
    ws = _workspace(tmp_path, rows=("r0", "r1"))
    go = tmp_path / "go"
    fixer = _python(PAUSED_REPAIR, ws.root, go)
    try:
        assert fixer.stdout.readline().strip() == "rebuilt"
        monkeypatch.setattr(repair, "REPAIR_WAIT_S", 0.5, raising=False)
        with pytest.raises(LaunchError, match=r"is open in another arctl process \(.*another `arctl repair`\?\).* "
                                              r"then run `arctl repair` again"):
            repair.rebuild_registry(ws)
        assert not _kept(ws)  # the second moved nothing aside
        go.touch()
        out, _ = fixer.communicate(timeout=60)
    finally:
        if fixer.poll() is None:
            fixer.kill()
            fixer.wait()
    assert out.startswith("kept "), out
    (kept,) = _kept(ws)
    assert _rows(kept, tmp_path) == (["r0", "r1"], [("sweep-x", "r0"), ("sweep-x", "r1")])


def test_repairs_in_one_second_keep_every_old_registry_and_its_log(tmp_path, monkeypatch):
    """Each old registry holds the rows of a killed launch in its write-ahead log (-wal), which goes aside with it."""
    ws = Workspace(tmp_path / "ws")
    ws.run_dir("r0").mkdir(parents=True)
    (ws.run_dir("r0") / "config.yaml").write_text("experiment: e\narm: r0\nseed: 0\nrun_id: r0\n")
    monkeypatch.setattr(time, "strftime", lambda *args: "20260101-000000")  # both in one second
    for run in ("old1", "old2"):
        holder = _python(WRITER, ws.registry_path, run, "hold")
        try:
            assert holder.stdout.readline().strip() == "opening"
            assert holder.stdout.readline().strip() == "written"
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        assert ws.registry_path.with_name("registry.sqlite-wal").stat().st_size > 0
        repair.rebuild_registry(ws)
    first, second = _kept(ws)
    assert (first.name, second.name) == ("registry.sqlite.damaged-20260101-000000",
                                         "registry.sqlite.damaged-20260101-000000-2")
    assert _rows(first, tmp_path) == (["old1"], [("sweep-x", "old1")])
    assert _rows(second, tmp_path) == (["old2", "r0"], [("sweep-x", "old2")])
    assert _rows(ws.registry_path, tmp_path)[0] == ["r0"]


def test_a_write_without_the_lock_during_a_repair_leaves_the_old_registry_in_place(tmp_path, monkeypatch):
    """An arctl of before the lock (or a file system without flock) writes while the repair rebuilds: the
    repair refuses in one line and leaves the old registry, with that write, where it was."""
    ws = _workspace(tmp_path)
    real = repair._rebuild

    def written_meanwhile(*args):
        done = real(*args)
        with sqlite3.connect(ws.registry_path) as conn:
            conn.execute("INSERT INTO members(name, run_id) VALUES ('sweep-y', 'r0')")
        conn.close()
        return done

    monkeypatch.setattr(repair, "_rebuild", written_meanwhile)
    with pytest.raises(LaunchError, match=r"^another arctl process wrote .*registry.sqlite during the repair \(the old "
                                          r"registry is left as it was\): run `arctl repair` again$"):
        repair.rebuild_registry(ws)
    assert sorted(p.name for p in ws.root.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "registry.sqlite", "runs"]
    assert ("sweep-y", "r0") in _rows(ws.registry_path, tmp_path)[1]


def test_an_open_during_a_repair_waits_for_it_then_gives_up_in_one_line(tmp_path, monkeypatch):
    from arctl.launch import registry

    ws = _workspace(tmp_path)
    held = registry.lock_folder(ws.root, exclusive=True, wait_s=0)  # as a repair holds it
    assert held is not None
    try:
        monkeypatch.setattr(registry, "LOCK_WAIT_S", 0.3)
        with pytest.raises(RegistryError, match=r"registry.sqlite: `arctl repair` has been rebuilding it for more "
                                                r"than a minute; run the command again when it has ended$") as err:
            Registry(ws.registry_path)
        assert err.value.kind == "locked"
        with Registry(ws.registry_path, readonly=True) as reader:  # what only reads does not wait
            assert [r.run_id for r in reader.list()] == ["r0"]
    finally:
        os.close(held)
    with Registry(ws.registry_path) as reg:
        assert [r.run_id for r in reg.list()] == ["r0"]


def test_a_registry_that_is_not_sqlite_is_still_repaired(tmp_path):
    """The repair's lock is the workspace folder's, not the old file's SQLite lock: a file SQLite cannot open
    at all is what a repair is for."""
    ws = _workspace(tmp_path)
    ws.registry_path.write_bytes(b"not a database " * 500)
    for suffix in ("-wal", "-shm"):
        ws.registry_path.with_name(ws.registry_path.name + suffix).unlink(missing_ok=True)
    done = repair.rebuild_registry(ws)
    assert Path(done.kept).read_bytes() == b"not a database " * 500
    assert _rows(ws.registry_path, tmp_path)[0] == ["r0"]


def test_without_hard_links_an_old_registry_is_copied_but_never_over_a_kept_one(tmp_path, monkeypatch):
    """A file system without hard links (the link fails EPERM): the old registry is copied aside, and two
    repairs in one second still keep both (the copy had been made over the first's)."""
    import errno

    ws = _workspace(tmp_path, rows=("a0", "a1"))

    def no_links(*args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(time, "strftime", lambda *args: "20260101-000000")
    monkeypatch.setattr(os, "link", no_links)
    repair.rebuild_registry(ws)
    repair.rebuild_registry(ws)
    first, second = _kept(ws)
    assert _rows(first, tmp_path) == (["a0", "a1"], [("sweep-x", "a0"), ("sweep-x", "a1")])
    assert _rows(second, tmp_path)[0] == ["r0"]

"""A writer of :func:`arctl.config.files.replacing` killed mid-write (kill -9: no cleanup runs) leaves its hidden
temporary file; the next write of the same file removes it, and never the temporary file of a writer still
alive. From a hunt: `arctl data prepare` killed mid-write left ``.train.parquet.<random>.tmp`` (3.8 MB), which
every later run kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arctl.config import files

# a writer that creates its temporary file, says so, then writes for ever (until killed)
WRITER = """
import sys, time
from arctl.config.files import replacing
with replacing(sys.argv[1]) as tmp:
    tmp.write_bytes(b"half")
    print("writing", flush=True)
    time.sleep(600)
"""


def _writer(target: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    return proc


def _temps(folder: Path, target: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(f".{target.name}.") and p.name.endswith(".tmp"))


@pytest.fixture(autouse=True)
def fresh_process_memory(monkeypatch):
    """Each test as a new process: no target looked beside yet."""
    monkeypatch.setattr(files, "_cleaned", set(), raising=False)
    monkeypatch.setattr(files, "_listed", {}, raising=False)


def test_the_next_write_removes_a_killed_writers_temp_file_and_keeps_a_live_ones(tmp_path):
    target = tmp_path / "train.parquet"
    killed, alive = _writer(target), None
    try:
        left = _temps(tmp_path, target)
        assert len(left) == 1
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
        assert _temps(tmp_path, target) == left  # what a kill leaves: nothing cleans it up at the time
        alive = _writer(target)  # a concurrent writer of the same file, still writing
        live = [p for p in _temps(tmp_path, target) if p not in left]
        assert len(live) == 1
        files.atomic_write(target, b"whole")
        assert target.read_bytes() == b"whole"
        assert _temps(tmp_path, target) == live  # the dead writer's is gone, the live one's kept
    finally:
        for proc in (killed, alive):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)


def test_only_this_targets_temp_files_of_this_host_are_removed(tmp_path):
    target = tmp_path / "a"
    dead = _dead_pid()
    (tmp_path / "elsewhere").mkdir()
    with files.replacing(tmp_path / "elsewhere" / "probe") as probe:  # ".probe.<pid>-<place>.<random>.tmp": this host's place
        here = probe.name.split(".")[2].partition("-")[2]
        probe.write_text("")
    assert len(here) == 8
    other_place = "0" * 8 if here != "0" * 8 else "1" * 8
    mine_dead = tmp_path / f".a.{dead}-{here}.abcd1234.tmp"  # a writer of this host that died
    elsewhere = tmp_path / f".a.{dead}-{other_place}.abcd1234.tmp"  # another host's pid: cannot be asked here
    other_target = tmp_path / f".a.1.{dead}-{here}.abcd1234.tmp"  # the temporary file of "a.1", not of "a"
    old_style = tmp_path / ".a.abcd_123.tmp"  # named before the pid was in the name, untouched for two days
    fresh_old_style = tmp_path / ".a.efgh_456.tmp"  # ... and one still being written
    for p in (mine_dead, elsewhere, other_target, old_style, fresh_old_style):
        p.write_bytes(b"x")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_style, (two_days_ago, two_days_ago))
    files.atomic_write(target, "new")
    assert not mine_dead.exists() and not old_style.exists()
    assert elsewhere.exists() and other_target.exists() and fresh_old_style.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    return proc.pid


def test_a_temp_file_whose_pid_no_process_can_have_is_left_and_the_write_succeeds(tmp_path):
    """From a hunt: ``os.kill`` raised OverflowError for a pid too large for a pid_t, after the write had
    succeeded (status.json written, then the command failed with a traceback)."""
    target = tmp_path / "status.json"
    (tmp_path / "elsewhere").mkdir()
    with files.replacing(tmp_path / "elsewhere" / "probe") as probe:  # this host's place, from a real name
        here = probe.name.split(".")[2].partition("-")[2]
        probe.write_text("")
    huge = tmp_path / f".status.json.99999999999999999999-{here}.abcdefgh.tmp"
    huge.write_bytes(b"x")
    files.atomic_write(target, "new")  # raised OverflowError
    assert target.read_text() == "new"
    assert huge.exists()  # no writer of this place: left, as another host's

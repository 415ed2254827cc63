"""An exceeded disk quota is not a full disk (found by a read-only hunt): a job that hit EDQUOT failed with "the
disk is full at ... (Disk quota exceeded, 69083.0 MiB free there)", which contradicted itself."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from arctl.launch.job import failure_line


def _failed_by(code: int, where: Path) -> str:
    err = RuntimeError("saving the checkpoint failed")
    err.__cause__ = OSError(code, os.strerror(code), str(where))
    return failure_line(err, Path("/ws/runs/r1"))


def test_an_exceeded_quota_says_so_without_the_disks_free_space(tmp_path):
    line = _failed_by(errno.EDQUOT, tmp_path / "ckpt" / "step_10.pt")  # the disk itself has room
    assert line.startswith(f"your disk quota is exceeded at {tmp_path / 'ckpt' / 'step_10.pt'} ("), line
    assert "`quota`" in line and "`arctl resume r1 --workdir /ws`" in line, line
    assert "full" not in line and "MiB free" not in line, line


def test_a_full_disk_still_says_how_much_is_free_there(tmp_path):
    line = _failed_by(errno.ENOSPC, tmp_path / "x")
    assert line.startswith(f"the disk is full at {tmp_path / 'x'} (") and "MiB free there" in line, line
    assert "quota" not in line and "`arctl resume r1 --workdir /ws`" in line, line


def test_a_quota_said_only_in_an_errors_text_or_by_sqlite_is_named_as_one(tmp_path, monkeypatch):
    """The tiny warm-up's "SafetensorError: ... Disk quota exceeded" (no path) is an exceeded quota at the cache,
    as "No space left on device" is a full disk there; SQLite's "database or disk is full" with gigabytes free
    asks about the quota; a command's own EDQUOT hint names the quota, not the free space."""
    import errno

    from arctl.backends.tiny.trainer import full_disk
    from arctl.cli.common import place_problem
    from arctl.launch import registry

    err = full_disk(RuntimeError("SafetensorError: Error while serializing: Disk quota exceeded (os error 122)"),
                    tmp_path)
    assert err is not None and err.errno == errno.EDQUOT and err.filename == str(tmp_path)
    assert full_disk(RuntimeError("bad"), tmp_path) is None
    monkeypatch.setattr(registry, "_roomy", lambda path: True)
    said = str(registry._sqlite_problem(tmp_path / "registry.sqlite", "database or disk is full"))
    assert "an exceeded disk quota? see `quota`" in said, said
    monkeypatch.setattr(registry, "_roomy", lambda path: False)
    assert "see `quota`" not in str(registry._sqlite_problem(tmp_path / "registry.sqlite", "database or disk is full"))
    hint = place_problem(OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "x")))
    assert "quota" in hint.split("(", 1)[1] and "free some space and" not in hint, hint

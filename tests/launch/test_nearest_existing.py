"""The nearest existing folder of a path not made yet: one helper (arctl.config.files.nearest_existing) that the
workspace's layout check, the write probe, the checkpoint-room note and the job's disk-full line all ask."""

from __future__ import annotations

import shutil
from pathlib import Path

from arctl.config.files import folder_problem, nearest_existing
from arctl.launch import disk_room, job
from arctl.launch.workspace import Workspace


def test_a_missing_path_is_asked_at_its_nearest_existing_ancestor(tmp_path):
    assert nearest_existing(tmp_path) == tmp_path
    assert nearest_existing(tmp_path / "a" / "b" / "c") == tmp_path
    (tmp_path / "f").write_text("x")
    assert nearest_existing(tmp_path / "f" / "below") == tmp_path / "f"  # a file stops the walk: it exists
    assert nearest_existing(Path("/no-such-folder-here") / "x") == Path("/")


def test_every_user_reads_the_same_ancestor(tmp_path):
    (tmp_path / "f").write_text("x")
    assert folder_problem(tmp_path / "f" / "ws") == f"{tmp_path / 'f'} is a file, not a folder"
    assert folder_problem(tmp_path / "new" / "ws") is None
    assert "is a file, not a folder" in Workspace(tmp_path / "f" / "ws").layout_problem()
    assert disk_room.free_folder(Workspace(tmp_path / "new" / "ws")) == tmp_path
    free = shutil.disk_usage(tmp_path).free / 2**20
    line = job._free_there(str(tmp_path / "new" / "ws" / "runs" / "x"))
    assert line.startswith(", ") and line.endswith(" MiB free there")
    assert abs(float(line[2:].split()[0]) - free) < 64  # the same disk, read a moment apart
    assert job._free_there("") == ""

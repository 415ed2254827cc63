"""Reports of a workspace that is not all readable or writable (found by a read-only hunt): one run folder made
by another user with umask 077 aborted every report and export of the workspace ("error: .../runs/<id>/wandb:
Permission denied"), and a read-only workspace whose user cache could not be written either failed with
"error: /nonexistent: Permission denied"."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from typer.testing import CliRunner
from unreadable import forbid  # tests/support/unreadable.py

from arctl.cli.main import app
from arctl.track.runs import RunReadWarning

runner = CliRunner()


def _copy(workspace: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(workspace, copy, symlinks=True)
    return copy


def _run_of(root: Path, experiment: str) -> str:
    """A run id of ``experiment`` in workspace ``root`` (its config.yaml says)."""
    for cfg in sorted(root.glob("runs/*/config.yaml")):
        if f"experiment: {experiment}\n" in cfg.read_text():
            return cfg.parent.name
    raise AssertionError(f"no run of {experiment} in {root}")



def test_an_unreadable_run_folder_is_left_out_of_reports_and_exports_with_a_warning(workspace, tmp_path,
                                                                                     monkeypatch):
    copy = _copy(workspace, tmp_path)
    bad = _run_of(copy, "main-grpo")
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(copy), "--out",
                              str(tmp_path / "before"), "--json"])
    assert res.exit_code == 0, res.output
    before = {r["run_id"] for r in json.loads(res.stdout)["runs"]}
    assert bad in before

    forbid(monkeypatch, copy / "runs" / bad)
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(copy), "--out",
                              str(tmp_path / "after")])
    assert res.exit_code == 0, res.output  # was: error: .../runs/<id>/wandb: Permission denied
    said = " ".join(res.output.split())
    assert f"warning: run {bad}: its folder" in said and "Permission denied" in said and "left out" in said, said
    assert (tmp_path / "after" / "main_training.svg").is_file()
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(copy), "--out",
                              str(tmp_path / "after"), "--json"])
    assert res.exit_code == 0, res.output
    assert {r["run_id"] for r in json.loads(res.stdout)["runs"]} == before - {bad}

    import warnings

    with warnings.catch_warnings():  # another experiment's export too: the folder is a skipped run, not a raw
        warnings.simplefilter("error", RunReadWarning)  # Python warning with its source line
        res = runner.invoke(app, ["export", "--experiment", "main-ar-base", "--workdir", str(copy), "--out",
                                  str(tmp_path / "export"), "--unfinished", "--json"])
    assert res.exit_code == 0, res.output
    skipped = {s["run_id"]: s["why"] for s in json.loads(res.stdout)["skipped"]}
    assert skipped[bad].startswith("its folder") and "Permission denied" in skipped[bad], skipped
    exported = json.loads((tmp_path / "export" / "export.json").read_text())["runs"]
    assert exported and bad not in exported


def test_a_read_only_workspace_with_an_unwritable_user_cache_reads_into_a_temporary_one(workspace, tmp_path,
                                                                                         monkeypatch):
    """Neither the workspace's cache (here its .arctl-cache is a file: nothing can be made in it, not even by
    root) nor ARCTL_CACHE (under a file) can be written: the report is built all the same, from a temporary cache
    removed after it, with one line naming ARCTL_CACHE."""
    copy = _copy(workspace, tmp_path)
    shutil.rmtree(copy / ".arctl-cache", ignore_errors=True)
    (copy / ".arctl-cache").write_text("not a folder")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "file" / "cache"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(copy), "--out",
                              str(tmp_path / "out")])
    assert res.exit_code == 0, res.output  # was: error: .../file/cache/runs: Not a directory
    said = " ".join(res.output.split())
    assert "note: neither the workspace's cache" in said and "set ARCTL_CACHE" in said, said
    assert (tmp_path / "out" / "main_training.svg").is_file()
    assert not list(scratch.glob("arctl-runs-*"))  # the temporary cache went with the read


def test_a_run_folder_the_registry_lacks_and_this_user_cannot_read_is_unregistered_not_a_traceback(tmp_path,
                                                                                                   monkeypatch):
    """`arctl status` asks which folders the registry lacks are runs (Workspace.unregistered): a folder another
    member made unreadable raised PermissionError there (a traceback, exit 1). It is counted as a run (not a
    new one a launch may train into), and the readable ones as before."""
    from pathlib import Path

    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    for run_id in ("theirs", "prepared"):
        ws.run_dir(run_id).mkdir(parents=True)
        (ws.run_dir(run_id) / "config.yaml").write_text("experiment: e\n")
    real = Path.is_file

    def is_file(self):
        if "theirs" in self.parts:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    assert ws.unregistered(["theirs", "prepared"]) == ["theirs"]

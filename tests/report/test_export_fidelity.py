"""`arctl export` read as the workspace reads: a ``wandb/`` linked to other storage, a run without
config.yaml, a state that changed with the same files, a live run's growing files, a full disk while
listing a run, and user text with control characters in what the command prints (from a hunt)."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wandb_workspace import NO_CONFIG_YAML, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app

runner = CliRunner()


@pytest.fixture
def ws(completed_ws) -> Path:
    """A copy of the shared workspace of real W&B runs, each completed (tests/report/conftest.py)."""
    return completed_ws


def _export(*args: str):
    return runner.invoke(app, ["export", *args])


def _index(out: Path) -> dict:
    return json.loads((out / "export.json").read_text())["runs"]


def _final_table(workdir: Path, dest: Path, experiment: str) -> str:
    res = runner.invoke(app, ["report", "--table", "final", "--workdir", str(workdir), "--out", str(dest),
                              "--experiment", experiment])
    assert res.exit_code == 0, res.output
    return (dest / "final.csv").read_text()


def test_a_run_whose_wandb_folder_links_to_other_storage_is_exported_with_its_files(ws, tmp_path):
    rid = run_id("main-ar-uniform", "ar-uniform", 0)
    run = ws / "runs" / rid
    scratch = tmp_path / "scratch" / f"{rid}-wandb"
    scratch.parent.mkdir()
    shutil.move(run / "wandb", scratch)
    (run / "wandb").symlink_to(scratch)
    (scratch / "loop").symlink_to(scratch / "loop")  # a link loop and a link to the run's own folder: not followed
    (scratch / "self").symlink_to(run)
    wandb_files = sorted(str(p.relative_to(run)) for p in (run / "wandb").rglob("run-*.wandb"))
    assert wandb_files

    out = tmp_path / "out"
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-ar-uniform", "--json")
    assert res.exit_code == 0, res.output
    files = _index(out)[rid]["files"]
    assert sorted(f for f in files if f.endswith(".wandb")) == wandb_files
    for rel in wandb_files:  # the target's bytes, in a real folder of the export
        assert (out / "runs" / rid / rel).read_bytes() == (run / rel).read_bytes()
        assert not (out / "runs" / rid / "wandb").is_symlink()
    assert _final_table(out, tmp_path / "rep-out", "main-ar-uniform") == \
        _final_table(ws, tmp_path / "rep-ws", "main-ar-uniform")


def test_a_run_without_config_yaml_is_exported_under_the_experiment_reports_read(ws, tmp_path):
    rid = run_id(*NO_CONFIG_YAML)
    assert not (ws / "runs" / rid / "config.yaml").exists()
    out = tmp_path / "out"
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", NO_CONFIG_YAML[0], "--json")
    assert res.exit_code == 0, res.output
    assert rid in {r["run_id"] for r in json.loads(res.output)["runs"]}
    entry = _index(out)[rid]
    assert (entry["experiment"], entry["arm"], entry["seed"]) == NO_CONFIG_YAML
    # without --experiment too: the index records the experiment and arm reports read
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "all"), "--json")
    assert res.exit_code == 0, res.output
    entry = _index(tmp_path / "all")[rid]
    assert (entry["experiment"], entry["arm"], entry["seed"]) == NO_CONFIG_YAML
    assert not (ws / ".arctl-cache").exists()  # an export writes nothing in the workspace


def test_a_run_exported_running_and_completed_since_with_the_same_files_is_recorded_completed(ws, tmp_path):
    rid = run_id("main-grpo", "grpo", 0)
    status = ws / "runs" / rid / "status.json"
    status.write_text(json.dumps({"state": "running"}))  # W&B files final, the job's word not yet written
    out = tmp_path / "out"
    assert _export("--workdir", str(ws), "--out", str(out), "--unfinished", "--experiment", "main-grpo").exit_code == 0
    assert _index(out)[rid]["state"] == "running"
    placed = {p: p.stat().st_mtime_ns for p in (out / "runs" / rid).rglob("*") if p.is_file()}

    status.write_text(json.dumps({"state": "completed"}))
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--json")
    assert res.exit_code == 0, res.output
    assert {r["run_id"]: r["action"] for r in json.loads(res.output)["runs"]}[rid] == "updated"
    assert _index(out)[rid]["state"] == "completed"
    assert {p: p.stat().st_mtime_ns for p in placed} == placed  # the same files: not copied again
    again = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--json")
    assert {r["run_id"]: r["action"] for r in json.loads(again.output)["runs"]}[rid] == "unchanged"
    assert _final_table(out, tmp_path / "rep-out", "main-grpo") == _final_table(ws, tmp_path / "rep-ws", "main-grpo")


def test_the_index_describes_the_bytes_copied_from_a_live_run(ws, tmp_path, monkeypatch):
    rid = run_id("main-grpo", "grpo", 1)
    (ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    real_copy = shutil.copyfile

    def growing(src, dst, *args, **kwargs):  # W&B appends while the export runs
        if str(src).endswith(".wandb") and rid in str(src):
            with open(src, "ab") as f:
                f.write(b"0123456789abcdef" * 64)
        return real_copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", growing)
    out = tmp_path / "out"
    res = _export("--workdir", str(ws), "--out", str(out), "--unfinished", "--experiment", "main-grpo")
    assert res.exit_code == 0, res.output
    entry = _index(out)[rid]
    folder = out / "runs" / rid
    assert {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest() for rel in entry["files"]} == entry["files"]
    assert entry["bytes"] == sum((folder / rel).stat().st_size for rel in entry["files"])


def _full_disk_at(monkeypatch, calls: set[int]) -> None:
    """The export's index write fails with ENOSPC at these (1-based) calls."""
    import arctl.report.export as export

    real, count = export.atomic_write, [0]

    def write(path, data, *args, **kwargs):
        count[0] += 1
        if count[0] in calls:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, *args, **kwargs)

    monkeypatch.setattr(export, "atomic_write", write)


def test_a_full_disk_while_listing_a_run_leaves_runs_holding_what_the_index_lists(ws, tmp_path, monkeypatch):
    from arctl.report.export import export_runs

    out = tmp_path / "out"
    _full_disk_at(monkeypatch, {3})  # 1: the index first, 2: after the first run, 3: after the second
    with pytest.raises(OSError):
        export_runs(ws, out, ["main-grpo"])
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(_index(out)) and len(_index(out)) == 1
    monkeypatch.undo()
    export_runs(ws, out, ["main-grpo"])  # the same command completes it
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(_index(out)) and len(_index(out)) == 2


def test_a_full_disk_while_listing_a_replacing_run_brings_the_one_it_replaced_back(ws, tmp_path, monkeypatch):
    from arctl.report.export import export_runs

    out = tmp_path / "out"
    export_runs(ws, out, ["main-ar-base"])
    before, rid = _index(out), run_id("main-ar-base", "ar-base", 0)
    held = {str(p.relative_to(out / "runs" / rid)): p.read_bytes() for p in (out / "runs" / rid).rglob("*") if p.is_file()}
    with open(next((ws / "runs" / rid).rglob("run-*.wandb")), "ab") as f:
        f.write(b"another attempt")
    _full_disk_at(monkeypatch, {3})  # 1: the index first, 2: the run unlisted, 3: the replacement listed
    with pytest.raises(OSError):
        export_runs(ws, out, ["main-ar-base"], force=True)
    assert _index(out) == before
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(before)
    now = {str(p.relative_to(out / "runs" / rid)): p.read_bytes() for p in (out / "runs" / rid).rglob("*") if p.is_file()}
    assert now == held


def test_control_characters_of_out_and_run_folders_are_printed_escaped(ws, tmp_path):
    rid = run_id("main-grpo", "grpo", 1)
    (ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    (ws / "runs" / rid).rename(ws / "runs" / "main-grpo\x1b[2J\x1b]0;PWNED\a--s1")  # skipped: not completed
    out = tmp_path / "ex\x1b[31m"
    res = _export("--workdir", str(ws), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\a" not in res.output
    assert "ex\\x1b[31m" in res.output and "main-grpo\\x1b[2J\\x1b]0;PWNED\\x07--s1" in res.output


def test_cp_prints_a_destination_with_control_characters_escaped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["cp", "main-grpo", "d\x1b]0;TITLE\a/"])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\a" not in res.output and "d\\x1b]0;TITLE\\x07/" in res.output


def test_show_prints_a_specs_path_with_control_characters_escaped(tmp_path, monkeypatch):
    mine = tmp_path / "spec\x1b[31ms"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARCTL_SPECS", str(mine))
    assert runner.invoke(app, ["cp", "main-grpo", str(mine / "experiments") + "/"]).exit_code == 0
    res = runner.invoke(app, ["show", "main-grpo"])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "spec\\x1b[31ms" in res.output

"""A workspace a group shares where one member left umask 022: the registry fixed (group-writable), but ``runs/``,
``jobs/``, ``local-slots/`` and the run folders that member made are theirs alone (``drwxr-xr-x``). Another
member's launch, resume and dry run are refused once, before anything is claimed or written, in one line that
names the owner, group and mode and the one command that fixes every such folder (``chmod -R g+w`` on the
workspace); once its owner runs it, the resume goes. A refused resume's rollback does not say it "could not
undo" a file it never changed.

From a hunt (two users of one group): ``arctl run`` said only ``error: <run folder>: Permission denied`` and
``arctl resume`` "submission failed: [Errno 13] ... config.yaml; and could not undo: ..." though nothing had
changed; the user fixed one path per attempt.

The other member is played by root without its capabilities (``setpriv --inh-caps=-all --bounding-set=-all``):
uid 0 without CAP_DAC_OVERRIDE is refused another user's folder as any user is, and still reads this
interpreter (under /root); the first member is uid 65534, group root (a group the second is in)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from arctl.launch import launcher, states
from arctl.launch.executors import LaunchError
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.local_queue import slots_folder
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace

OTHER_UID = 65534  # the member who left umask 022 ("nobody" where the machine names it)
NO_CAPS = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]


def _no_caps_works() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        return subprocess.run([*NO_CAPS, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


as_another_member = pytest.mark.skipif(not _no_caps_works(),
                                       reason="needs root and setpriv that can drop capabilities")


def _workspace(tmp_path) -> tuple[Workspace, str, str, str]:
    """lt3's three runs completed (debug executor), then b FAILED: (workspace, a, b, c)."""
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_sweep("lt3", []))
    launch(items, ws, executor="debug", members=["lt3"])
    a, b, c = (i.run_id for i in items)
    with Registry(ws.registry_path) as reg:
        reg.update_many([(b, {"state": states.FAILED, "error": "OOM"})])
    return ws, a, b, c


def _as_left_by_umask_022(ws: Workspace) -> None:
    """What a member with umask 022 leaves: everything under the workspace theirs, folders 0755 (setgid kept),
    files 0644; the registry (and the workspace's folder) group-writable, as the registry's own refusal told
    them to make it."""
    ws.jobs_dir.mkdir(exist_ok=True)
    slots_folder(ws.root).mkdir(parents=True, exist_ok=True)
    (slots_folder(ws.root) / "slot-0").touch()
    for path in sorted(ws.root.rglob("*")):
        if path.name.startswith(ws.registry_path.name) or path.is_symlink():
            continue
        os.chown(path, OTHER_UID, 0)
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _tree(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its mode, owner and bytes (the registry's rows are compared apart)."""
    return {str(p.relative_to(root)): (p.lstat().st_mode, p.lstat().st_uid,
                                       p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(root.rglob("*")) if not p.name.startswith("registry.sqlite")}


def _rows(ws: Workspace) -> dict:
    with Registry(ws.registry_path) as reg:
        return {r.run_id: (r.state, r.error, r.attempts, r.generation) for r in reg.list()}


def _arctl_as_other_member(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NO_CAPS, sys.executable, "-m", "arctl.cli.main", *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))


def _refused_once(proc: subprocess.CompletedProcess, ws: Workspace, first: Path) -> str:
    """The one error line: exit 2, the first folder it cannot write with its owner, group and mode, the others
    counted, and the one command that fixes them all."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = lines[0]
    owner = _name(OTHER_UID)
    assert f"cannot write {first}: it belongs to {owner} (group root), mode drwxr-xr-x" in line, line
    assert f"chmod -R g+w {ws.root}" in line and "nothing was written" in line, line
    assert "could not undo" not in line and "Permission denied" not in line, line
    return line


def _name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@as_another_member
def test_another_members_folders_refuse_a_resume_once_naming_the_owner_and_the_fix(specs, tmp_path):
    """The hunt's resume (and its dry run, and a new run's launch): one line, exit 2, nothing written; then the
    owner's one `chmod -R g+w` lets the resume go."""
    ws, a, b, c = _workspace(tmp_path)
    try:
        _as_left_by_umask_022(ws)
        before, rows = _tree(ws.root), _rows(ws)
        for dry in ([], ["--dry-run"]):
            proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "local", *dry)
            line = _refused_once(proc, ws, ws.jobs_dir)
            # every folder the resume writes, said in this one line (counted past the first few)
            assert f"so are {ws.root / 'local-slots'}, {slots_folder(ws.root)}, {ws.run_dir(b)} and " in line, line
            assert f"{ws.runs_dir}," not in line, line  # a resume makes no folder there
            assert _tree(ws.root) == before and _rows(ws) == rows
        # a new run: runs/ is where its folder would go
        proc = _arctl_as_other_member("run", "lt", "--arm", "a", "--seeds", "7", "--workdir", str(ws.root),
                                      "--executor", "debug")
        _refused_once(proc, ws, ws.runs_dir)
        assert _tree(ws.root) == before and _rows(ws) == rows
        # a launch that starts nothing (the completed runs skipped) writes no folder: not refused
        proc = _arctl_as_other_member("run", "lt", "--arm", "a", "--workdir", str(ws.root), "--executor", "debug")
        assert proc.returncode == 0 and "cannot write" not in proc.stderr, (proc.stdout, proc.stderr)
        assert _tree(ws.root) == before
        # only the run folder is theirs (runs/ group-writable already): it alone is named, with its folders
        os.chmod(ws.runs_dir, 0o775)
        before = _tree(ws.root)
        proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "debug")
        line = _refused_once(proc, ws, ws.run_dir(b))
        assert "; so are " in line and str(ws.run_dir(b) / "checkpoints") in line, line
        assert str(ws.jobs_dir) not in line, line  # the debug executor writes no job files there
        assert str(ws.run_dir(a)) not in line, line  # a completed run the resume skips is not written
        assert _tree(ws.root) == before and _rows(ws) == rows
        # the owner runs what the line says: the resume goes, in one attempt
        subprocess.run(["chmod", "-R", "g+w", str(ws.root)], check=True)
        proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "debug")
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        assert _rows(ws)[b][0] == states.COMPLETED
    finally:
        shutil.rmtree(ws.root, ignore_errors=True)  # no file of another uid left behind


@as_another_member
def test_a_rerun_of_another_members_completed_run_is_refused_before_anything_is_moved(specs, tmp_path):
    """``--force`` moves a completed run's checkpoints/ and wandb/ to previous/<time>/: a folder it cannot
    write is named before anything is moved, and the dry run says the same."""
    ws, a, b, c = _workspace(tmp_path)
    try:
        _as_left_by_umask_022(ws)
        os.chmod(ws.runs_dir, 0o775)
        for run_id in (b, c):
            os.chmod(ws.run_dir(run_id), 0o775)
        before, rows = _tree(ws.root), _rows(ws)
        for dry in ([], ["--dry-run"]):
            proc = _arctl_as_other_member("run", "lt", "--arm", "a", "--workdir", str(ws.root), "--executor",
                                          "debug", "--force", *dry)
            _refused_once(proc, ws, ws.run_dir(a))
            assert _tree(ws.root) == before and _rows(ws) == rows
            assert not (ws.run_dir(a) / "previous").exists()
    finally:
        shutil.rmtree(ws.root, ignore_errors=True)


def test_a_refused_resume_does_not_say_it_could_not_undo_files_it_never_changed(specs, tmp_path, monkeypatch):
    """The resume's config.yaml cannot be written (another member's folder, here any write fails): the run's
    files are as they were, so the rollback writes none of them back and the error says nothing of an undo."""
    from arctl.compose import resolve_sweep

    ws, a, b, c = _workspace(tmp_path)
    before = _tree(ws.run_dir(b))

    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(launcher, "prepare_run_dir", lambda run_dir, config, *args, **kwargs:
                        refused(Path(run_dir) / "config.yaml"))
    monkeypatch.setattr(launcher, "atomic_write", refused)
    with pytest.raises((LaunchError, PermissionError)) as err:  # (the CLI says an OSError's path in one line)
        launch(items_from_resolved(resolve_sweep("lt3", [])), ws, executor="debug", members=["lt3"])
    assert "config.yaml" in str(err.value) and "could not undo" not in str(err.value), str(err.value)
    assert _tree(ws.run_dir(b)) == before
    with Registry(ws.registry_path) as reg:
        assert reg.get(b).state == states.FAILED


def test_a_rollback_still_puts_back_a_file_it_changed(tmp_path):
    """What a refused resume did rewrite (or add) is put back; what it left as it was is not touched."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("a: 1\n")
    (run_dir / "status.json").write_text('{"state": "failed"}\n')
    kept = launcher._contents(run_dir, launcher.RESUME_REWRITES)
    (run_dir / "status.json").write_text('{"state": "submitted"}\n')
    (run_dir / "phase.json").write_text("{}\n")
    config_inode = (run_dir / "config.yaml").stat().st_ino
    launcher._put_back(kept)
    assert (run_dir / "status.json").read_text() == '{"state": "failed"}\n'
    assert not (run_dir / "phase.json").exists()
    assert (run_dir / "config.yaml").stat().st_ino == config_inode  # not rewritten
    assert stat.S_ISREG((run_dir / "config.yaml").stat().st_mode)


@as_another_member
def test_a_write_protected_folder_inside_a_runs_checkpoints_does_not_refuse_its_resume(specs, tmp_path):
    """From a review: every folder at any depth was asked, so a checkpoint the user kept write-protected
    (``checkpoints/best``, ``chmod -R a-w``), which a resume never writes, refused the resume an older arctl ran;
    and a refusal of the user's own folder told them to give the group write permission. Now only the run folder
    and the folders directly in it are asked, and the user's own are named with ``chmod u+w``."""
    ws, a, b, c = _workspace(tmp_path)
    best = ws.run_dir(b) / "checkpoints" / "best"
    try:
        best.mkdir(parents=True)
        (best / "kept.pt").write_bytes(b"weights")
        subprocess.run(["chmod", "-R", "a-w", str(best)], check=True)
        proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "debug")
        assert proc.returncode == 0 and "cannot write" not in proc.stderr, (proc.stdout, proc.stderr)
        assert _rows(ws)[b][0] == states.COMPLETED and (best / "kept.pt").read_bytes() == b"weights"
        # the folder a resume writes into, write-protected by its owner: refused, with the owner's own fix
        with Registry(ws.registry_path) as reg:
            reg.update_many([(b, {"state": states.FAILED, "error": "OOM"})])
        checkpoints = best.parent
        os.chmod(checkpoints, 0o555)
        proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "debug")
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        line = proc.stderr.strip()
        assert f"cannot write {checkpoints}: it is root's own (group root), mode dr-xr-xr-x" in line, line
        assert f"they are yours: give them back their owner's write permission (chmod u+w {checkpoints})" in line, line
        assert "g+w" not in line, line
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(ws.root)], check=False)
        shutil.rmtree(ws.root, ignore_errors=True)


@as_another_member
def test_a_write_protected_wandb_folder_of_wandbs_own_refuses_the_resume(specs, tmp_path):
    """From a third review: W&B's own folder in the run's W&B folder (``wandb/wandb``), where each attempt makes its
    run folder and which a restart moves aside, is two levels down: asked too, so its refusal comes before the job
    fails as it starts."""
    from arctl.track.identity import W_AND_B_OWN, wandb_dir

    ws, a, b, c = _workspace(tmp_path)
    own = wandb_dir(ws.run_dir(b)) / W_AND_B_OWN
    try:
        own.mkdir(parents=True, exist_ok=True)
        os.chmod(own, 0o555)
        for dry in (["--dry-run"], []):
            proc = _arctl_as_other_member("resume", b, "--workdir", str(ws.root), "--executor", "debug", *dry)
            assert proc.returncode == 2, (proc.stdout, proc.stderr)
            assert f"cannot write {own}: it is root's own" in proc.stderr and "chmod u+w" in proc.stderr, proc.stderr
        assert _rows(ws)[b][0] == states.FAILED
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(ws.root)], check=False)
        shutil.rmtree(ws.root, ignore_errors=True)

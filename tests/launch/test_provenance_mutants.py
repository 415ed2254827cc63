"""What provenance.json says of a run's code where a mutation hunt (regprov, HEAD 825943f) found no test saying it:
the git state of arctl's own checkout whatever repository the caller's environment selects and where git cannot
tell, a change of a shipped YAML file in the code hash, and an attempt of a run launched before provenance."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from arctl.launch.provenance import code_hash, git_state, started_other_code
from arctl.report.claims_render import other_code_warning

A = {"arctl_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False, "code_sha256": "1" * 64}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _checkout(root: Path) -> tuple[Path, str]:
    """A git work tree ``root`` tracking package ``root/arctl``; (the package, its commit)."""
    pkg = root / "arctl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'x'\n")
    _git(root, "init", "-q")
    _git(root, "add", "arctl/__init__.py")
    _git(root, "commit", "-q", "-m", "one")
    return pkg, _git(root, "rev-parse", "HEAD")


def test_the_commit_is_arctls_checkouts_whatever_repository_the_callers_environment_selects(tmp_path, monkeypatch):
    """A user who launches from a shell with GIT_DIR/GIT_WORK_TREE set for another repository (a dotfiles alias, a
    git hook) gets the commit and dirty flag of the checkout arctl runs from, not of that repository."""
    pkg, head = _checkout(tmp_path / "repo")
    other = tmp_path / "other"
    other.mkdir()
    (other / "f").write_text("x")
    _git(other, "init", "-q")
    _git(other, "add", "f")
    _git(other, "commit", "-q", "-m", "other")
    (other / "f").write_text("edited")  # the other repository is dirty, arctl's is not
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert git_state(pkg) == (head, False)


def test_an_untracked_file_does_not_make_the_checkout_dirty(tmp_path):
    """A run's ``git_dirty`` says whether tracked code was edited: a log or a scratch file beside the checkout is no
    edit (the same check is in test_shared_arms.py, whose module is all ``-m slow``: the quick loop skips it)."""
    pkg, head = _checkout(tmp_path / "repo")
    (tmp_path / "repo" / "scratch.txt").write_text("x")
    (pkg / "notes.txt").write_text("x")
    assert git_state(pkg) == (head, False)
    (pkg / "__init__.py").write_text("__version__ = 'y'\n")
    assert git_state(pkg) == (head, True)


def test_the_dirty_flag_is_unknown_where_git_status_fails(tmp_path, monkeypatch):
    """provenance.json says ``git_dirty: null`` where ``git status`` fails (a lock, a damaged index it must read),
    never ``false``: a run of uncommitted code would be reported as of the clean commit."""
    pkg, head = _checkout(tmp_path / "repo")
    real = shutil.which("git")
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = status ] && exit 128; done\nexec {real} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    assert git_state(pkg) == (head, None)


def test_an_edit_of_a_shipped_yaml_file_changes_the_code_hash(tmp_path):
    """arctl computes with its YAML files too (config groups, scale profiles): two installs that differ only in one
    of them are told apart by ``code_sha256``; a file that is neither code nor YAML does not move it, and renaming one does."""
    pkg = tmp_path / "pkg"
    (pkg / "conf" / "algo").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "conf" / "algo" / "grpo.yaml").write_text("kl_coef: 0.001\n")
    before = code_hash(pkg)
    (pkg / "README.txt").write_text("not code")
    assert code_hash(pkg) == before
    (pkg / "conf" / "algo" / "grpo.yaml").write_text("kl_coef: 0.002\n")
    edited = code_hash(pkg)
    assert edited != before
    # the same bytes under another name are other code (`algo=grpo` no longer composes what it did)
    (pkg / "conf" / "algo" / "grpo.yaml").rename(pkg / "conf" / "algo" / "grpo-old.yaml")
    assert code_hash(pkg) != edited


def test_an_attempt_of_a_run_launched_before_provenance_is_not_called_other_code():
    """A run launched by an arctl that wrote no provenance.json has no code to compare its job's attempts with:
    the claims report must not warn that it ran other code than it was launched with (it cannot know)."""
    info = {"attempts": [{**A, "attempt": 1, "submission": 0, "at": 2.0}]}
    assert started_other_code(info) == []
    assert other_code_warning({"r": info}) is None
    resumed = {**info, "resumed": [{**A, "code_sha256": "2" * 64, "at": 3.0}],
               "attempts": [*info["attempts"], {**A, "attempt": 2, "submission": 1, "at": 4.0}]}
    [(submitted, started)] = started_other_code(resumed)  # the resume recorded its code: that attempt is judged
    assert submitted["code_sha256"] == "2" * 64 and started["attempt"] == 2


def test_a_checkout_without_a_commit_yet_has_no_commit_and_launches(tmp_path):
    """arctl staged in a new repository (``git add``, no commit yet): git knows its files but has no HEAD; the
    provenance says no commit and unknown dirtiness (``code_version()``, which every launch asks, unpacks the pair:
    anything else is a traceback of `arctl run`)."""
    pkg = tmp_path / "repo" / "arctl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'x'\n")
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "add", "arctl/__init__.py")
    assert git_state(pkg) == (None, None)

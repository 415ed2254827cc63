"""The tiny warm-up's cache where it cannot be used: a cache folder that cannot be written is refused at
launch in one line naming the setting it comes from (ARCTL_CACHE, XDG_CACHE_HOME, ~/.cache), and a job that
meets one says so in one line too; a cache on a file system without locks is used unlocked, with a warning.

From a hunt (a non-root user): ``ARCTL_CACHE`` on a folder of root's, or ``HOME=/nonexistent``, let the run
be submitted, and its job failed "PermissionError: [Errno 13] Permission denied: '.../tiny-warmup'"; NFS
without lockd failed every tiny run "OSError: [Errno 37] No locks available", naming no path. Running as
root here, a cache folder under a file (NotADirectoryError) stands for one that cannot be written."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from arctl.backends.tiny import warmup
from arctl.compose import resolve_experiment


def _config() -> dict:
    return resolve_experiment("main-grpo", scale="tiny")[0].config  # the default: arctl ships its warm-up


def _unmeasured(model, tok):
    raise AssertionError("the shipped warm-up covers the default budgets: nothing is measured")


def _blocked(tmp_path: Path) -> Path:
    """A folder path no one can create: a file is where its parent should be."""
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "cache"


@pytest.fixture
def no_cache_env(monkeypatch):
    for name in ("ARCTL_CACHE", "XDG_CACHE_HOME", "ARCTL_TINY_WARMUP"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("setting", ["ARCTL_CACHE", "XDG_CACHE_HOME", "HOME"])
def test_a_tiny_launch_is_refused_in_one_line_naming_the_cache_setting(sandbox, tmp_path, monkeypatch,
                                                                       no_cache_env, setting):
    from bad_input import launch_args  # tests/support/bad_input.py

    blocked = _blocked(tmp_path)
    monkeypatch.setenv(setting, str(blocked))
    result = sandbox.check_refused("run", "main-grpo", "--scale", "tiny", *launch_args(sandbox))
    named = {"ARCTL_CACHE": f"ARCTL_CACHE={blocked}", "XDG_CACHE_HOME": f"XDG_CACHE_HOME={blocked}",
             "HOME": f"~/.cache/arctl ({blocked}/.cache/arctl)"}[setting]
    assert named in result.err, result.err
    assert f"{tmp_path / 'a-file'} is a file, not a folder" in result.err and "set ARCTL_CACHE to" in result.err
    dry = sandbox.run("run", "main-grpo", "--scale", "tiny", "--dry-run", *launch_args(sandbox))
    assert dry.code == 2 and named in dry.err, dry.err  # the dry run says the same


def test_a_launch_with_a_writable_cache_is_not_refused_for_it(tmp_path, monkeypatch, no_cache_env):
    from arctl.backends.base import get_backend

    tiny = get_backend("tiny")
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "new" / "cache"))  # made as the job starts
    run = resolve_experiment("main-grpo", scale="tiny")[0]
    assert tiny.launch_problem(run.config, tmp_path / "run") is None
    assert not (tmp_path / "new").exists()  # asked, nothing made
    monkeypatch.setenv("ARCTL_CACHE", str(_blocked(tmp_path)))
    assert "ARCTL_CACHE=" in tiny.launch_problem(run.config, tmp_path / "run")


def test_a_job_whose_cache_cannot_be_written_fails_in_one_line_naming_the_setting(tmp_path, monkeypatch,
                                                                                  no_cache_env):
    from arctl.launch.job import failure_line

    blocked = _blocked(tmp_path)
    monkeypatch.setenv("ARCTL_CACHE", str(blocked))
    with pytest.raises(warmup.WarmupCacheError) as caught:
        warmup.warmup_model(_config(), tmp_path / "ws" / "runs" / "r", _unmeasured)
    line = failure_line(caught.value, tmp_path / "ws" / "runs" / "r")  # the recorded line (cut at 500 characters:
    said = str(caught.value)  # the deep temporary paths of a nested test run make it longer than a user's)
    assert line.startswith("WarmupCacheError: the tiny warm-up cache ") and said.startswith(line.split(": ", 1)[1][:200])
    assert f"ARCTL_CACHE={blocked}" in said and "Not a directory" in said
    assert f"`arctl resume r --workdir {tmp_path / 'ws'}`" in said


def test_a_job_whose_cache_folder_is_not_its_own_says_which_setting(tmp_path, monkeypatch, no_cache_env):
    """A permission error (the folder of root's, as a user) on the folders above the cache, as mkdir meets
    it, names ~/.cache where neither variable is set."""
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    real = Path.mkdir

    def denied(self, *args, **kwargs):
        if self.is_relative_to(tmp_path / "nonexistent"):
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "nonexistent"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", denied)
    with pytest.raises(warmup.WarmupCacheError, match=r"the user cache is ~/\.cache/arctl \("):
        warmup.warmup_model(_config(), tmp_path / "ws" / "runs" / "r", _unmeasured)


def test_a_full_disk_under_the_cache_is_still_the_full_disk(tmp_path, monkeypatch, no_cache_env):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cache" / "x"))

    monkeypatch.setattr(warmup.shutil, "copytree", full)
    with pytest.raises(OSError) as caught:
        warmup.warmup_model(_config(), tmp_path / "ws" / "runs" / "r", _unmeasured)
    assert caught.value.errno == errno.ENOSPC and not isinstance(caught.value, warmup.WarmupCacheError)


def test_a_cache_without_locks_is_used_unlocked_with_a_warning(tmp_path, monkeypatch, capsys, no_cache_env):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    config = _config()
    model, tok, info = warmup.warmup_model(config, tmp_path / "ws" / "runs" / "r", _unmeasured)
    assert info["source"] == "shipped" and (Path(info["path"]) / "warmup.json").is_file()
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    key = warmup.warmup_key(config)
    assert len(err) == 1 and str(tmp_path / "cache" / "tiny-warmup" / f"{key}.lock") in err[0], err
    assert "No locks available" in err[0] and "runs unlocked" in err[0]
    assert sorted(p.name for p in (tmp_path / "cache" / "tiny-warmup").iterdir() if p.is_dir()) == [key]
    warmup.warmup_model(config, tmp_path / "ws" / "runs" / "r", _unmeasured)  # the cached copy, unlocked again


def test_an_entry_another_unlocked_run_published_meanwhile_is_kept(tmp_path):
    """Unlocked (no locks), two runs may build one entry at once: each stages in a folder of its own, and the
    second to finish keeps the first's entry (which the first may be loading) and drops its own."""
    target = tmp_path / "tiny-warmup" / "k"
    mine = warmup._staging(target, alone=False)
    assert mine.name == f"k.tmp-{os.getpid()}" and warmup._staging(target).name == "k.tmp"
    mine.mkdir(parents=True)
    (mine / "warmup.json").write_text("mine")
    target.mkdir()
    (target / "warmup.json").write_text("theirs")
    warmup._publish(mine, target)
    assert (target / "warmup.json").read_text() == "theirs" and not mine.exists()

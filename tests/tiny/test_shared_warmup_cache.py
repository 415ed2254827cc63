"""A tiny warm-up cache a group shares (``ARCTL_CACHE`` on a folder ``chgrp GROUP; chmod 2775``, every member with
umask 002): the entries a member's run publishes, trained or the shipped copy installed, have the modes the
member's umask gives any file and folder, so every other member's run reads them; an entry that cannot be read
all the same (an earlier arctl's, a member with umask 077) fails the job in one line saying whose file it is, its
mode and the fix (its owner's ``chmod -R g+rX``, or another ``ARCTL_CACHE``), and is not set aside as damaged.

From a hunt (two users of one group): safetensors writes the weights 0600 whatever the umask, so each other
member's run failed after launch "... model.safetensors: Permission denied ...: set ARCTL_CACHE to a folder you
can write", a folder that was writable. Modes are checked under a set umask (restored after), so no second user
is needed; where the tests run as root (who reads anything), the unreadable file is made so by the access check."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from modes import mode_of, umask  # tests/support/modes.py

from arctl.backends.tiny import warmup
from arctl.compose import resolve_experiment


def _modes(entry: Path) -> dict[str, int]:
    return {str(p.relative_to(entry)): mode_of(p) for p in sorted(entry.rglob("*"))} | {".": mode_of(entry)}


def _micro_config(seed: int) -> dict:
    """A warm-up arctl ships none for (its model and task are the micro ones): trained in a second."""
    overrides = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1",
                 "model.intermediate_size=64", "tiny.task.search.min_items=4", "tiny.task.search.max_items=8",
                 "tiny.warmup.steps=2", "tiny.warmup.batch_size=4", "tiny.warmup.max_rounds=1",
                 "tiny.warmup.eval_problems=4", f"tiny.warmup.seed={seed}"]
    return resolve_experiment("main-grpo", overrides=overrides)[0].config


def _accuracy(config):
    return lambda model, tok: {int(b): 0.9 for b in config["eval"]["budgets"]}


def _group_cache(tmp_path: Path) -> Path:
    cache = tmp_path / "group-cache"
    cache.mkdir()
    os.chmod(cache, 0o2775)  # the group's folder (its group: the test user's own)
    return cache


@pytest.fixture
def cache_env(monkeypatch):
    for name in ("XDG_CACHE_HOME", "ARCTL_TINY_WARMUP"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("mask, files, folders", [(0o002, 0o664, 0o2775), (0o077, 0o600, 0o2700)],
                         ids=["umask-002", "umask-077"])
def test_a_trained_warm_up_has_the_modes_of_the_members_umask(tmp_path, cache_env, mask, files, folders):
    """The weights included (safetensors' 0600 before); its folders as made in the setgid folder."""
    cache_env.setenv("ARCTL_CACHE", str(_group_cache(tmp_path)))
    config = _micro_config(seed=4242)
    with umask(mask):
        _m, _t, info = warmup.warmup_model(config, tmp_path / "ws" / "runs" / "r", _accuracy(config))
    entry = Path(info["path"])
    assert info["source"] == "trained" and (entry / "model" / "model.safetensors").is_file()
    modes = _modes(entry)
    assert {name for name, mode in modes.items() if mode != (folders if (entry / name).is_dir() else files)} == set()
    assert not [p for p in entry.parent.iterdir() if ".tmp" in p.name]  # nothing staged is left


def test_the_shipped_warm_up_is_installed_with_the_members_modes_not_the_packages(tmp_path, cache_env):
    """arctl installed under umask 077 ships its warm-start 0600/0700: the copy in a group's cache is 0664/2775."""
    config = resolve_experiment("main-grpo", scale="tiny")[0].config  # the default: arctl ships its warm-up
    key = warmup.warmup_key(config)
    real = warmup.shipped_dir(key)
    assert real is not None
    shipped = tmp_path / "site-packages" / "shipped"
    shutil.copytree(real, shipped / key)
    for path in [shipped / key, *(shipped / key).rglob("*")]:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    cache_env.setattr(warmup, "SHIPPED", shipped)
    cache_env.setenv("ARCTL_CACHE", str(_group_cache(tmp_path)))

    def unmeasured(model, tok):
        raise AssertionError("the shipped warm-up covers the default budgets: nothing is measured")

    with umask(0o002):
        _m, _t, info = warmup.warmup_model(config, tmp_path / "ws" / "runs" / "r", unmeasured)
    entry = Path(info["path"])
    assert info["source"] == "shipped" and entry.name == key
    modes = _modes(entry)
    assert modes == {name: 0o2775 if (entry / name).is_dir() else 0o664 for name in modes}
    assert modes["model/model.safetensors"] == 0o664 and modes["."] == 0o2775
    assert warmup.cache_problem(entry) is None  # the same bytes


@pytest.mark.parametrize("unreadable", ["model/model.safetensors", "tokenizer", "."])
def test_an_entry_this_user_cannot_read_fails_the_job_in_one_line_with_its_owner_and_fix(
        tmp_path, cache_env, unreadable):
    import grp
    import pwd

    cache = _group_cache(tmp_path)
    cache_env.setenv("ARCTL_CACHE", str(cache))
    config = _micro_config(seed=4343)
    run = tmp_path / "ws" / "runs" / "r"
    with umask(0o002):
        _m, _t, info = warmup.warmup_model(config, run, _accuracy(config))  # another member's, as it was
    entry = Path(info["path"])
    path = entry / unreadable if unreadable != "." else entry
    os.chmod(path, 0o700 if path.is_dir() else 0o600)  # as an earlier arctl (or umask 077) left it
    if os.geteuid() == 0:  # root reads anything: the access check says what another member's would
        os.chown(path, 65534, -1)  # another member's
        real = os.access
        cache_env.setattr(os, "access", lambda p, m, *a, **k: False if Path(p) == path and m & os.R_OK
                          else real(p, m, *a, **k))
    else:
        os.chmod(path, 0o000)
    st = path.stat()
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    group = grp.getgrgid(st.st_gid).gr_name
    with pytest.raises(warmup.WarmupCacheError) as caught:
        warmup.warmup_model(config, run, _accuracy(config))
    said = str(caught.value)
    assert "\n" not in said
    what = "its folder" if unreadable == "." else f"its {unreadable}"
    if os.geteuid() != 0:  # this user's own entry, without its owner's bit (another user's needs root to make)
        assert said.startswith(f"the cached tiny warm-up {entry} cannot be read: {what}: it is {owner}'s own"), said
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
        return
    assert said.startswith(f"the cached tiny warm-up {entry} cannot be read: {what}: it belongs to {owner} "
                           f"(group {group}), mode {stat.filemode(st.st_mode)}, which ")
    assert said.endswith(f"cannot read: {owner} can let the group read it (chmod -R g+rX {entry}); or set "
                         f"ARCTL_CACHE to another folder, then `arctl resume r --workdir {tmp_path / 'ws'}`")
    assert "a folder you can write" not in said
    if os.geteuid() != 0:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    assert sorted(p.name for p in cache.joinpath("tiny-warmup").iterdir() if p.is_dir()) == [entry.name]  # not
    # set aside as damaged: it is another member's, whole

"""The files arctl writes in one step (:func:`arctl.config.files.replacing`, :func:`atomic_write`: status.json,
config.yaml, checkpoints, caches, reports) get the mode the user's umask gives any file (0666 less the umask):
group-writable in a workspace a group shares (its folder ``chmod 2775``, umask 002), private under umask 077.

From a hunt (two users of one group): they were 0644 whatever the umask, while the README says a group's
workspace has group-writable files; under umask 077 they were readable by all, in 2700 folders. The umask is
read without setting it (``os.umask`` can only read it by changing it for every thread of the process), and
each test restores the one it sets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from modes import mode_of, umask  # tests/support/modes.py

from arctl.config import files

OTHER_UID = 65534  # another member ("nobody" where the machine names it)


def _user(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@pytest.mark.parametrize("mask, expected", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)],
                         ids=["umask-002", "umask-022", "umask-077"])
@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
def test_a_file_written_in_one_step_has_the_umasks_mode(tmp_path, mask, expected, durable):
    new, old = tmp_path / "status.json", tmp_path / "config.yaml"
    old.write_text("was")
    os.chmod(old, 0o644)  # an earlier arctl's
    with umask(mask):
        files.atomic_write(new, '{"state": "running"}', durable=durable)
        files.atomic_write(old, b"now", durable=durable)
        with files.replacing(tmp_path / "metrics.jsonl") as tmp:
            assert mode_of(tmp) == expected  # the temporary file already has it: nothing changes it after
            tmp.write_text("{}\n")
    assert new.read_text() == '{"state": "running"}' and old.read_bytes() == b"now"
    assert {p.name: mode_of(p) for p in tmp_path.iterdir()} == {
        "status.json": expected, "config.yaml": expected, "metrics.jsonl": expected}


def test_a_umask_that_takes_the_owners_own_write_still_writes_the_file(tmp_path):
    """umask 0277 would make the temporary file 0400, which its writer then could not open to write: its owner
    keeps read and write, nobody else gets anything."""
    with umask(0o277):
        files.atomic_write(tmp_path / "a.json", "{}", durable=True)
    assert (tmp_path / "a.json").read_text() == "{}" and mode_of(tmp_path / "a.json") == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_the_temporary_files_name_is_the_one_a_later_write_cleans_up_after(tmp_path):
    """``.<name>.<pid>-<place>.<8 random>.tmp``, what :func:`files.remove_stale_temps` reads."""
    with files.replacing(tmp_path / "a") as tmp:
        prefix = f".a.{os.getpid()}-{files._writer_place()}."
        assert tmp.parent == tmp_path and tmp.name.startswith(prefix) and tmp.name.endswith(files.TEMP_SUFFIX)
        assert files._TEMP_MIDDLE.match(tmp.name[len(".a."):-len(files.TEMP_SUFFIX)])
        tmp.write_text("x")


@pytest.mark.parametrize("mask", [0o002, 0o027, 0o077], ids=["umask-002", "umask-027", "umask-077"])
def test_the_umask_is_read_without_being_set(monkeypatch, mask):
    status = Path(files._PROC_STATUS)
    if not (status.is_file() and any(line.startswith("Umask:") for line in status.read_text().splitlines())):
        pytest.skip("this kernel does not say a process's umask in /proc/self/status")
    with umask(mask):

        def never(*args):
            raise AssertionError("os.umask was called: it sets the umask of every thread")

        monkeypatch.setattr(os, "umask", never)
        assert files.umask() == mask and files.file_mode() == 0o666 & ~mask
        monkeypatch.undo()


def test_where_the_kernel_does_not_say_the_umask_it_is_read_once_by_setting_it(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_PROC_STATUS", str(tmp_path / "no-such-file"))
    monkeypatch.setattr(files, "_UMASK", [])
    with umask(0o027):
        assert files.umask() == 0o027 and files.file_mode() == 0o640
        assert os.umask(0o027) == 0o027  # left as it was
        calls = []
        real = os.umask
        monkeypatch.setattr(os, "umask", lambda m: (calls.append(m), real(m))[1])
        assert files.umask() == 0o027 and calls == []  # remembered: set once per process


def test_a_file_this_user_cannot_read_is_described_by_its_owner_mode_and_fix(tmp_path, monkeypatch):
    """The words of a file another member wrote 0600 (root reads anything: the check is made to say no), with the
    fix on the folder named (``chmod -R``) where one is given."""
    import grp
    import pwd

    entry = tmp_path / "entry"
    (entry / "model").mkdir(parents=True)
    path = entry / "model" / "model.safetensors"
    path.write_bytes(b"w")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, -1)  # another member's
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if Path(p) == path else real(p, m, *a, **k))
    else:
        os.chmod(path, 0o000)
    st = path.stat()
    owner, group = _user(st.st_uid), grp.getgrgid(st.st_gid).gr_name
    me = pwd.getpwuid(os.geteuid()).pw_name
    mode = "-rw-------" if os.geteuid() == 0 else "----------"
    if os.geteuid() != 0:  # this user's own file, without its owner's bit: the group is no answer
        assert files.not_readable(path, fix=entry) == (
            f"it is {me}'s own (group {group}), mode {mode}, without its owner's read permission: chmod u+r {path}")
        return
    assert files.not_readable(path, fix=entry) == (
        f"it belongs to {owner} (group {group}), mode {mode}, which {me} cannot read: {owner} can let the group read "
        f"it (chmod -R g+rX {entry})")
    assert files.not_readable(path).endswith(f"can let the group read it (chmod g+rX {path})")
    assert files.not_readable(entry) is None and files.not_readable(tmp_path / "none") is None
    monkeypatch.setattr(os, "getgroups", lambda: [])
    monkeypatch.setattr(os, "getegid", lambda: st.st_gid + 1)  # a group this user is not in
    assert files.not_readable(path, fix=entry).endswith(
        f"{owner} can give it a group you are in, readable (chgrp -R GROUP {entry}; chmod -R g+rX {entry})")

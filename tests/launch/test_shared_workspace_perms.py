"""A workspace shared by a group (its folder ``chgrp lab; chmod 2775``, its members' umask 002): the files
arctl makes there are group-writable like every other file a member makes, so each member can launch; and a
file system without locks runs arctl's user-level locks unlocked, with a warning, instead of a traceback.

From a hunt (as two users of one group): registry.sqlite was created 0644 whatever the umask (SQLite's
mode), so no other member could launch, and an `arctl repair` by one made it theirs alone; `arctl export`
crashed at ``fcntl.flock`` on Lustre mounted noflock / NFS without lockd. Modes are checked under a set
umask, so no second user is needed."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest
from modes import mode_of, umask  # tests/support/modes.py

from arctl.config import files
from arctl.launch import repair
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace


@pytest.mark.parametrize("mask, expected", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_a_file_arctl_creates_for_a_library_has_the_umasks_mode(tmp_path, mask, expected):
    """The registry's helper: SQLite alone makes 0644 under any umask (what registry.py creates first)."""
    path = tmp_path / "registry.sqlite"
    with umask(mask):
        assert files.create_file(path) is True
    assert mode_of(path) == expected and path.read_bytes() == b""
    path.write_bytes(b"kept")
    with umask(mask):
        assert files.create_file(path) is False  # never over a file that is there
    assert path.read_bytes() == b"kept"
    assert files.create_file(tmp_path / "no-such-folder" / "x") is False  # left to the open that follows


def test_the_helper_made_registry_is_group_writable_and_sqlite_keeps_its_mode(tmp_path):
    """Created by the helper first, the registry SQLite then opens keeps 0664, and so do its -wal and -shm
    (SQLite gives them the database's mode): what registry.py's open does once it calls the helper."""
    path = tmp_path / "ws" / "registry.sqlite"
    path.parent.mkdir()
    with umask(0o002):
        files.create_file(path)
        with Registry(path) as reg:
            reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
            assert {p.name: mode_of(p) for p in path.parent.iterdir()} == {
                "registry.sqlite": 0o664, "registry.sqlite-wal": 0o664, "registry.sqlite-shm": 0o664}


def test_a_registry_arctl_opens_in_a_shared_workspace_is_group_writable(tmp_path):
    """The registry as a launch makes it (Registry's own open, no helper called by the test): 0664 under umask
    002, where SQLite alone made it 0644 and the group's other members could not launch."""
    path = tmp_path / "ws" / "registry.sqlite"
    with umask(0o002):
        with Registry(path) as reg:
            reg.claim([RunRecord(run_id="r0", experiment="e", arm="a", seed=0)], new_claim_token())
        assert mode_of(path) == 0o664


def test_a_registry_another_member_owns_is_said_to_be_theirs_not_read_only(tmp_path, monkeypatch):
    """A registry this user cannot write in a writable folder: the error names its owner and mode and the
    remedy, not "the workspace is read-only"."""
    from arctl.launch import registry

    path = tmp_path / "registry.sqlite"
    path.write_bytes(b"")
    monkeypatch.setattr(registry, "not_writable", lambda f: "it belongs to ann (group lab), mode -rw-r--r--"
                        if f == path else None)
    err = registry._sqlite_problem(path, "attempt to write a readonly database")
    assert "it belongs to ann (group lab)" in str(err) and "read-only" not in str(err)


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    with Registry(ws.registry_path) as reg:
        reg.claim([RunRecord(run_id="r0", experiment="e", arm="r0", seed=0)], new_claim_token())
    ws.run_dir("r0").mkdir(parents=True)
    (ws.run_dir("r0") / "config.yaml").write_text("experiment: e\narm: r0\nseed: 0\nrun_id: r0\n")
    return ws


def test_a_repair_gives_the_new_registry_the_old_ones_group_and_mode(tmp_path):
    """The group's registry (0664, group 4242) repaired by a member: the new file is the group's and
    group-writable too (it was the repairer's alone, 0644: the others could no longer launch)."""
    ws = _workspace(tmp_path)
    if os.geteuid() == 0:  # (any group; another user: the group it has)
        os.chown(ws.registry_path, -1, 4242)
    os.chmod(ws.registry_path, 0o664)
    group = ws.registry_path.stat().st_gid
    with umask(0o022):  # the repairer's umask would give 0644: the old file's group-write is kept
        done = repair.rebuild_registry(ws)
    assert done.kept and [r.run_id for r in done.runs] == ["r0"]
    assert mode_of(ws.registry_path) == 0o664 and ws.registry_path.stat().st_gid == group


def test_a_repair_of_a_0644_registry_in_a_shared_workspace_makes_it_group_writable(tmp_path):
    """An old arctl's 0644 registry, repaired by a member whose umask is the group's (002): 0664."""
    ws = _workspace(tmp_path)
    os.chmod(ws.registry_path, 0o644)
    with umask(0o002):
        repair.rebuild_registry(ws)
    assert mode_of(ws.registry_path) == 0o664
    with Registry(ws.registry_path) as reg:
        assert [r.run_id for r in reg.list()] == ["r0"]


def test_a_local_queue_slot_file_has_the_umasks_mode(tmp_path):
    from arctl.launch.local_queue import take_slot

    with umask(0o002):
        slot = take_slot(tmp_path / "local-slots" / "host", 2)
    try:
        assert slot.index == 1
        assert mode_of(tmp_path / "local-slots" / "host" / "slot-1") == 0o664
    finally:
        slot.close()


def test_a_file_this_user_cannot_write_is_described_by_its_owner_group_and_mode(tmp_path, monkeypatch):
    """The registry's "read-only" error names whose file it is and its mode (root writes anything: the
    check is made to say no)."""
    import grp
    import pwd

    path = tmp_path / "registry.sqlite"
    path.write_bytes(b"")
    os.chmod(path, 0o644)
    assert files.not_writable(path) is None  # this user's own file
    assert files.not_writable(tmp_path / "none") is None
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if Path(p) == path else real(p, m, *a, **k))
    me = pwd.getpwuid(os.geteuid()).pw_name
    # this user's own file that it cannot write (a chmod a-w): its owner's bit, not the group's
    assert files.not_writable(path) == (f"it is {me}'s own (group {grp.getgrgid(path.stat().st_gid).gr_name}), mode "
                                        f"-rw-r--r--, without its owner's write permission: chmod u+w {path}")
    if os.geteuid() != 0:  # (another user's file needs root to make)
        return
    os.chown(path, 65534, -1)  # another member's
    said = files.not_writable(path)
    st = path.stat()
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    assert said == (f"it belongs to {owner} (group {grp.getgrgid(st.st_gid).gr_name}), "
                    f"mode -rw-r--r--, which {me} cannot write: {owner} can let the group "
                    f"write it (chmod g+w {path}; a workspace a group shares wants its members' umask at 002)")
    if os.geteuid() == 0:  # a group this user is not in
        os.chown(path, -1, 4242)
        monkeypatch.setattr(os, "getgroups", lambda: [])
        assert files.not_writable(path).endswith(f"can give it a group you are in, writable (chgrp GROUP {path}; "
                                                 f"chmod g+w {path})")


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP])
def test_the_user_lock_runs_unlocked_with_a_warning_where_the_file_system_has_no_locks(
        tmp_path, monkeypatch, capsys, code):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))

    def no_locks(*args):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    ran = []
    with files.exclusive("export /somewhere"):
        ran.append(1)
    assert ran == [1]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: cannot lock ")
    assert str(tmp_path / "cache" / "locks") in err[0] and "export /somewhere runs unlocked" in err[0]
    assert "ARCTL_CACHE" in err[0]


def test_the_user_lock_still_raises_what_is_not_a_missing_lock_and_what_the_block_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError), files.exclusive("x"):  # the block's own error, locked
        raise ValueError("mine")

    def bad(*args):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(fcntl, "flock", bad)
    with pytest.raises(OSError, match="Bad file descriptor"), files.exclusive("x"):
        pass

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(ValueError), files.exclusive("x"):  # unlocked: the block's error is not swallowed
        raise ValueError("mine")

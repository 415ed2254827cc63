"""Writing a file so that readers see the old content or the new, never half of it, and a failed write
(a full disk, a read-only folder, a kill) leaves no temporary file behind: the one way arctl writes
the files others read (status.json, config.yaml, checkpoints, caches, datasets)."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# what the machine says when a path cannot be used: a full disk, a read-only or foreign folder, a file
# where a folder should be, a name too long. The user can act on each; none is a bug of arctl's
PLACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                          errno.EISDIR, errno.ENAMETOOLONG, errno.ENOENT, errno.EEXIST, errno.EIO})


@contextmanager
def replacing(path: str | Path, mode: int = 0o644) -> Iterator[Path]:
    """``with replacing(p) as tmp: write tmp`` — ``tmp`` (a new file beside ``p``) replaces ``p`` when
    the block ends; if the block raises, ``tmp`` is removed and ``p`` is left as it was."""
    path = Path(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # name the file the caller writes, not a temporary name it never sees
        raise OSError(err.errno, err.strerror, str(path)) from err
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, mode)  # readable by the team, like any file a job writes
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.filename is None or str(err.filename) == str(tmp):  # a full disk on write names no file: name ours
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: str | Path, data: str | bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one step (:func:`replacing`)."""
    with replacing(path, mode) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (checkpoints, exported runs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


CACHE_ENV = "ARCTL_CACHE"


def cache_root() -> Path:
    """The user-level cache shared by every workspace: ``$ARCTL_CACHE``, else
    ``$XDG_CACHE_HOME/arctl``, else ``~/.cache/arctl``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "arctl"


def writable_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder this process can create files in, or, where it does not exist yet,
    whether its nearest existing ancestor is one (where it would be made): :func:`write_problem`."""
    return write_problem(path) is None


def write_problem(path: str | Path) -> str | None:
    """Why this process cannot create files in the folder ``path`` or, where it does not exist yet, in
    its nearest existing ancestor (where it would be made): ``"PLACE: the system's words"`` (e.g.
    ``/mnt/ro: Read-only file system``, ``/sys: Permission denied``, ``/x/f: not a folder``), or None.
    Tried with a file created and removed at once, not inferred from modes (root, ACLs and read-only
    mounts answer differently); nothing is left behind."""
    place = Path(path)
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        return f"{place}: not a folder"
    try:
        fd, name = tempfile.mkstemp(dir=place, prefix=".probe.")
        os.close(fd)
        os.unlink(name)
        return None
    except OSError as err:
        return f"{place}: {err.strerror or err}"


@contextmanager
def exclusive(name: str) -> Iterator[None]:
    """Hold the user-level lock ``name`` (a file under ``<cache_root>/locks``, ``flock``ed) for the
    block: e.g. two `arctl export`s into one folder take turns instead of losing each other's index
    entries. Nothing is written where the locked thing is. One machine and one user cache only (two
    machines, or two users, exporting into one shared folder are not serialised); where the user cache
    cannot be written, the block runs unlocked."""
    import fcntl

    folder = cache_root() / "locks"
    key = hashlib.sha256(name.encode()).hexdigest()[:24]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(folder / f"{key}.lock", "a")  # noqa: SIM115 - closed below
    except OSError:  # a user cache that cannot be written (a read-only home): no lock, as before it existed
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

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
def replacing(path: str | Path, mode: int = 0o644, durable: bool = False) -> Iterator[Path]:
    """``with replacing(p) as tmp: write tmp`` — ``tmp`` (a new file beside ``p``) replaces ``p`` when
    the block ends; if the block raises, ``tmp`` is removed and ``p`` is left as it was. ``durable``:
    ``tmp`` and then the folder are flushed to disk (fsync) around the rename, so that a machine that
    crashes after it has the new file (a checkpoint before the older one is deleted)."""
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
        if durable:
            _fsync(tmp)
        os.replace(tmp, path)
        if durable:
            _fsync(path.parent)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.filename is None or str(err.filename) == str(tmp):  # a full disk on write names no file: name ours
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: str | bytes, mode: int = 0o644, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one step (:func:`replacing`)."""
    with replacing(path, mode, durable) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (checkpoints, exported runs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


HOME_ENV = "ARCTL_HOME"
DEFAULT_WORKDIR = "arctl-runs"
CACHE_ENV = "ARCTL_CACHE"


def workdir_path(workdir: str | Path | None = None) -> Path:
    """The workspace folder every command means: ``workdir`` (--workdir), else ``$ARCTL_HOME``, else
    ``./arctl-runs``; ``~`` expanded (a shell leaves it in ``--workdir=~/x`` and in a quoted
    ``ARCTL_HOME="~/x"``), relative as given."""
    return Path(workdir or os.environ.get(HOME_ENV) or DEFAULT_WORKDIR).expanduser()


def workdir_origin(workdir: str | Path | None = None) -> str:
    """Where :func:`workdir_path` takes the workspace from, as the user set it: ``"--workdir"``,
    ``"ARCTL_HOME"`` or ``"default"`` (``./arctl-runs``). An error about the workspace names this, never
    an option the user did not use."""
    if workdir:
        return "--workdir"
    return HOME_ENV if os.environ.get(HOME_ENV) else "default"


def workdir_named(root: str | Path, origin: str | None) -> str:
    """The workspace ``root`` as an error names it, with where it came from (:func:`workdir_origin`):
    ``"--workdir /x"``, ``"ARCTL_HOME=/x"``, ``"the default workspace ./arctl-runs (/cwd/arctl-runs)"``,
    else (a workspace built from a path, not from the command line) ``"workspace /x"``."""
    if origin == "--workdir":
        return f"--workdir {root}"
    if origin == HOME_ENV:
        return f"{HOME_ENV}={root}"
    if origin == "default":
        return f"the default workspace ./{DEFAULT_WORKDIR} ({root})"
    return f"workspace {root}"


def workdir_remedy(origin: str | None) -> str:
    """What the user does about a workspace folder that cannot be used, by where it came from."""
    if origin == "--workdir":
        return "choose another with --workdir"
    if origin == HOME_ENV:
        return f"point {HOME_ENV} at another folder (or give --workdir DIR)"
    if origin == "default":
        return f"move ./{DEFAULT_WORKDIR} aside, or give --workdir DIR (or set {HOME_ENV})"
    return f"choose another with --workdir (or {HOME_ENV})"


def cache_root() -> Path:
    """The user-level cache shared by every workspace: ``$ARCTL_CACHE``, else
    ``$XDG_CACHE_HOME/arctl``, else ``~/.cache/arctl``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "arctl"


PROBE_PREFIX = ".arctl-probe."  # the file folder_problem creates and removes at once (a folder's own listing skips it)


def writable_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder this process can create files in, or, where it does not exist yet,
    whether it could be made there: :func:`folder_problem` has nothing to say."""
    return folder_problem(path) is None


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be a folder this process creates files in, or None. Where it does not exist
    yet, its nearest existing ancestor is asked (where it would be made): ``"/x/f is a file, not a
    folder"``, ``"cannot create files in /mnt/ro (Read-only file system)"``, or the system's words for a
    name it refuses (``"File name too long"``). Tried with a file created and removed at once (named
    ``PROBE_PREFIX...``), not inferred from modes: root, ACLs and read-only mounts answer differently."""
    place = Path(path)
    try:
        while not place.exists() and place != place.parent:
            place = place.parent
        if not place.is_dir():
            return f"{place} is a file, not a folder"
        fd, name = tempfile.mkstemp(dir=place, prefix=PROBE_PREFIX)
        os.close(fd)
        os.unlink(name)
        return None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            return err.strerror or str(err)
        return f"cannot create files in {place} ({err.strerror or err})"


def open_lock(path: str | Path):
    """``path`` opened to be ``flock``ed: for writing where it can be (NFS emulates flock with POSIX locks,
    and an exclusive one needs a writable descriptor: EBADF on a read-only one; from a review, the local
    slots silently stopped locking there), else read-only (another user's file, which a local lock needs no
    write access to), created (mode 0644) where missing. An existing file is opened without ``O_CREAT``,
    which fs.protected_regular refuses for another user's file in a sticky folder such as /tmp. Raises OSError."""
    for flags in (os.O_RDWR, os.O_RDONLY):
        try:
            fd = os.open(path, flags)
            break
        except PermissionError:
            continue
        except FileNotFoundError:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            break
    else:
        fd = os.open(path, os.O_RDONLY)  # raises: the file is there and cannot be opened at all
    return os.fdopen(fd, "rb")


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
        fh = open_lock(folder / f"{key}.lock")
    except OSError:  # a user cache that cannot be written (a read-only home): no lock, as before it existed
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

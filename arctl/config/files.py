"""Writing a file so that readers see the old content or the new, never half of it, and a failed write
(a full disk, a read-only folder) leaves no temporary file behind, nor, once the file is written again,
a kill: the one way arctl writes the files others read (status.json, config.yaml, checkpoints, caches,
datasets)."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# what the machine says when a path cannot be used: a full disk, a read-only or foreign folder, a file
# where a folder should be, a name too long. The user can act on each; none is a bug of arctl's
PLACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                          errno.EISDIR, errno.ENAMETOOLONG, errno.ENOENT, errno.EEXIST, errno.EIO})


TEMP_SUFFIX = ".tmp"
STALE_LEGACY_TEMP_S = 24 * 3600.0  # a temporary file named before its writer's pid was in its name: this old is no
# live writer's (a writer's own writes keep its file's time fresh)
# ".<target>.<pid>-<place>.<8 random>.tmp" (replacing); before, ".<target>.<8 random>.tmp"
_TEMP_MIDDLE = re.compile(r"^(?:(\d+)-([0-9a-f]{8})\.)?[a-z0-9_]{8}$")
_cleaned: set[str] = set()  # the targets this process has looked beside (once each: status.json is written often)
# folder -> the names of its hidden temporary files when this process first wrote there: listed once (a folder of
# thousands of files written one by one, an export's, was listed again for each)
_listed: dict[str, list[str]] = {}
_PLACE: str | None = None  # :func:`_writer_place`, once asked
_IDENTITY: list[str | None] = []  # :func:`machine_identity`, once asked
_PLATFORM_UUID = re.compile(r'"IOPlatformUUID"\s*=\s*"([^"]+)"')


def machine_identity() -> str | None:
    """This machine's own identity where it is safe and stable, recorded beside a host name (status.json's
    ``host_id``, a claim token, the local slots): on macOS its IOPlatformUUID (``ioreg``), which stays when the
    host name changes, as a Mac's does with the network it joins (DHCP, reverse DNS, ``LocalHostName.local``); from
    a hunt: a Mac that changed networks took its own local jobs for another host's, RUNNING for ever, and a relaunch
    trained one run twice. None elsewhere, and where ``ioreg`` cannot say: on Linux, containers of one machine share
    its boot id and often an image's /etc/machine-id while their pids are not each other's, so such an identity
    would take another container's live job for a dead one here. Asked once per process."""
    if not _IDENTITY:
        found = None
        if sys.platform == "darwin":
            try:
                out = subprocess.run(["ioreg", "-rd1", "-c", "IOPlatformExpertDevice"], capture_output=True,
                                     text=True, timeout=10).stdout
                found = m.group(1) if (m := _PLATFORM_UUID.search(out)) else None
            except (OSError, subprocess.SubprocessError, UnicodeError):
                found = None
        _IDENTITY.append(found)
    return _IDENTITY[0]


def is_this_host(host: str | None, identity: str | None) -> bool:
    """Is a process recorded as of host name ``host`` and :func:`machine_identity` ``identity`` (None: none
    recorded) one of this machine's? Its host name is this one's, or both identities are recorded and the
    same (a Mac whose name changed since); a record without one is judged by the name alone, as before."""
    return host == socket.gethostname() or (identity is not None and identity == machine_identity())


def _writer_place() -> str:
    """8 hex digits naming where this process's pid means this process: its host (its :func:`machine_identity`
    where it has one, else its name), the host's boot and its pid namespace (a container on the same host, a
    workspace on a disk other hosts mount), so that a pid in a temporary file's name is only ever looked up where it
    is this process's."""
    global _PLACE
    if _PLACE is None:
        parts = [machine_identity() or socket.gethostname()]
        for read in (lambda: Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                     lambda: str(os.stat("/proc/self/ns/pid").st_ino)):
            try:
                parts.append(read())
            except OSError:  # not Linux: the host's name alone
                parts.append("")
        _PLACE = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]
    return _PLACE


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists here (one of another user's does too). A number no pid can be (from a
    review: a temporary file named ``.status.json.99999999999999999999-<place>.<random>.tmp``, on which
    ``os.kill`` raised OverflowError after a write had succeeded) is taken as alive: it names no writer here
    that died, so its file is left, as another host's is."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # (EPERM: another user's process; too large for a pid_t)
        return True
    return True


def remove_stale_temps(path: str | Path) -> list[Path]:
    """Remove the temporary files of :func:`replacing` beside ``path`` that no live process writes: those
    whose writer (its pid, on this host and pid namespace: :func:`_writer_place`) has died, and ones named
    before the pid was in the name that have not changed for :data:`STALE_LEGACY_TEMP_S`. A live writer's,
    another host's and an unknown one's are kept. Once per target and process, after a write of it succeeded;
    returns what it removed. From a hunt: `arctl data prepare` killed (kill -9) mid-write left a hidden 3.8 MB
    ``.train.parquet.<random>.tmp`` that every later run kept."""
    path = Path(path)
    key = str(path.absolute())
    if key in _cleaned:
        return []
    _cleaned.add(key)
    folder = str(path.parent.absolute())
    if folder not in _listed:
        try:
            with os.scandir(folder) as entries:
                _listed[folder] = [e.name for e in entries if e.name.startswith(".") and e.name.endswith(TEMP_SUFFIX)]
        except OSError:
            _listed[folder] = []
    prefix, place, now, removed = f".{path.name}.", _writer_place(), time.time(), []
    for name in [n for n in _listed[folder] if n.startswith(prefix)]:
        m = _TEMP_MIDDLE.match(name[len(prefix):-len(TEMP_SUFFIX)])
        if m is None:  # another target's (".a.1.<...>.tmp" beside "a"), or not ours
            continue
        temp = path.parent / name
        try:
            st = os.lstat(temp)
            if m.group(1) is not None:
                stale = m.group(2) == place and int(m.group(1)) != os.getpid() and not pid_exists(int(m.group(1)))
            else:
                stale = now - st.st_mtime > STALE_LEGACY_TEMP_S
            if stale and stat.S_ISREG(st.st_mode):
                os.unlink(temp)
                removed.append(temp)
        except OSError:  # gone meanwhile, or not ours to remove: nothing to do
            pass
        _listed[folder].remove(name)
    return removed


_TEMP_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"  # a temporary name's 8 random characters (mkstemp's)
_PROC_STATUS = "/proc/self/status"  # where Linux says this process's umask ("Umask:\t0022") without changing it
_UMASK: list[int] = []  # where it does not: the umask as first read by setting it (once per process)


def umask() -> int:
    """This process's umask. Read from :data:`_PROC_STATUS` where the kernel says it (Linux 4.7+), since
    ``os.umask`` can only read it by setting it, process-wide, which races every other thread's file creation
    (a file made in between would get the stand-in's mode); elsewhere read that way once and remembered."""
    try:
        with open(_PROC_STATUS, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    if not _UMASK:
        old = os.umask(0o077)
        os.umask(old)
        _UMASK.append(old)
    return _UMASK[0]


def file_mode() -> int:
    """The mode a file this process creates gets (0666 less the umask): what a file a library writes with a fixed
    mode (safetensors' 0600) is given, so it is shared as the user's other files are."""
    return 0o666 & ~umask()


def _new_temp(path: Path, mode: int) -> Path:
    """A new empty file beside ``path``, ``.<name>.<pid>-<place>.<8 random>.tmp``, created with ``mode`` less the
    umask (by the kernel: nothing reads or changes the umask), and always writable by its owner, who writes it
    next."""
    prefix = f".{path.name}.{os.getpid()}-{_writer_place()}."
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = path.parent / f"{prefix}{''.join(secrets.choice(_TEMP_LETTERS) for _ in range(8))}{TEMP_SUFFIX}"
        try:
            fd = os.open(name, flags, mode)
        except FileExistsError:
            continue
        try:
            if os.fstat(fd).st_mode & 0o600 != 0o600:  # a umask that takes the owner's own write (0277)
                os.fchmod(fd, (mode & ~umask()) | 0o600)
        finally:
            os.close(fd)
        return name
    raise FileExistsError(errno.EEXIST, "No usable temporary file name found", str(path))


@contextmanager
def replacing(path: str | Path, mode: int = 0o666, durable: bool = False) -> Iterator[Path]:
    """``with replacing(p) as tmp: write tmp`` — ``tmp`` (a new file beside ``p``) replaces ``p`` when
    the block ends; if the block raises, ``tmp`` is removed and ``p`` is left as it was. ``durable``:
    ``tmp`` and then the folder are flushed to disk (fsync) around the rename, so that a machine that
    crashes after it has the new file (a checkpoint before the older one is deleted). ``tmp`` is named
    ``.<name>.<pid>-<place>.<random>.tmp``: the writer's pid, so that a later write of ``p`` removes what a killed
    writer left (:func:`remove_stale_temps`) and never a live one's. The file gets ``mode`` less the umask, as any
    file the user makes: group-writable in a workspace a group shares (umask 002), private under umask 077 (from a
    hunt: it was 0644 whatever the umask)."""
    path = Path(path)
    try:
        tmp = _new_temp(path, mode)
    except OSError as err:  # name the file the caller writes, not a temporary name it never sees
        raise OSError(err.errno, err.strerror, str(path)) from err
    try:
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
    remove_stale_temps(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: str | bytes, mode: int = 0o666, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one step (:func:`replacing`; ``mode`` less the
    umask)."""
    with replacing(path, mode, durable) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def create_file(path: str | Path, mode: int = 0o666) -> bool:
    """Create ``path`` empty with ``mode`` less the umask, where nothing is there; True when this call
    made it. For a file a library would create with a fixed mode: SQLite makes a database 0644 whatever
    the umask (from a hunt: in a group's shared workspace, ``chmod 2775`` and ``umask 002``, every other
    file was group-writable and registry.sqlite was not, so no other member could launch), and makes its
    ``-wal`` and ``-shm`` files with the database's mode. Created first, it has the mode of every file the
    user makes. Any other failure (a read-only folder, a full disk, a file in place of a folder) is left
    to the open that follows, which says it in its own words."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError:
        return False
    os.close(fd)
    return True


def _name_of(lookup, number: int) -> str:
    try:
        return lookup(number)[0]
    except (KeyError, OverflowError):  # an id the machine has no name for (a copied or NFS folder)
        return str(number)


def on_read_only_mount(path: str | Path) -> bool:
    """Whether ``path`` is on a file system mounted read-only (no one writes it, whatever the modes say); False
    where it cannot be asked (no such path)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def not_writable(path: str | Path) -> str | None:
    """Why this process cannot write the existing file ``path``: whose it is, its group and mode, and what its
    owner can do (``"it belongs to ann (group lab), mode -rw-r--r--, which bob cannot write: ann can let the
    group write it (chmod g+w /w/registry.sqlite)"``), or None: it can, it is on a read-only mount, or there is
    no such file. From a hunt: in a workspace a group shares, another member's 0644 registry failed a launch
    "the workspace is read-only", which sent the user to the wrong fix."""
    try:
        st = os.stat(path)
        if os.access(path, os.W_OK) or on_read_only_mount(path):  # (a read-only mount: no one's mode)
            return None
    except OSError:
        return None
    return _whose(path, st, "write", lambda owner: (
        f"{owner} can let the group write it (chmod g+w {path}; a workspace a group shares wants its members' "
        "umask at 002)"), lambda owner: f"{owner} can give it a group you are in, writable (chgrp GROUP {path}; "
                                        f"chmod g+w {path})")


def not_readable(path: str | Path, fix: str | Path | None = None) -> str | None:
    """Why this process cannot read the existing file ``path`` (a folder: list and enter it), in
    :func:`not_writable`'s words: ``"it belongs to ann (group lab), mode -rw-------, which bob cannot read: ann can
    let the group read it (chmod -R g+rX /c/entry)"``, the ``chmod`` given for ``fix`` (a folder above ``path``
    whose whole tree the owner opens) where one is given; or None: it can, or there is no such file. From a hunt:
    another member's 0600 weights in a warm-up cache a group shares failed the job "set ARCTL_CACHE to a folder
    you can write", a folder that was writable."""
    try:
        st = os.stat(path)
        if os.access(path, os.R_OK | (os.X_OK if stat.S_ISDIR(st.st_mode) else 0)):
            return None
    except OSError:
        return None
    target, flag = (fix, "-R ") if fix is not None else (path, "")
    return _whose(path, st, "read", lambda owner: f"{owner} can let the group read it (chmod {flag}g+rX {target})",
                  lambda owner: f"{owner} can give it a group you are in, readable (chgrp {flag}GROUP {target}; "
                                f"chmod {flag}g+rX {target})")


def _whose(path: str | Path, st: os.stat_result, verb: str, group_fix, other_fix) -> str:
    """The words of :func:`not_writable` and :func:`not_readable`: ``path`` (``st``) belongs to its owner, whom
    ``group_fix(owner)`` names where this user is in the file's group, else ``other_fix(owner)``."""
    mode = stat.filemode(st.st_mode)
    try:
        import grp
        import pwd
    except ImportError:  # pragma: no cover - not a POSIX system
        return f"its mode is {mode}, which this user cannot {verb}"
    owner, group = _name_of(pwd.getpwuid, st.st_uid), _name_of(grp.getgrgid, st.st_gid)
    me = _name_of(pwd.getpwuid, os.geteuid())
    if st.st_uid == os.geteuid():  # the user's own, without the owner's bit (a chmod a-w): the group is no answer
        bit = "w" if verb == "write" else ("rX" if stat.S_ISDIR(st.st_mode) else "r")
        return (f"it is {me}'s own (group {group}), mode {mode}, without its owner's {verb} permission: "
                f"chmod u+{bit} {path}")
    fix = group_fix(owner) if st.st_gid in {os.getegid(), *os.getgroups()} else other_fix(owner)
    return f"it belongs to {owner} (group {group}), mode {mode}, which {me} cannot {verb}: {fix}"


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
TINY_WARMUP_CACHE = "tiny-warmup"  # the tiny backend's warm-ups, under cache_root() (arctl.backends.tiny.warmup)


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


def cache_named() -> str:
    """The user cache as an error names it, with the setting it comes from (:func:`cache_root`):
    ``"ARCTL_CACHE=/x"``, ``"XDG_CACHE_HOME=/y (its arctl/: /y/arctl)"`` or ``"~/.cache/arctl
    (/home/u/.cache/arctl)"``. From a hunt: a job failed "Permission denied: '.../tiny-warmup'", naming
    none of them, so the user could not tell which to change."""
    if os.environ.get(CACHE_ENV):
        return f"{CACHE_ENV}={cache_root()}"
    if os.environ.get("XDG_CACHE_HOME"):
        return f"XDG_CACHE_HOME={os.environ['XDG_CACHE_HOME']} (its arctl/: {cache_root()})"
    return f"~/.cache/arctl ({cache_root()})"


CACHE_REMEDY = f"set {CACHE_ENV} to a folder you can write"


def cache_problem(sub: str = "") -> str | None:
    """Why the user cache's folder ``sub`` (e.g. :data:`TINY_WARMUP_CACHE`) cannot be written, as one
    line naming the setting it comes from and what to do (:func:`folder_problem`), or None."""
    folder = cache_root() / sub if sub else cache_root()
    if problem := folder_problem(folder):
        return f"the user cache {cache_named()} cannot be used: {problem} — {CACHE_REMEDY}"
    return None


PROBE_PREFIX = ".arctl-probe."  # the file folder_problem creates and removes at once (a folder's own listing skips it)


def writable_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder this process can create files in, or, where it does not exist yet,
    whether it could be made there: :func:`folder_problem` has nothing to say."""
    return folder_problem(path) is None


def nearest_existing(path: str | Path) -> Path:
    """``path`` itself where it exists, else its nearest existing ancestor (where it would be made; ``/`` at
    worst). Relative paths are asked as given (from the current folder)."""
    place = Path(path)
    while not place.exists() and place != place.parent:
        place = place.parent
    return place


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be a folder this process creates files in, or None. Where it does not exist
    yet, its nearest existing ancestor is asked (where it would be made): ``"/x/f is a file, not a
    folder"``, ``"cannot create files in /mnt/ro (Read-only file system)"``, or the system's words for a
    name it refuses (``"File name too long"``). Tried with a file created and removed at once (named
    ``PROBE_PREFIX...``), not inferred from modes: root, ACLs and read-only mounts answer differently."""
    place = Path(path)
    try:
        place = nearest_existing(place)
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
    write access to), created where missing with mode 0666 less the umask (in a workspace shared by a group,
    the local queue's slot files are then group-writable like its other files: 0644 left the other members
    a read-only descriptor, which NFS cannot lock exclusively). An existing file is opened without
    ``O_CREAT``, which fs.protected_regular refuses for another user's file in a sticky folder such as /tmp.
    Raises OSError."""
    for flags in (os.O_RDWR, os.O_RDONLY):
        try:
            fd = os.open(path, flags)
            break
        except PermissionError:
            continue
        except FileNotFoundError:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
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
    cannot be written, the block runs unlocked, and so it does, with a warning on stderr, where the user
    cache's file system has no locks (Lustre mounted noflock: ENOSYS; NFS without lockd: ENOLCK; from a
    hunt, `arctl export` failed there with a traceback)."""
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
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError as err:
            if err.errno not in NO_LOCK_ERRNOS:
                raise
            no_lock_warning(folder / f"{key}.lock", err, name)
            locked = False
        else:
            locked = True
        try:
            yield
        finally:
            if locked:
                fcntl.flock(fh, fcntl.LOCK_UN)


# what flock says on a file system that has no locks: Lustre mounted noflock (ENOSYS), NFS without its lock
# daemon (ENOLCK), FUSE and others (EOPNOTSUPP, EINVAL)
NO_LOCK_ERRNOS = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})


def no_lock_warning(path: str | Path, err: OSError, what: str) -> None:
    """One stderr line: ``what`` runs without the lock file ``path``, whose file system refused to lock it."""
    print(f"warning: cannot lock {path} ({err.strerror or os.strerror(err.errno or 0)}: its file system has no "
          f"locks): {what} runs unlocked, so two at once may overwrite each other's files; set {CACHE_ENV} to a "
          "folder on a local disk to lock", file=sys.stderr, flush=True)

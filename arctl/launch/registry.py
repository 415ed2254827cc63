"""The run registry: one SQLite file (WAL) per workspace, one row per run.

Concurrency: every write is a short ``BEGIN IMMEDIATE`` transaction (one that waits for another process's
for :data:`WRITE_WAIT_S` in all gives up naming that process; an open whose file has its tables writes nothing, so
what only reads never waits), ``run_id`` is the primary key, and a run is only submitted by the process that
*claimed* it (moved it to SUBMITTING with its own token inside a transaction). So N concurrent ``arctl sweep`` of the same sweep create
and submit each cell exactly once. Every writable open holds a shared ``flock`` on the workspace
folder (:func:`lock_folder`) and ``arctl repair`` an exclusive one while it replaces the file: a
process that opens the registry during a repair waits and then opens the new file, instead of
writing into the old one the repair moves aside (from a hunt: such a launch's run trained recorded
only in ``registry.sqlite.damaged-*``).

The file is input like any other: a damaged file, another version's schema, a read-only workspace,
a full disk or a row edited by hand is a :class:`RegistryError` (one line naming the file, what is
wrong and how to recover: ``arctl repair`` rebuilds the registry from the run folders), never a
traceback, and no value read back (a job id, a run id) reaches a command line or a path unchecked.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import random
import re
import shutil
import socket
import sqlite3
import sys
import time
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

from arctl.config.files import create_file, is_this_host, machine_identity, not_writable
from arctl.launch import states
from arctl.launch.run_id import SAFE_ID
from arctl.launch.status_file import NONFINITE_TEXTS
from arctl.track.identity import wandb_id

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    experiment   TEXT NOT NULL,
    arm          TEXT NOT NULL,
    seed         INTEGER NOT NULL,
    sweep        TEXT,
    scale        TEXT,
    backend      TEXT,
    state        TEXT NOT NULL,
    executor     TEXT,
    job_id       TEXT,
    attempts     INTEGER NOT NULL DEFAULT 0,
    generation   INTEGER NOT NULL DEFAULT 0,
    claim        TEXT,
    created_at   REAL,
    submitted_at REAL,
    started_at   REAL,
    ended_at     REAL,
    updated_at   REAL,
    step         INTEGER,
    metric_name  TEXT,
    metric_value REAL,
    metric_nonfinite TEXT,
    wandb_id     TEXT,
    error        TEXT,
    phase        TEXT,
    cancel_requested REAL,
    warning      TEXT,
    before_claim TEXT
);
CREATE TABLE IF NOT EXISTS members (
    name   TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (name, run_id)
);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs(experiment);
"""

STALE_CLAIM_S = 600.0
# SLURM's, a local submitit controller (its pid), the local queue, the debug executor (in-process)
JOB_ID = re.compile(rf"^({states.SLURM_JOB}|queue:\d+|debug)\Z")  # \Z: $ also matches before a trailing newline
COLUMN_TYPES = {"INTEGER": ("seed", "attempts", "generation", "step"),
                "REAL": ("created_at", "submitted_at", "started_at", "ended_at", "updated_at", "metric_value",
                         "cancel_requested")}


class RegistryError(Exception):
    """The registry cannot be used as it is: one line naming the file, what is wrong, how to recover.
    ``kind``: "full" (no space), "readonly", "locked", "damaged"."""

    def __init__(self, message: str, kind: str = "damaged"):
        super().__init__(message)
        self.kind = kind


def repair_hint(path: Path) -> str:
    from arctl.launch.workspace import workdir_arg  # (workspace.py does not import this module)

    return f"`arctl repair{workdir_arg(path.parent, stored=True)}` rebuilds it from the run folders (the old file is kept beside it)"


# what reading a damaged registry raises: SQLite's errors (a value that is not UTF-8 is one:
# OperationalError "Could not decode to UTF-8"), and the UnicodeDecodeError of an error message that
# quotes damaged schema text (Python decodes SQLite's messages as UTF-8)
DAMAGE = (sqlite3.Error, UnicodeDecodeError)


ROOMY_MIB = 1024  # free space on a disk that says it is full, above which an exceeded quota is the likelier cause


def _roomy(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent).free / 2**20 > ROOMY_MIB
    except OSError:
        return False


def _sqlite_problem(path: Path, err: Exception) -> RegistryError:
    """A one-line RegistryError for an SQLite error on the registry at ``path``."""
    if isinstance(err, UnicodeDecodeError):
        return RegistryError(f"{path} is damaged (SQLite read text that is not UTF-8): {repair_hint(path)}")
    msg = " ".join(str(err).split()) or type(err).__name__
    low = msg.lower()
    if "full" in low or "disk i/o" in low:
        try:
            free = f"{shutil.disk_usage(path.parent).free / 2**20:.1f} MiB free"
        except OSError:
            free = "free space unknown"
        # SQLite says "database or disk is full" of an exceeded quota too: with room on the disk, that is the likelier
        quota = " (with that much free, an exceeded disk quota? see `quota`)" if "full" in low and _roomy(path) else ""
        return RegistryError(f"{path}: {msg} ({free} there){quota}: free some space and run the command again", "full")
    writable = os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
    if "readonly" in low or "read-only" in low or ("unable to open" in low and not writable):
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if whose := not_writable(file):  # another user's file in a shared workspace, not a read-only one
                return RegistryError(f"{file}: {msg}: {whose}; commands that only read (arctl status, arctl logs, "
                                     "arctl report) still work", "readonly")
        return RegistryError(f"{path}: {msg}: the workspace is read-only; commands that only read "
                             "(arctl status, arctl logs, arctl report) still work", "readonly")
    if "locked" in low or "busy" in low:
        return RegistryError(f"{path}: {msg}: another arctl holds it for longer than a minute; run the command again",
                             "locked")
    return RegistryError(f"{path} is damaged ({msg}): {repair_hint(path)}")


# ` --workdir <root>` as a stored hint writes it: the root absolute and quoted as shlex.quote does (bare where every
# character is safe, else in single quotes, a quote in it as '"'"')
_NAMED_WORKDIR = re.compile(r""" --workdir (?:'[^']*'(?:"'"'[^']*')*|[\w@%+=:,./-]+)""", re.ASCII)


def in_workspace(text: str, root: Path) -> str:
    """``text``, a message kept in the workspace at ``root`` (a registry's error or warning, a job's status.json error),
    with the workspace its commands name (``--workdir <root>``: always the workspace it was written in,
    :func:`arctl.launch.workspace.workdir_arg` ``stored``) made ``root`` as it is reached now. From a hunt: in a copy
    of a workspace (``cp -a ws ws2``), `arctl status --workdir ws2` said "`arctl resume RUN --workdir ws` resumes
    it", which acts on the original."""
    if " --workdir " not in text:
        return text
    from arctl.launch.workspace import workdir_arg  # (workspace.py does not import this module)

    here = workdir_arg(root, stored=True)
    return _NAMED_WORKDIR.sub(lambda _: here, text)


def _guarded(method):
    """SQLite errors of a Registry method become one-line RegistryErrors."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except DAMAGE as err:
            raise _sqlite_problem(self.path, err) from None

    return wrapper


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_text(v) -> bool:
    return isinstance(v, str) and len(v) <= 100_000


_ROW_RULES = {  # column -> (rule, what it must be); None is allowed where the column is optional
    "run_id": (lambda v: isinstance(v, str) and SAFE_ID.match(v), "a run id"),
    "experiment": (lambda v: isinstance(v, str) and SAFE_ID.match(v), "a name"),
    "arm": (lambda v: isinstance(v, str) and SAFE_ID.match(v), "a name"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a seed"),
    "state": (lambda v: v in states.ALL, f"one of {', '.join(sorted(states.ALL))}"),
    "job_id": (lambda v: v is None or (isinstance(v, str) and JOB_ID.match(v)), "a job id"),
    "attempts": (lambda v: isinstance(v, int) and v >= 0, "a count"),
    "generation": (lambda v: isinstance(v, int) and v >= 0, "a count"),
    "step": (lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)), "a step"),
    "metric_nonfinite": (lambda v: v is None or v in NONFINITE_TEXTS, f"one of {', '.join(NONFINITE_TEXTS)}"),
    **{c: (lambda v: v is None or _is_number(v), "a number")
       for c in ("created_at", "submitted_at", "started_at", "ended_at", "updated_at", "metric_value", "cancel_requested")},
}
_TEXT_RULE = (lambda v: v is None or _is_text(v), "text")
HINTED = ("error", "warning")  # the columns whose text may name commands about the workspace (in_workspace)
_BEFORE_KEYS = ("state", "generation", "error", "cancel_requested")
LEGACY_CLAIM = ("claimed by a launch that died, of an arctl that did not record what the run was before; "
                "`arctl sweep`/`arctl resume` resumes it from its last checkpoint")


def _is_before_claim(v) -> bool:
    """JSON of what a run was before a claim: its state (None: the claim made the row), generation,
    error and cancel request, and the claim's token (other keys: a later arctl's, ignored)."""
    try:
        data = json.loads(v)
    except (TypeError, ValueError, RecursionError):
        return False
    return (isinstance(data, dict) and set(data) >= {*_BEFORE_KEYS, "claim"}
            and (data["state"] is None or data["state"] in states.ALL)
            and all(_ROW_RULES[k][0](data[k]) for k in ("generation", "cancel_requested"))
            and _TEXT_RULE[0](data["error"]) and _TEXT_RULE[0](data["claim"]))


def _before(rec: RunRecord | None, token: str) -> str:
    """``before_claim`` for a claim by ``token`` on ``rec`` as it is (None: a new run)."""
    was = {k: getattr(rec, k) for k in _BEFORE_KEYS} if rec else {"state": None, "generation": 0, "error": None,
                                                                 "cancel_requested": None}
    return json.dumps({**was, "claim": token})


_ROW_RULES["before_claim"] = (lambda v: v is None or (_is_text(v) and _is_before_claim(v)),
                              "what the run was before a claim (JSON)")


@dataclass
class RunRecord:
    run_id: str
    experiment: str
    arm: str
    seed: int
    state: str = states.SUBMITTING
    sweep: str | None = None
    scale: str | None = None
    backend: str | None = None
    executor: str | None = None
    job_id: str | None = None
    attempts: int = 0
    generation: int = 0
    claim: str | None = None
    created_at: float | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    updated_at: float | None = None
    step: int | None = None
    metric_name: str | None = None
    metric_value: float | None = None
    metric_nonfinite: str | None = None  # "nan", "inf" or "-inf" where the metric was no finite number (value None)
    wandb_id: str | None = None
    error: str | None = None
    phase: str | None = None  # what a running job does before its first step, e.g. "warming up 640/1200"
    cancel_requested: float | None = None  # when `arctl cancel` asked the job to stop (it ends CANCELLED)
    warning: str | None = None  # what the job warned about (e.g. a damaged checkpoint it skipped)
    # JSON: the state, generation, error and cancel request a claim took over (None: the claim made the
    # row). In the row itself, so a claim whose launch died is undone from the row alone (claim())
    before_claim: str | None = None

    @property
    def previous(self) -> dict | None:
        """What this run was before the claim on it holds (``before_claim``): its state (None: a new
        run), generation, error and cancel request; None where the row does not say (no claim, or a
        claim an arctl made that did not record it)."""
        was = json.loads(self.before_claim) if self.before_claim else None
        return was if was is not None and self.claim and was.get("claim") == self.claim else None

    def unclaimed(self) -> RunRecord | None:
        """This run as it was before the claim on it (None: the claim made the row, a new run). A
        claim that did not record it (an older arctl's) leaves the run FAILED with its generation:
        the next launch resumes it, as that arctl did."""
        was = self.previous
        if was is None:
            return replace(self, state=states.FAILED, error=LEGACY_CLAIM, claim=None, before_claim=None)
        if was["state"] is None:
            return None
        return replace(self, **{k: was[k] for k in _BEFORE_KEYS}, claim=None, before_claim=None)

    @property
    def wandb_run_id(self) -> str:
        """The W&B run id: the run id, suffixed after a --force rerun (a fresh W&B run); as W&B takes it
        (:func:`arctl.track.identity.wandb_id`)."""
        return wandb_id(self.run_id if not self.generation else f"{self.run_id}-g{self.generation}")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


COLUMNS = [f.name for f in fields(RunRecord)]


@dataclass(frozen=True)
class ClaimResult:
    claimed: list[RunRecord]  # this process must submit these
    skipped: list[tuple[RunRecord, str]]  # (current record, reason)


def new_claim_token() -> str:
    """``HOST:PID:RANDOM``; HOST is ``name@identity`` where the machine has a :func:`machine_identity` (a Mac)."""
    identity = machine_identity()
    return f"{socket.gethostname()}{f'@{identity}' if identity else ''}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claim_is_stale(record: RunRecord, now: float) -> bool:
    """A SUBMITTING claim whose owner died (same host, dead pid) or that is older than 10 min."""
    if record.state != states.SUBMITTING:
        return False
    if record.updated_at is not None and now - record.updated_at > STALE_CLAIM_S:
        return True
    try:
        host, pid, _ = (record.claim or "").split(":")
    except ValueError:
        return True
    name, _, identity = host.partition("@")  # (a claim of a machine without an identity, or of before it: its name)
    if not is_this_host(name, identity or None):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False


LOCK_WAIT_S = 60.0  # how long an open waits for a repair (SQLite's busy timeout is as long)
WRITE_WAIT_S = 60.0  # how long a write waits, in all, for another process's write transaction (:meth:`Registry.transaction`)
READ_WRITE_WAIT_S = 5.0  # how long the refresh of a command that only reads (status, logs) waits, then shows unsaved
SAY_WAIT_AFTER_S = 3.0  # a write that has waited this long says once, on stderr, which process it waits for
BUSY_STEP_S = 1.0  # SQLite's busy wait per try to take the write lock (between tries: the checks above)
_SCHEMA_NAMES = frozenset(re.findall(r"CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)", SCHEMA))
_SHM_WRITER = 120  # SQLite's WAL index (the -shm file): the byte a write transaction holds locked


def writer_pid(path: Path) -> int | None:
    """The pid of another process in a write transaction on the registry at ``path`` (its POSIX lock on the WAL
    index's write byte, as ``/proc/locks`` lists it), or None (none, or no /proc). Read from /proc, not asked
    with ``fcntl`` (F_GETLK): that needs the -shm file open, and closing it would drop this process's own SQLite
    locks on it."""
    try:
        shm = path.with_name(path.name + "-shm").stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    device = f"{os.major(shm.st_dev):02x}:{os.minor(shm.st_dev):02x}:{shm.st_ino}"
    for line in lines:
        words = line.split()
        if len(words) < 8 or words[1] != "POSIX" or words[3] != "WRITE" or words[5] != device:  # ("->": waits)
            continue
        try:
            pid, first = int(words[4]), int(words[6])
            last = None if words[7] == "EOF" else int(words[7])
        except ValueError:
            continue
        if pid != os.getpid() and first <= _SHM_WRITER and (last is None or _SHM_WRITER <= last):
            return pid
    return None


def _process_words(pid: int) -> str:
    """What process ``pid`` is, in a few words: its command line, shortened (printable characters only), or
    "unknown" where /proc does not say."""
    try:
        words = " ".join(os.fsdecode(Path(f"/proc/{pid}/cmdline").read_bytes()).split("\0")).strip()
    except OSError:
        return "unknown"
    words = "".join(c if c.isprintable() else "?" for c in words) or "unknown"
    return words if len(words) <= 80 else words[:77] + "..."


def _writer_words(path: Path) -> str:
    """"process PID (what it is)", of the process in a write transaction on the registry at ``path``."""
    pid = writer_pid(path)
    return "another process" if pid is None else f"process {pid} ({_process_words(pid)})"


def lock_folder(folder: Path, exclusive: bool, wait_s: float) -> int | None:
    """An open descriptor of ``folder`` holding its ``flock``: shared for a registry open, exclusive
    for ``arctl repair`` (:mod:`arctl.launch.repair`), which replaces the registry file: a process
    that had opened the old file would write into the copy the repair keeps aside. The folder, not
    the registry file: closing a descriptor of the file would drop SQLite's own (POSIX) locks on it,
    and a folder needs no file of its own (a read-only or exported workspace gets none). None where
    the file system has no ``flock`` (then nothing is excluded, as before this lock); raises
    BlockingIOError when another process holds it for longer than ``wait_s``."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise
            time.sleep(0.05)
        except OSError:  # no flock here (some network file systems)
            os.close(fd)
            return None


class Registry:
    """The run registry of a workspace (``registry.sqlite``). ``readonly``: open it without writing
    anything (a read-only workspace); every write then raises RegistryError. ``lock=False``: without
    the workspace folder's shared lock (:func:`lock_folder`): only for the file a repair writes
    beside the registry while it holds that lock exclusively."""

    def __init__(self, path: Path, readonly: bool = False, lock: bool = True):
        self.path = Path(path)
        self.readonly = readonly
        self.unsaved: str | None = None  # why a reading command's refresh could not save what it found (shown only)
        self.write_wait_s = WRITE_WAIT_S  # a reading command's refresh waits less (READ_WRITE_WAIT_S), then shows
        self._conn = None
        self._lock = None
        try:
            if lock and not readonly:
                self._lock = self._lock_folder()
            self._open()
        except DAMAGE as err:
            self.close()
            raise _sqlite_problem(self.path, err) from None
        except BaseException:
            self.close()
            raise

    @classmethod
    def for_reading(cls, path: Path) -> Registry:
        """The registry opened by what only reads it (a plan, a dry run): read-only where it cannot be
        written (an archive, a colleague's workspace: from a review, such a plan failed on the open),
        else as any open (which gives an emptied file its tables)."""
        path = Path(path)
        return cls(path, readonly=not (os.access(path.parent, os.W_OK) and os.access(path, os.W_OK)))

    def _open(self) -> None:
        if self.readonly:
            # while a writer has it open (its -wal and -shm files are there: a local queue, a launch that
            # waits keep it open for hours, their commits in the -wal file), read-only through them; else
            # immutable, the main file alone (a read-only open would create -wal/-shm files of this user,
            # which the workspace's owner could then not write)
            wal = [self.path.with_name(self.path.name + s) for s in ("-wal", "-shm")]
            for mode in ("mode=ro", "immutable=1") if all(p.exists() for p in wal) else ("immutable=1",):
                self._conn = sqlite3.connect(f"file:{self.path}?{mode}", uri=True, isolation_level=None,
                                             check_same_thread=False, timeout=60.0)
                self._conn.row_factory = sqlite3.Row
                try:
                    self._conn.execute("SELECT count(*) FROM runs").fetchone()  # a damaged file fails here
                    return
                except sqlite3.OperationalError as err:
                    if mode == "immutable=1" or "no such table" in str(err):
                        raise
                    self._conn.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        create_file(self.path)  # 0666 less the umask, as every file a user makes: SQLite alone makes it 0644
        self._conn = sqlite3.connect(str(self.path), timeout=WRITE_WAIT_S, isolation_level=None,
                                     check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._check_schema()  # before anything is written: a damaged or foreign file stays as it was
        mode = self._journal_mode_wal()
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a filesystem without shared memory
            raise RegistryError(f"{self.path}: SQLite could not switch to WAL mode (got {mode}); "
                                "put the workspace on a local filesystem")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        if self._schema_complete():  # what only reads never waits for another process's write lock
            return
        with self.transaction() as conn:
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    conn.execute(statement)
            self._add_missing_columns(conn)

    def _check_schema(self) -> None:
        """A file with a ``runs`` table lacking a column every arctl version had is damaged or foreign
        (reading the schema also fails on a file that is not SQLite at all). Both reads in one read
        transaction: another process creating the registry at this moment (its tables in one
        transaction) is seen before or after, never halfway (a "runs" table appearing between the two
        reads was taken for another program's database)."""
        self._conn.execute("BEGIN")
        try:
            have = {row[1] for row in self._conn.execute("PRAGMA table_info(runs)")}
            other = None if have else self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' LIMIT 1").fetchone()
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("COMMIT")
        missing = [c for c in ("run_id", "experiment", "arm", "seed", "state") if c not in have]
        if not have and other:
            raise RegistryError(f"{self.path} is a SQLite database without arctl's runs table (it has {other[0]!r}): "
                                f"not an arctl registry; {repair_hint(self.path)}")
        if have and missing:
            raise RegistryError(f"{self.path} has no column {missing[0]!r}: it is not an arctl registry, or damaged; "
                                f"{repair_hint(self.path)}")

    def _schema_complete(self) -> bool:
        """Whether the file has every table, index and column of :data:`SCHEMA` (a read: no write lock)."""
        names = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
        have = {row[1] for row in self._conn.execute("PRAGMA table_info(runs)")}
        return _SCHEMA_NAMES <= names and set(COLUMNS) <= have

    def _add_missing_columns(self, conn: sqlite3.Connection) -> None:
        """A registry of an older arctl gets the columns added since (NULL, or 0 for the counts)."""
        have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        for column in COLUMNS:
            if column in have:
                continue
            kind = next((k for k, cols in COLUMN_TYPES.items() if column in cols), "TEXT")
            default = " NOT NULL DEFAULT 0" if column in ("attempts", "generation") else ""
            conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}{default}")

    def _journal_mode_wal(self) -> str:
        """Switch a (new) database to WAL. Several processes opening a fresh registry at once may
        get "database is locked" here without the busy handler: retry with jittered backoff."""
        for attempt in range(400):
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                return mode
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err) or attempt == 399:
                    raise
                time.sleep(0.02 + random.random() * 0.08)
        return "unknown"  # pragma: no cover

    def _lock_folder(self) -> int | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return lock_folder(self.path.parent, exclusive=False, wait_s=LOCK_WAIT_S)
        except BlockingIOError:
            raise RegistryError(f"{self.path}: `arctl repair` has been rebuilding it for more than a minute; run "
                                "the command again when it has ended", "locked") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._lock is not None:  # after the connection: never open without the lock
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no upgrade deadlocks)."""
        if self.readonly:
            raise RegistryError(f"{self.path}: the workspace is read-only (or its disk is full); this command "
                                "writes to it (arctl status, arctl logs and arctl report only read)", "readonly")
        conn = self._conn
        self._begin_write(conn)
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _begin_write(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting for another process's write transaction at most :data:`WRITE_WAIT_S` in all
        (the writes of concurrent launches and jobs are short); after :data:`SAY_WAIT_AFTER_S`, one line on stderr
        names the process waited for; at the cap, a RegistryError ("locked") names it and what to do. From a hunt:
        a `sqlite3` shell left in a transaction made `arctl status`, `logs` and `cancel` hang silently, 60 s per
        try, for up to 100 tries."""
        start, said = time.monotonic(), False
        while True:
            left = self.write_wait_s - (time.monotonic() - start)
            conn.execute(f"PRAGMA busy_timeout={int(max(0.0, min(left, BUSY_STEP_S)) * 1000)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as err:  # busy for this try's busy_timeout: check, then try again
                if "locked" not in str(err) and "busy" not in str(err):
                    raise
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(WRITE_WAIT_S * 1000)}")
            waited = time.monotonic() - start
            if waited >= self.write_wait_s:
                raise RegistryError(
                    f"{self.path}: {_writer_words(self.path)} has held its write lock for more than "
                    f"{self.write_wait_s:g} s (a hung arctl, a `sqlite3` shell in a transaction, a database browser?): "
                    "end its transaction or stop that process, then run the command again", "locked")
            if not said and waited >= SAY_WAIT_AFTER_S:
                said = True
                print(f"waiting for {_writer_words(self.path)} to release {self.path} (it holds its write lock; "
                      f"at most {self.write_wait_s:g} s)", file=sys.stderr, flush=True)
            time.sleep(0.02 + random.random() * 0.08)

    # ---- reading -------------------------------------------------------------------------------

    def _record(self, row: sqlite3.Row) -> RunRecord:
        """A row as a RunRecord, every value checked (the file may have been edited or damaged)."""
        have = row.keys()
        values = {k: (row[k] if k in have else None) for k in COLUMNS}
        for k in ("attempts", "generation"):
            values[k] = values[k] or 0
        for column, value in values.items():
            ok, what = _ROW_RULES.get(column, _TEXT_RULE)
            if not ok(value):
                run = values["run_id"] if isinstance(values["run_id"], str) and len(values["run_id"]) < 300 else "?"
                raise RegistryError(f"{self.path}: run {run!r} has {column}={_short(value)}, not {what} (the registry "
                                    f"was edited or is damaged): {repair_hint(self.path)}")
        for column in HINTED:
            if values[column]:
                values[column] = in_workspace(values[column], self.path.parent)
        return RunRecord(**values)

    @_guarded
    def get(self, run_id: str) -> RunRecord | None:
        row = self._conn.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else self._record(row)

    @_guarded
    def find(self, text: str) -> list[RunRecord]:
        """Runs whose id equals or starts with ``text``, case for case (from a hunt: SQL's ``LIKE`` ignores ASCII case,
        so ``arctl cancel LT_A_S0_ABC`` cancelled run lt_a_s0_abc, an id it neither equals nor starts)."""
        exact = self.get(text)
        if exact is not None:
            return [exact]
        rows = self._conn.execute(
            "SELECT * FROM runs WHERE substr(run_id, 1, length(?)) = ? ORDER BY run_id", (text, text)
        ).fetchall()
        return [self._record(r) for r in rows]

    @_guarded
    def list(self, name: str | None = None, states_in: Iterable[str] | None = None) -> list[RunRecord]:
        """All runs, or those of sweep/experiment ``name``; ordered by experiment, arm, seed."""
        sql, args = "SELECT * FROM runs", []
        where = []
        if name:
            where.append("(experiment=? OR run_id IN (SELECT run_id FROM members WHERE name=?))")
            args += [name, name]
        if states_in is not None:
            chosen = list(states_in)
            where.append(f"state IN ({','.join('?' * len(chosen))})")
            args += chosen
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY experiment, arm, seed, run_id"
        return [self._record(r) for r in self._conn.execute(sql, args).fetchall()]

    @_guarded
    def names(self) -> set[str]:
        rows = self._conn.execute("SELECT DISTINCT name FROM members").fetchall()
        return {r[0] for r in rows} | {r[0] for r in self._conn.execute("SELECT DISTINCT experiment FROM runs")}

    # ---- writing -------------------------------------------------------------------------------

    @_guarded
    def claim(
        self,
        wanted: list[RunRecord],
        token: str,
        force: bool | Collection[str] = False,
        members: Iterable[str] = (),
        relaunch: frozenset[str] = states.RELAUNCHABLE,
    ) -> ClaimResult:
        """Atomically claim the runs this process should submit.

        New runs are inserted; runs in ``relaunch`` states (or any inactive state with
        ``force``: every run, or the run ids it holds) are re-claimed; active runs (claimed by someone
        else, pending, running) and completed runs are skipped with a reason. ``members`` names
        (sweep/experiment) are attached to every wanted run.
        """
        now = time.time()
        claimed, skipped = [], []
        with self.transaction() as conn:
            for want in wanted:
                forced = force if isinstance(force, bool) else want.run_id in force
                row = conn.execute("SELECT * FROM runs WHERE run_id=?", (want.run_id,)).fetchone()
                for name in members:
                    conn.execute("INSERT OR IGNORE INTO members(name, run_id) VALUES (?, ?)", (name, want.run_id))
                if row is None:
                    claimed.append(self._insert(conn, want, token, now))
                    continue
                current = self._record(row)
                if claim_is_stale(current, now):  # its launch died: undo that claim first, then decide
                    current = self._undo_claim(conn, current)
                    if current is None:  # the dead launch made the row: a new run again
                        conn.execute("DELETE FROM runs WHERE run_id=?", (want.run_id,))
                        claimed.append(self._insert(conn, want, token, now))
                        continue
                if current.state in states.ACTIVE:
                    skipped.append((current, f"already {current.state.lower()}"))
                    continue
                if current.state == states.COMPLETED and not forced:
                    skipped.append((current, "completed" if force else "completed (use --force to rerun)"))
                    continue
                if current.state not in relaunch and current.state != states.COMPLETED and not forced:
                    skipped.append((current, f"{current.state.lower()}"))
                    continue
                generation = current.generation + (1 if forced and current.state == states.COMPLETED else 0)
                before = _before(current, token)
                conn.execute(
                    "UPDATE runs SET state=?, claim=?, updated_at=?, generation=?, error=NULL, cancel_requested=NULL, "
                    "before_claim=? WHERE run_id=?",
                    (states.SUBMITTING, token, now, generation, before, current.run_id),
                )
                current.state, current.claim, current.updated_at = states.SUBMITTING, token, now
                current.generation, current.error, current.cancel_requested = generation, None, None
                current.before_claim = before
                claimed.append(current)
        return ClaimResult(claimed, skipped)

    @staticmethod
    def _insert(conn: sqlite3.Connection, want: RunRecord, token: str, now: float) -> RunRecord:
        """Insert ``want`` as a new run claimed by ``token``."""
        rec = RunRecord(**{**want.as_dict(), "state": states.SUBMITTING, "claim": token, "created_at": now,
                           "updated_at": now, "before_claim": _before(None, token)})
        values = rec.as_dict()
        conn.execute(f"INSERT INTO runs({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                     [values[c] for c in COLUMNS])
        return rec

    @staticmethod
    def _undo_claim(conn: sqlite3.Connection, rec: RunRecord) -> RunRecord | None:
        """Give the run of claim ``rec`` what it was before (its ``before_claim``): the row as it is now,
        or None where the claim made the row (which is left to the caller)."""
        was = rec.unclaimed()
        if was is not None:
            conn.execute("UPDATE runs SET state=?, claim=NULL, generation=?, error=?, cancel_requested=?, "
                         "before_claim=NULL WHERE run_id=?", (*(getattr(was, k) for k in _BEFORE_KEYS), rec.run_id))
        return was

    @_guarded
    def add_members(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Attach runs to names: ``(name, run_id)`` pairs, e.g. an experiment whose shared arm
        another experiment's run serves (``share_arms``); pairs already there are kept."""
        pairs = list(pairs)
        if not pairs:
            return
        with self.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO members(name, run_id) VALUES (?, ?)", pairs)

    def update(self, run_id: str, **values) -> None:
        self.update_many([(run_id, values)])

    @_guarded
    def update_many(self, updates: Iterable[tuple[str, dict]]) -> None:
        """Apply ``(run_id, {column: value})`` updates in one transaction."""
        updates = [(rid, vals) for rid, vals in updates if vals]
        if not updates:
            return
        now = time.time()
        with self.transaction() as conn:
            for run_id, values in updates:
                sets, params = _set_clause(values, now)
                conn.execute(f"UPDATE runs SET {sets} WHERE run_id=?", [*params, run_id])

    @_guarded
    def update_many_if(self, updates: Iterable[tuple[str, dict, dict]]) -> list[str]:
        """Apply ``(run_id, expect, values)`` updates in one transaction, each only where the row's
        columns are still as ``expect`` says (what the caller read: a launch in another process may
        have resubmitted the run meanwhile). Returns the run ids left as they are."""
        updates = [(rid, expect, vals) for rid, expect, vals in updates if vals]
        if not updates:
            return []
        now, stale = time.time(), []
        with self.transaction() as conn:
            for run_id, expect, values in updates:
                _check_columns(expect)
                sets, params = _set_clause(values, now)
                where = "".join(f" AND {k} IS ?" for k in expect)
                cur = conn.execute(f"UPDATE runs SET {sets} WHERE run_id=?{where}", [*params, run_id, *expect.values()])
                if cur.rowcount != 1:
                    stale.append(run_id)
        return stale

    @_guarded
    def update_claimed(self, token: str, updates: Iterable[tuple[str, dict]],
                       cancelled: dict | None = None) -> tuple[list[str], list[str]]:
        """Apply ``(run_id, {column: value})`` updates in one transaction to the rows claim ``token``
        still holds; a held row whose cancel was asked meanwhile (``cancel_requested``: `arctl cancel`
        during the launch) gets its update with ``cancelled`` over it instead. Returns (the run ids the
        claim no longer holds, left as they are; the run ids given ``cancelled``)."""
        lost, stopped = [], []
        updates = list(updates)
        for _, values in [*updates, ("", cancelled or {})]:  # every name, also of a row the claim lost
            _check_columns(values)
        now = time.time()
        with self.transaction() as conn:
            for run_id, values in updates:
                row = conn.execute("SELECT cancel_requested FROM runs WHERE run_id=? AND claim=?",
                                   (run_id, token)).fetchone()
                if row is None:
                    lost.append(run_id)
                    continue
                if row[0] is not None and cancelled is not None:
                    values = {**values, **cancelled}
                    stopped.append(run_id)
                sets, params = _set_clause(values, now)
                conn.execute(f"UPDATE runs SET {sets} WHERE run_id=?", [*params, run_id])
        return lost, stopped

    @_guarded
    def update_if(self, run_id: str, expect: dict, values: dict, touch: bool = True) -> bool:
        """Apply ``values`` to run ``run_id`` if its columns are still as ``expect`` says (what the
        caller read: another process may have changed the row since); whether it did. ``touch=False``
        keeps ``updated_at`` (a claim's age: a dead launch's claim must not look fresh)."""
        sets, params = _set_clause(values, time.time() if touch else None)
        _check_columns(expect)
        where = "".join(f" AND {k} IS ?" for k in expect)
        with self.transaction() as conn:
            cur = conn.execute(f"UPDATE runs SET {sets} WHERE run_id=?{where}", [*params, run_id, *expect.values()])
            return cur.rowcount == 1

    @_guarded
    def unclaim(self, claimed: Iterable[RunRecord], token: str) -> None:
        """Undo a claim whose submission was refused: runs this claim inserted are deleted (with
        their sweep/experiment memberships), re-claimed runs get back what they were (their row's
        ``before_claim``: state, generation, error and cancel request)."""
        with self.transaction() as conn:
            for rec in claimed:
                row = conn.execute("SELECT * FROM runs WHERE run_id=? AND claim=?", (rec.run_id, token)).fetchone()
                if row is None:  # not this claim's (any more)
                    continue
                if self._undo_claim(conn, self._record(row)) is None:
                    conn.execute("DELETE FROM runs WHERE run_id=?", (rec.run_id,))
                    conn.execute("DELETE FROM members WHERE run_id=? AND run_id NOT IN (SELECT run_id FROM runs)",
                                 (rec.run_id,))

    @_guarded
    def renew_claims(self, token: str) -> None:
        """Mark the claims of ``token`` (a live launch) fresh: :func:`claim_is_stale` judges by age."""
        with self.transaction() as conn:
            conn.execute("UPDATE runs SET updated_at=? WHERE claim=? AND state=?", (time.time(), token, states.SUBMITTING))

    @_guarded
    def take_over(self, run_id: str, dead: str | None, mine: str) -> RunRecord | None:
        """Make claim ``mine`` the holder of run ``run_id`` if it is still SUBMITTING under ``dead`` (a
        dead launch's claim), keeping what the run was before (``before_claim``, now ``mine``'s); the
        record, or None where another process got there first. Only the holder undoes a claim's files."""
        with self.transaction() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id=? AND state=? AND claim IS ?",
                               (run_id, states.SUBMITTING, dead)).fetchone()
            if row is None:
                return None
            rec = self._record(row)
            was = rec.previous
            before = None if was is None else json.dumps({**was, "claim": mine})
            conn.execute("UPDATE runs SET claim=?, before_claim=?, updated_at=? WHERE run_id=?",
                         (mine, before, time.time(), run_id))
            rec.claim, rec.before_claim = mine, before
            return rec

    @_guarded
    def settle_claim(self, run_id: str, claim: str | None, values: dict) -> bool:
        """Apply ``values`` to run ``run_id`` if it is still SUBMITTING under ``claim`` (a dead launch's
        claim given its job: :func:`arctl.launch.refresh.orphaned_job`); False where it is not."""
        return self.update_if(run_id, {"state": states.SUBMITTING, "claim": claim}, values)

    @_guarded
    def release(self, run_ids: Iterable[str], token: str, state: str, error: str | None = None) -> None:
        """Give back claims this process could not submit (state FAILED with the error)."""
        with self.transaction() as conn:
            for run_id in run_ids:
                conn.execute(
                    "UPDATE runs SET state=?, error=?, claim=NULL, before_claim=NULL, updated_at=? "
                    "WHERE run_id=? AND claim=?",
                    (state, error, time.time(), run_id, token),
                )


def _check_columns(names) -> None:
    """A name that is not a column of ``runs`` is a ValueError: names go into the SQL text."""
    bad = set(names) - set(COLUMNS)
    if bad:
        raise ValueError(f"unknown registry columns {sorted(bad)}")


def _set_clause(values: dict, now: float | None) -> tuple[str, list]:
    """``("a=?, b=?", [values])`` for an UPDATE of ``values`` (and ``updated_at=now`` unless ``now``
    is None); names checked by ``_check_columns``."""
    _check_columns(values)
    values = values if now is None else {**values, "updated_at": now}
    return ", ".join(f"{k}=?" for k in values), list(values.values())


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:50] + "..."


def dumps(records: Iterable[RunRecord]) -> str:
    return json.dumps([r.as_dict() for r in records])

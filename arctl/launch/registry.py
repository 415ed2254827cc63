"""The run registry: one SQLite file (WAL) per workspace, one row per run.

Concurrency: every write is a short ``BEGIN IMMEDIATE`` transaction, ``run_id`` is the primary
key, and a run is only submitted by the process that *claimed* it (moved it to SUBMITTING with
its own token inside a transaction). So N concurrent ``arctl sweep`` of the same sweep create
and submit each cell exactly once.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

from arctl.launch import states

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
    wandb_id     TEXT,
    error        TEXT,
    phase        TEXT
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
    wandb_id: str | None = None
    error: str | None = None
    phase: str | None = None  # what a running job does before its first step, e.g. "warming up 640/1200"
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def wandb_run_id(self) -> str:
        """The W&B run id: the run id, suffixed after a --force rerun (a fresh W&B run)."""
        return self.run_id if not self.generation else f"{self.run_id}-g{self.generation}"

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}


COLUMNS = [f.name for f in fields(RunRecord) if f.name != "extra"]


@dataclass(frozen=True)
class ClaimResult:
    claimed: list[RunRecord]  # this process must submit these
    skipped: list[tuple[RunRecord, str]]  # (current record, reason)


def new_claim_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _claim_is_stale(record: RunRecord, now: float) -> bool:
    """A SUBMITTING claim whose owner died (same host, dead pid) or that is older than 10 min."""
    if record.state != states.SUBMITTING:
        return False
    if record.updated_at is not None and now - record.updated_at > STALE_CLAIM_S:
        return True
    try:
        host, pid, _ = (record.claim or "").split(":")
    except ValueError:
        return True
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False


class Registry:
    """The run registry of a workspace (``registry.sqlite``)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout=60000")
        mode = self._journal_mode_wal()
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a filesystem without shared memory
            raise RuntimeError(f"{self.path}: SQLite could not switch to WAL mode (got {mode})")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        with self.transaction() as conn:
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    conn.execute(statement)
            have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            for column in ("phase",):  # columns added after the first release: older registries get them
                if column not in have:
                    conn.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")

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

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no upgrade deadlocks)."""
        conn = self._conn
        for attempt in range(100):
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as err:  # busy beyond busy_timeout: retry
                if "locked" not in str(err) or attempt == 99:
                    raise
                time.sleep(0.02 + random.random() * 0.08)
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- reading -------------------------------------------------------------------------------

    @staticmethod
    def _record(row: sqlite3.Row) -> RunRecord:
        return RunRecord(**{k: row[k] for k in COLUMNS})

    def get(self, run_id: str) -> RunRecord | None:
        row = self._conn.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else self._record(row)

    def find(self, text: str) -> list[RunRecord]:
        """Runs whose id equals or starts with ``text``."""
        exact = self.get(text)
        if exact is not None:
            return [exact]
        rows = self._conn.execute(
            "SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id", (_like_prefix(text),)
        ).fetchall()
        return [self._record(r) for r in rows]

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

    def names(self) -> set[str]:
        rows = self._conn.execute("SELECT DISTINCT name FROM members").fetchall()
        return {r[0] for r in rows} | {r[0] for r in self._conn.execute("SELECT DISTINCT experiment FROM runs")}

    # ---- writing -------------------------------------------------------------------------------

    def claim(
        self,
        wanted: list[RunRecord],
        token: str,
        force: bool = False,
        members: Iterable[str] = (),
        relaunch: frozenset[str] = states.RELAUNCHABLE,
    ) -> ClaimResult:
        """Atomically claim the runs this process should submit.

        New runs are inserted; runs in ``relaunch`` states (or any inactive state with
        ``force``) are re-claimed; active runs (claimed by someone else, pending, running) and
        completed runs are skipped with a reason. ``members`` names (sweep/experiment) are
        attached to every wanted run.
        """
        now = time.time()
        claimed, skipped = [], []
        with self.transaction() as conn:
            for want in wanted:
                row = conn.execute("SELECT * FROM runs WHERE run_id=?", (want.run_id,)).fetchone()
                for name in members:
                    conn.execute("INSERT OR IGNORE INTO members(name, run_id) VALUES (?, ?)", (name, want.run_id))
                if row is None:
                    rec = RunRecord(**{**want.as_dict(), "state": states.SUBMITTING, "claim": token,
                                       "created_at": now, "updated_at": now})
                    values = rec.as_dict()
                    conn.execute(
                        f"INSERT INTO runs({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                        [values[c] for c in COLUMNS],
                    )
                    claimed.append(rec)
                    continue
                current = self._record(row)
                stale = _claim_is_stale(current, now)
                if current.state in states.ACTIVE and not stale:
                    skipped.append((current, f"already {current.state.lower()}"))
                    continue
                if current.state == states.COMPLETED and not force:
                    skipped.append((current, "completed (use --force to rerun)"))
                    continue
                if current.state not in relaunch and current.state != states.COMPLETED and not stale and not force:
                    skipped.append((current, f"{current.state.lower()}"))
                    continue
                generation = current.generation + (1 if force and current.state == states.COMPLETED else 0)
                conn.execute(
                    "UPDATE runs SET state=?, claim=?, updated_at=?, generation=?, error=NULL WHERE run_id=?",
                    (states.SUBMITTING, token, now, generation, current.run_id),
                )
                current.state, current.claim, current.updated_at = states.SUBMITTING, token, now
                current.generation, current.error = generation, None
                current.extra["previous_state"] = row["state"]
                claimed.append(current)
        return ClaimResult(claimed, skipped)

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

    def update_many(self, updates: Iterable[tuple[str, dict]]) -> None:
        """Apply ``(run_id, {column: value})`` updates in one transaction."""
        updates = [(rid, vals) for rid, vals in updates if vals]
        if not updates:
            return
        now = time.time()
        with self.transaction() as conn:
            for run_id, values in updates:
                values = {**values, "updated_at": now}
                bad = set(values) - set(COLUMNS)
                if bad:
                    raise ValueError(f"unknown registry columns {sorted(bad)}")
                sets = ", ".join(f"{k}=?" for k in values)
                conn.execute(f"UPDATE runs SET {sets} WHERE run_id=?", [*values.values(), run_id])

    def unclaim(self, claimed: Iterable[RunRecord], token: str) -> None:
        """Undo a claim whose submission was refused: runs this claim inserted are deleted (with
        their sweep/experiment memberships), re-claimed runs get their previous state back."""
        with self.transaction() as conn:
            for rec in claimed:
                previous = rec.extra.get("previous_state")
                if previous is None:
                    conn.execute("DELETE FROM runs WHERE run_id=? AND claim=?", (rec.run_id, token))
                    conn.execute("DELETE FROM members WHERE run_id=? AND run_id NOT IN (SELECT run_id FROM runs)",
                                 (rec.run_id,))
                else:
                    conn.execute("UPDATE runs SET state=?, claim=NULL WHERE run_id=? AND claim=?",
                                 (previous, rec.run_id, token))

    def release(self, run_ids: Iterable[str], token: str, state: str, error: str | None = None) -> None:
        """Give back claims this process could not submit (state FAILED with the error)."""
        with self.transaction() as conn:
            for run_id in run_ids:
                conn.execute(
                    "UPDATE runs SET state=?, error=?, claim=NULL, updated_at=? WHERE run_id=? AND claim=?",
                    (state, error, time.time(), run_id, token),
                )


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def dumps(records: Iterable[RunRecord]) -> str:
    return json.dumps([r.as_dict() for r in records])

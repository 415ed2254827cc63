"""Step and last metric of a running job, tapped from the backend's ``wandb.log`` calls.

The job entry wraps ``wandb.sdk.wandb_run.Run.log`` (whatever the backend) so that every logged
``trainer/global_step`` and one headline metric reach ``status.json`` (at most every
``interval_s``), which ``arctl status`` reads without parsing W&B files.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
import threading
import time
from pathlib import Path

from arctl.launch.status_file import NONFINITE_TEXTS, write_status
from arctl.track.metrics_schema import (
    NAME_ANYTIME_ACC,
    STEP_KEY,
    TRAIN_ANYTIME_SCORE,
    TRAIN_FINAL_SCORE,
    TRAIN_LOSS,
    TRAIN_REWARD_MEAN,
)
from arctl.track.writer import METRICS_FILE, VERL_METRICS_FILE

# the first of these present in a logged row is the status table's "last metric"; one that logged a
# number that is not finite (NaN, inf: a diverged loss) comes first, since that is the news
HEADLINE = (TRAIN_ANYTIME_SCORE, TRAIN_FINAL_SCORE, TRAIN_REWARD_MEAN, TRAIN_LOSS)


def headline_metric(row: dict) -> tuple[str, float] | None:
    """(key, value) of ``row``'s headline metric: of the :data:`HEADLINE` keys it holds a number under,
    the first that is not finite, else the first; without any, the first evaluation anytime accuracy."""
    present = [(key, float(row[key])) for key in HEADLINE if _is_real(row.get(key))]
    for key, value in present:
        if not math.isfinite(value):
            return key, value
    if present:
        return present[0]
    for key, value in row.items():
        if key.endswith(NAME_ANYTIME_ACC) and _is_real(value):
            return key, float(value)
    return None


def metric_fields(metric: tuple[str, float]) -> dict:
    """The status fields of a headline metric: its name, and its value, or where that is not finite,
    ``metric_value`` None (SQLite stores a NaN as NULL, JSON has none) and ``metric_nonfinite`` its text."""
    name, value = metric
    if math.isfinite(value):
        return {"metric_name": name, "metric_value": value, "metric_nonfinite": None}
    return {"metric_name": name, "metric_value": None, "metric_nonfinite": "nan" if math.isnan(value) else
            ("inf" if value > 0 else "-inf")}


def shown_metric(name: str | None, value: float | None, nonfinite: str | None = None) -> str:
    """``name=value`` as ``arctl status`` shows a headline metric (``train/loss=nan`` where it diverged); ""
    without one."""
    if name and nonfinite in NONFINITE_TEXTS:
        return f"{name}={nonfinite}"
    return f"{name}={value:.4g}" if value is not None else ""


def _is_real(value) -> bool:
    """A number a metric was logged as, finite or not (NaN and inf included; not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return _is_real(value) and math.isfinite(value)


def _is_step(value) -> bool:
    """A step a status file and the registry can hold (SQLite's INTEGER: below 2**63); a metrics file
    is input, and a row with another "step" (1e19, -1) is no step."""
    return _is_number(value) and 0 <= value < 2**63


class ProgressTap:
    """Collects step/metric/W&B id from logged rows and writes them to status.json."""

    def __init__(self, run_dir: Path, interval_s: float = 2.0):
        self.run_dir = Path(run_dir)
        self.interval_s = interval_s
        self.values: dict = {}
        self._written = 0.0
        self._original = None
        self._lock = threading.RLock()  # the pace watcher (watch_pace) writes from its own thread

    def observe(self, row: dict, run_id: str | None = None) -> None:
        if not isinstance(row, dict):
            return
        with self._lock:
            if _is_step(row.get(STEP_KEY)):
                self.values["step"] = int(row[STEP_KEY])
            metric = headline_metric(row)
            if metric:
                self.values.update(metric_fields(metric))
            if run_id:
                self.values["wandb_id"] = run_id
            if time.monotonic() - self._written >= self.interval_s:
                self.flush()

    def flush(self) -> None:
        with self._lock:
            if self.values:
                write_status(self.run_dir, **self.values)
                self._written = time.monotonic()

    def pace_from(self, step: int, at: float) -> None:
        """Record where this attempt's pace starts (:func:`watch_pace`), written at once."""
        with self._lock:
            self.values["first_step"], self.values["first_step_at"] = int(step), float(at)
            self.flush()

    def step_seen(self, step: int, at: float) -> None:
        """Record the newest step this attempt logged after its pace began, and when (:func:`watch_pace`; the
        job's clock, as ``first_step_at`` is), written at once."""
        with self._lock:
            self.values["last_step"], self.values["last_step_at"] = int(step), float(at)
            self.flush()

    def install(self) -> bool:
        """Wrap wandb's Run.log; False when wandb is not importable."""
        try:
            from wandb.sdk import wandb_run
        except ImportError:
            return False
        original = wandb_run.Run.log
        tap = self

        @functools.wraps(original)
        def log(run, data, *args, **kwargs):
            try:
                tap.observe(data, getattr(run, "id", None))
            except Exception:  # noqa: BLE001 - progress reporting must never break training
                pass
            return original(run, data, *args, **kwargs)

        wandb_run.Run.log = log
        self._original = original
        return True

    def uninstall(self) -> None:
        if self._original is not None:
            from wandb.sdk import wandb_run

            wandb_run.Run.log = self._original
            self._original = None


# metric files the backends append one JSON row per step to (tiny; verl's FileLogger)
METRIC_FILES = (METRICS_FILE, VERL_METRICS_FILE)  # tiny's (and verl's kept rows), verl's FileLogger output
TAIL_BYTES = 16384  # the first read of a metrics file's end; doubled while no whole row is in it
MAX_TAIL_BYTES = 1 << 24  # at most this much of a file's end is read for its last row (16 MiB)


def file_marks(run_dir: Path) -> dict[str, list[int]]:
    """(inode, size, mtime in ns) of each metrics file present: what an attempt starts with. Both
    backends rewrite ``metrics.jsonl`` (a new file) when they restore a checkpoint and append a row
    per step, so a file whose mark is unchanged still ends at the previous attempt's last step, which
    the new attempt may redo (e.g. 57 when it resumes from 40). Compared for equality only: no
    clock, so a file server's skewed clock cannot hide a row."""
    marks = {}
    for name in METRIC_FILES:
        try:
            st = (Path(run_dir) / name).stat()
        except OSError:
            continue
        marks[name] = [st.st_ino, st.st_size, st.st_mtime_ns]
    return marks


def tail_progress(run_dir: Path, unchanged: dict | None = None) -> dict:
    """Step and headline metric from the last row of the run's metrics files (reads their tails
    only); of several files, the one that reached the furthest step (verl's file log of the running
    attempt is ahead of ``metrics.jsonl``, which holds what earlier attempts kept). A file whose
    :func:`file_marks` entry equals ``unchanged``'s (the marks the running attempt started with) is
    skipped: it holds only what earlier attempts logged.

    For backends whose W&B logging happens in another process (verl logs from a Ray worker), so the
    in-process tap sees nothing. Rows are ``{"trainer/global_step": ..}`` or verl's
    ``{"step": .., "data": {..}}``.
    """
    marks = file_marks(run_dir) if unchanged else {}
    found = [out for name in METRIC_FILES
             if not (unchanged and name in marks and unchanged.get(name) == marks[name])
             and (out := _last_row(Path(run_dir) / name))]
    return max(found, key=lambda out: out.get("step", -1), default={})


PROGRESS_KEYS = ("step", "metric_name", "metric_value", "metric_nonfinite")


def run_progress(run_dir: Path, status: dict, active: bool) -> dict:
    """The step and headline metric a run shows (``arctl status``, ``arctl repair``): status.json's
    (what the job's tap wrote) or the metrics files' last row, whichever reached the further step.
    While an attempt is ``active``, a file unchanged since the attempt began (status.json's
    ``metric_files``) holds only what earlier attempts logged and is skipped, and an attempt that has
    logged nothing yet shows no step (None: not the previous attempt's, which it may redo from an
    earlier checkpoint). Once the run has ended every file counts, so a job killed before its backend
    rewrote them still shows how far the run got. (An NFS client's attribute cache may show the old
    file's marks for up to its ``acregmax``, ~60 s, after the backend replaced it: no step that long.)"""
    values = {k: status[k] for k in PROGRESS_KEYS if status.get(k) is not None}
    tail = tail_progress(run_dir, status.get("metric_files") if active else None)
    if tail.get("step", -1) > values.get("step", -1):  # e.g. verl: logged outside the job process
        values.update(tail)
    if active and "step" in status and "step" not in values:  # the job entry cleared it (a new attempt)
        values.update(dict.fromkeys(PROGRESS_KEYS))
    if values.get("metric_name") is not None:  # a metric's fields go together: none of an earlier one's stays
        values.setdefault("metric_value", None)
        values.setdefault("metric_nonfinite", None)
    return values


def _last_row(path: Path) -> dict:
    """Step and headline metric of the last whole row of ``path`` that has either; ``{}`` if none.
    Reads the file's end, from :data:`TAIL_BYTES` on and twice as much while no whole row with a step
    or metric is in it (a paper-scale verl row, hundreds of metrics, can be longer than the first read),
    up to the whole file or :data:`MAX_TAIL_BYTES`."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            window = TAIL_BYTES
            while True:
                start = max(0, size - window)
                fh.seek(start)
                lines = fh.read(size - start).splitlines()
                out = _newest(lines[1:] if start else lines)  # a window's first line is cut unless at 0
                if out or not start or window >= MAX_TAIL_BYTES:
                    return out
                window *= 2
    except OSError:
        return {}


def _newest(lines: list[bytes]) -> dict:
    """:func:`_last_row` of the rows ``lines``, the last first."""
    import json

    for raw in reversed(lines):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue  # a partial last line (the backend writing it)
        if not isinstance(obj, dict):
            continue
        row = obj["data"] if isinstance(obj.get("data"), dict) else obj
        step = row.get(STEP_KEY, obj.get("step"))
        out: dict = {}
        if _is_step(step):
            out["step"] = int(step)
        metric = headline_metric(row)
        if metric:
            out.update(metric_fields(metric))
        if out:
            return out
    return {}


PACE_POLL_S = 5.0  # how often the job entry looks at the metrics files for the attempt's first step


def watch_pace(run_dir: Path, marks: dict, tap: ProgressTap, stop: threading.Event, poll_s: float = PACE_POLL_S) -> None:
    """Until ``stop``: find where this attempt's pace starts, and each step it reaches after that, from the metrics
    files every backend writes a row per step to (:func:`tail_progress`, skipping files unchanged since the attempt
    began: ``marks``), whoever logs to W&B and where (verl: a Ray actor). The first step seen is not it: it may
    be the last kept row of a resume (the backend rewrites its file to the checkpoint before it trains)
    or a row whose time is unknown; the first step after it is, with the time it was seen (within
    ``poll_s``), recorded through ``tap`` (:meth:`ProgressTap.pace_from`), and so is every later step, with its
    time (:meth:`ProgressTap.step_seen`), for :func:`pace`: both times on this node's clock, never compared with
    another's (from the hunt of clocks: a pace taken to another clock's time moved with the clocks' skew)."""
    seen = last = None
    while not stop.wait(poll_s):
        step = tail_progress(run_dir, marks).get("step")
        if step is None:
            continue
        if seen is None:
            seen = step
        elif last is None and step > seen:
            tap.pace_from(step, time.time())
            last = step
        elif last is not None and step > last:
            tap.step_seen(step, time.time())
            last = step


MIN_PACE_STEPS = 2  # steps this attempt logged after its first before its pace says how long is left


def pace(status: dict, last_at: float | None = None) -> float | None:
    """Seconds a step took the running attempt since its pace began: from status.json's ``first_step`` to its
    ``last_step``, at the times the job saw each (``first_step_at``, ``last_step_at``: :func:`watch_pace`), two
    readings of the job's node's clock. A job of an arctl that wrote no ``last_step_at``: from ``first_step_at`` to
    ``last_at`` (:func:`last_step_at`, when its metrics files were last written), its ``step`` since its first, as
    before (two clocks). None before it saw a step after the first."""
    first, first_at = status.get("first_step"), status.get("first_step_at")
    last, at = status.get("last_step"), status.get("last_step_at")
    if last is None or at is None:  # an older arctl's job
        last, at = status.get("step"), last_at
    if first is None or first_at is None or last is None or at is None or last <= first:
        return None
    return max(0.0, at - first_at) / (last - first)


def time_left(status: dict, now: float | None = None, last_at: float | None = None) -> float | None:
    """Seconds until a running attempt reaches its ``total_steps`` from its ``step`` at its :func:`pace` (status.json's
    ``step``, ``first_step``, ``last_step``, ``total_steps``, ``test_freq``: the job entry writes them,
    :func:`watch_pace`), less the time since its last step, ``now`` less ``last_at`` (:func:`last_step_at`, on this
    host's clock; at most a step's). The pace is said once it holds the first evaluation after its
    first step (every ``test_freq`` steps; a step's row is logged after its evaluation) where one comes before the
    last step, so that evaluations are in its share, and at least :data:`MIN_PACE_STEPS` steps; the final
    evaluation after the last step is not in it. None before that. The pace is the job's clock alone (from the hunt
    of clocks: ``now`` less the node's ``first_step_at`` moved a time left by ~70% at a skew of 30 s). A job of an
    arctl that wrote no ``last_step_at``: its steps since ``first_step_at`` until ``now``, as before."""
    step, first = status.get("step"), status.get("first_step")
    total, cycle = status.get("total_steps"), status.get("test_freq")
    if status.get("last_step") is None or status.get("last_step_at") is None:  # an older arctl's job
        if now is None:
            return None
        status, last_at = {**status, "last_step": step}, now
    last = status.get("last_step")
    if not total or step is None or first is None or (per := pace(status, last_at)) is None:
        return None
    need = first + MIN_PACE_STEPS
    if cycle and (first // cycle + 1) * cycle < total:  # an evaluation is still to come before the last step
        need = max(need, (first // cycle + 1) * cycle)
    if last < need:
        return None
    since = min(per, max(0.0, now - last_at)) if now is not None and last_at is not None and status.get("last_step_at") else 0.0
    return max(0.0, (int(total) - max(step, last)) * per - since)


STALL_PACES = 10  # a running attempt whose last step is older than this many of its steps ...
STALL_FLOOR_S = 300.0  # ... and than this many seconds has stalled (`arctl status` says so instead of a time left)


def _changed_files(run_dir: Path, unchanged: dict | None) -> dict[str, list[int]]:
    """The :func:`file_marks` of the metrics files the running attempt changed: those whose mark differs from
    ``unchanged``'s (status.json's ``metric_files``: the marks the attempt started with). Every backend appends a
    row per step to one (tiny's ``metrics.jsonl``, verl's file log): nothing more is written per step for it."""
    unchanged = unchanged or {}
    return {name: mark for name, mark in file_marks(run_dir).items() if unchanged.get(name) != mark}


def last_row_written(run_dir: Path, unchanged: dict | None) -> float | None:
    """When the running attempt last logged a row, as the file server stamped it: the newest modification time of
    the metrics files it changed (:func:`_changed_files`), or None where it changed none. The file server's clock:
    for a time to record (when a killed job ended), never for an age on this host's clock (:func:`last_step_at`)."""
    return max((mark[2] / 1e9 for mark in _changed_files(run_dir, unchanged).values()), default=None)


_host_time = time.time  # this host's clock, as the probe reads it (bound once: a test's stand-in clock is not the disk's)
_FILE_CLOCKS: dict[str, float] = {}  # folder -> its file clock's offset (:func:`file_clock_offset`), per process
CLOCK_GRAIN_S = 2.0  # an offset smaller than this is the stamps' own grain (1-2 s on some file systems): none


def file_clock_offset(folder: Path) -> float:
    """Seconds by which the clock that stamps the files in ``folder`` (the file server's; this host's own on a local
    disk) is ahead of this host's: a probe file written there now, its modification time less this host's time at
    the write. Measured once per folder and process; 0.0 where nothing can be written there (a read-only or full
    workspace: the clocks are taken to agree, as before) or where they agree within :data:`CLOCK_GRAIN_S`. From the
    hunt of clocks: a file server 5 min off this host read a live run as stalled."""
    key = os.path.abspath(folder)
    if key not in _FILE_CLOCKS:
        offset = 0.0
        try:
            before = _host_time()
            fd, probe = tempfile.mkstemp(prefix=".arctl-clock-", dir=key)
            try:
                os.write(fd, b"\n")
                after = _host_time()
                offset = os.fstat(fd).st_mtime_ns / 1e9 - (before + after) / 2
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError:
            offset = 0.0
        _FILE_CLOCKS[key] = offset if abs(offset) >= CLOCK_GRAIN_S else 0.0
    return _FILE_CLOCKS[key]


def last_step_at(run_dir: Path, unchanged: dict | None) -> float | None:
    """When, on this host's clock, the running attempt last logged a row: the newest modification time of the
    metrics files it changed (:func:`_changed_files`) less the file server's clock's offset from this host's
    (:func:`file_clock_offset`, probed in the workspace's folder), or None where it changed none."""
    newest = last_row_written(run_dir, unchanged)
    if newest is None:
        return None
    run_dir = Path(run_dir)
    return newest - file_clock_offset(run_dir.parent.parent if run_dir.parent.name == "runs" else run_dir.parent)


def step_age(status: dict, last_at: float | None, now: float) -> tuple[float, float] | None:
    """(seconds since the running attempt's last step, ``last_at`` (:func:`last_step_at`: this host's clock, as
    ``now`` is); the seconds a step took it, :func:`pace`: the job's clock) for status.json's ``step`` (the step the
    run shows). None until the attempt's pace has begun (it logged a step after the first it showed, which may be a
    resume's kept row: a start-up can be long, and is no stall) and where no metrics file changed since the attempt
    began."""
    per = pace(status, last_at)
    if last_at is None or status.get("step") is None or per is None:
        return None
    return max(0.0, now - last_at), per


def stalled(age: float, pace: float) -> bool:
    """Whether a running attempt whose last step came ``age`` seconds ago, at ``pace`` seconds a step until then,
    has stalled: no step for :data:`STALL_PACES` of its steps and :data:`STALL_FLOOR_S` (from a hunt: a step that
    hung showed RUNNING at 55/400 with a time left that grew on every call)."""
    return age > max(STALL_PACES * pace, STALL_FLOOR_S)


def stall_text(age: float, pace: float) -> str:
    """``no step for 12 min; steps took ~0.3 s``: what `arctl status` says of a stalled attempt instead of its time
    left."""
    return f"no step for {_duration(age)}; steps took ~{_duration(pace)}"


def _duration(seconds: float) -> str:
    """``0.3 s``, ``45 s``, ``12 min``, ``2.5 h``."""
    if seconds < 10:
        return f"{seconds:.1g} s" if seconds < 1 else f"{seconds:.0f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def schedule(config: dict) -> dict:
    """``{"total_steps": N, "test_freq": F}`` of a run's config (None where not a positive number): what
    status.json carries for :func:`time_left`, so that ``arctl status`` parses no config."""
    trainer = config.get("trainer") or {}
    return {key: int(trainer[key]) if _is_number(trainer.get(key)) and trainer[key] > 0 else None
            for key in ("total_steps", "test_freq")}

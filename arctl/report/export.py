"""``arctl export``: the part of a workspace that reports read, without checkpoints or logs.

A tiny run's folder is ~100 MB of checkpoints around ~1 MB that every report, figure and claim is built
from: its W&B files, its frozen ``config.yaml``, ``shared.json`` (the cells it also serves) and
``provenance.json`` (code version, machine). :func:`export_runs` copies exactly those files of the
selected runs into ``<out>/runs/<run_id>/``, the workspace layout the readers expect
(:mod:`arctl.track.runs.discover`), so ``arctl report --workdir <out>`` rebuilds every report from
the export on any machine: evidence that can be committed, shared and added to later.

``<out>/export.json`` indexes what an export holds: per run its experiment, arm, seed, state and the
sha256 of every file. A later export into the same folder adds runs (evidence gathered over several
sessions or clusters); a run already there is left alone when its files are the same (its recorded
state and name brought up to date where they changed: a run exported running, completed since), and
replacing one whose files differ needs ``force``. Every check runs before anything is written: a refused
export leaves the folder as it was.

The index also keeps the runs of the selection an export skipped that had not ended (``skipped``: not completed,
or nothing logged yet: pending, at their first steps, a ``--force`` rerun queued), with their names and how they
stood, until an export that looks at them again finds them exported or ended: a report of the export names them
(:func:`skipped_in_export`), as a report of the workspace names its runs that logged nothing yet
(:func:`unlogged_runs`).

While an export copies, its index lists the runs it has still to copy (``pending``; each leaves the list as it
is placed): an export stopped part-way (Ctrl-C, a kill, a full disk) is known as unfinished by every reader
(:func:`interrupted_export`: reports warn), and the same command completes it.

Only completed runs are exported unless ``unfinished``. A run's state is how it ended as the workspace's
registry recorded it (lowercase: ``failed``), where the registry has it ended (:func:`recorded_states`: a killed
job never rewrote its ``status.json``, which still says running); else its ``status.json``'s (what its job
reported: newer than a row no refresh has brought up to date), else, in an export exported again, its index's; a
run with none (from before ``status.json``, or whose file was lost) is completed when its own files say so
(:func:`completed_by_wandb`), and a run skipped is named with why. The registry is only read (an export writes
nothing in the workspace), not refreshed: `arctl status` first brings it up to date.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from arctl.config.files import PROBE_PREFIX, atomic_write, exclusive, file_sha256
from arctl.launch import states
from arctl.launch.provenance import PROVENANCE_FILE
from arctl.launch.repair import REPORTED
from arctl.launch.shared import SHARED_FILE, read_shared
from arctl.launch.status_file import STATUS_FILE, cancel_requested_at, read_status
from arctl.launch.workspace import EXPORT_INDEX, workdir_arg
from arctl.report.errors import ReportError, out_dir_problem
from arctl.track.runs.discover import (
    ConfigReadError,
    RunSource,
    _read_yaml,
    discover_runs,
    read_run_config,
    read_served,
    run_identity,
)
from arctl.track.runs.pool import _progress

INDEX_FILE = EXPORT_INDEX
INDEX_VERSION = 1
STAGING = ".staging"  # where a run's files are copied before its folder is moved into runs/
PENDING = "pending"  # the index's list of the runs an export has still to copy (an unfinished export's)
SIDE_FILES = (SHARED_FILE, PROVENANCE_FILE)  # read beside the W&B files and config.yaml, when present
FINAL_STATE = "completed"
UNKNOWN_STATE = "unknown"  # an exported run whose job left no word and whose W&B files do not say it completed
UNFINISHED_HINT = "; --unfinished exports it as it is"


@dataclass
class ExportedRun:
    run_id: str
    experiment: str
    arm: str
    seed: int | None
    state: str
    files: dict[str, str]  # path relative to the run's folder -> sha256
    bytes: int
    action: str = "added"  # added | unchanged | updated (only shared.json, or the recorded state, changed) | replaced


@dataclass
class ExportResult:
    out: Path
    runs: list[ExportedRun] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run_id, why)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (run_id, what): exported as it is
    # the runs of ``skipped`` that have not ended, with their names: the index keeps them (:data:`SKIPPED`)
    not_ended: dict[str, SkippedRun] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"out": str(self.out),
                "runs": [{"run_id": r.run_id, "experiment": r.experiment, "arm": r.arm, "seed": r.seed,
                          "state": r.state, "action": r.action, "bytes": r.bytes, "files": sorted(r.files)}
                         for r in self.runs],
                "skipped": [{"run_id": rid, "why": why} for rid, why in self.skipped],
                "warnings": [{"run_id": rid, "what": what} for rid, what in self.warnings]}


def _place(staging: Path, target: Path) -> None:
    """Move a run's staged folder into the export's runs/ (one rename)."""
    os.replace(staging, target)


def _data(files: dict[str, str]) -> dict[str, str]:
    """A run's exported files but ``shared.json``: which cells a finished run serves grows when a
    later sweep shares it (its data does not change), so that alone updates the export unforced."""
    return {path: sha for path, sha in files.items() if path != SHARED_FILE}


def recorded_states(workdir: Path) -> dict[str, str]:
    """``{run_id: state}`` of the runs the workspace's registry records as ended (``completed``, ``failed``,
    ``preempted``, ``cancelled``: its states lowercased, as status.json says them); {} where there is no registry
    (an export) or it cannot be read (its commands say why). Read only, never refreshed nor written. An active
    row is left out: its job's status.json may know more (a job that ended since the last refresh)."""
    return {r.run_id: r.state.lower() for r in registry_rows(workdir) if r.state in states.TERMINAL}


def registry_rows(workdir: Path) -> list:
    """The rows (:class:`arctl.launch.registry.RunRecord`) of the workspace's registry; [] where there is none (an
    export) or it cannot be read. Read only, never refreshed nor written."""
    from arctl.launch.registry import Registry, RegistryError
    from arctl.launch.workspace import Workspace

    path = Workspace(Path(workdir)).registry_path
    if not path.is_file():
        return []
    try:
        with Registry(path, readonly=True) as reg:
            return reg.list()
    except (RegistryError, OSError):
        return []


def run_state(run_dir: Path, recorded: dict[str, str], exported: dict) -> str:
    """How the run of ``run_dir`` ended or stands (lowercase; "" where nothing says): the registry's ended state
    (``recorded``: :func:`recorded_states`; from a hunt, a killed run was "not completed (state running)", its
    status.json's, where the registry said FAILED), else its job's status.json, else ``exported``'s (an export's
    index) ``state``. A job's own end in status.json (completed, preempted, failed, cancelled) goes before the
    registry's, which a requeued attempt may have outrun (from a review: a SLURM job requeued after a preemption
    completed while the row still said PREEMPTED, and a completed seed was left out of a table); the registry's goes
    before a status.json a killed job left "running", "stopping" or "submitted". A job that stopped on `arctl cancel`'s
    request (status.json "preempted" with ``cancelled``, or its request beside it) is ``cancelled``, as arctl repair
    reads it."""
    rid = run_dir.name
    status = read_status(run_dir)
    own = status.get("state")
    if own == "preempted" and (status.get("cancelled") is True or cancel_requested_at(run_dir) is not None):
        # a stop on `arctl cancel`'s request, as arctl repair and `arctl status` read it (from a hunt: a cancelled
        # run was "its job says preempted" in a report, CANCELLED in `arctl status`)
        return states.CANCELLED.lower()
    if own in REPORTED:  # how an attempt ended, as arctl repair reads it
        return str(own)
    return str(recorded.get(rid) or own or (exported.get(rid) or {}).get("state") or "")


NOTHING_LOGGED = "nothing logged"
NOT_LOGGED_PENDING = "pending"  # how a report and an export's index say a run that has logged nothing yet stands
NOT_LOGGED_RUNNING = f"running, {NOTHING_LOGGED} yet"
NOT_LOGGED_RERUN = "rerun queued (--force)"
NOT_LOGGED_UNKNOWN = f"{NOTHING_LOGGED}, state unknown"
NOT_LOGGED_INTERRUPTED = "interrupted: its launch died before it submitted it (`arctl status`; relaunch it)"
NOT_EXPORTED = ", not exported"  # after the state of a run an export left out as not ended ("running, not exported")


def under_way(state: str) -> bool:
    """Whether a run that logged nothing yet (:class:`SkippedRun`'s ``state``) has a job on it: pending, running or a
    rerun queued, or not ended when an export left it out. Not an interrupted launch's (no job runs for it) nor a
    folder nothing speaks for: a report names what produces those."""
    return state in (NOT_LOGGED_PENDING, NOT_LOGGED_RUNNING, NOT_LOGGED_RERUN) or state.endswith(NOT_EXPORTED)


SKIPPED = "skipped"  # the index's runs of the workspace an export did not copy: {run_id: SkippedRun fields}


@dataclass(frozen=True)
class SkippedRun:
    """A run of a workspace that a report cannot read, or an export did not copy, that has not ended: one without
    W&B files yet (:func:`unlogged_runs`), or one an export left out as not completed; written in an export's index
    (:data:`SKIPPED`) so that a report of the export names it too."""

    run_id: str
    experiment: str
    arm: str
    seed: int | None
    scale: str | None
    state: str  # how it stands, as a report says it: NOT_LOGGED_* or an export's "running, not exported"
    cells: tuple[tuple[str, str], ...] = ()  # the other (experiment, arm) cells it serves (shared.json)

    def as_index(self) -> dict:
        return {"experiment": self.experiment, "arm": self.arm, "seed": self.seed, "scale": self.scale,
                "state": self.state, "serves": [list(c) for c in self.cells]}

    @classmethod
    def from_index(cls, run_id: str, entry) -> SkippedRun | None:
        """The run an index's :data:`SKIPPED` entry names, or None where it is no mapping with an experiment."""
        if not isinstance(entry, dict) or not isinstance(entry.get("experiment"), str):
            return None
        seed = entry.get("seed")
        cells = tuple((c[0], c[1]) for c in entry.get("serves") or []
                      if isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c))
        return cls(str(run_id), entry["experiment"], str(entry.get("arm") or ""),
                   seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                   str(entry["scale"]) if entry.get("scale") is not None else None,
                   str(entry.get("state") or NOT_LOGGED_UNKNOWN), cells)


def not_ended(workdir: Path, run_ids, rows: dict, recorded: dict):
    """(run id, its folder, its registry row or None, its status.json's state) of each of ``run_ids`` (runs of the
    workspace ``workdir``; ``rows``: its registry rows by run id, ``recorded``: the ended ones' states, as
    :func:`run_state` takes them) that has not ended: neither its job nor its registry row says it did. A folder
    that cannot be looked into is left out (its readers say so). The one test of "still under way" of
    :func:`unlogged_runs` and :func:`arctl.report.data.live_runs`."""
    for rid in map(str, run_ids):
        run_dir, row = workdir / "runs" / rid, rows.get(rid)
        try:
            ended = run_state(run_dir, recorded, {})
            own = read_status(run_dir).get("state")
        except OSError:  # a folder that cannot be looked into: its readers say so
            continue
        if ended.upper() not in states.TERMINAL:  # its job said it ended, or its registry row did
            yield rid, run_dir, row, own


def unlogged_runs(workdir: str | Path, logged: set[str] | None = None) -> list[SkippedRun]:
    """The runs of a workspace that have logged nothing yet and have not ended: a row its registry has active
    (submitting, pending, running), or a run folder, without a W&B file (``logged``: the run ids that have one; else
    found here) and not ended (:func:`run_state`). Each with how it stands: pending, running with nothing logged yet,
    or a ``--force`` rerun queued (a pending row of a later generation: its finished files moved aside); a folder
    nothing speaks for (no status.json, no registry row) is "state unknown". Its names and scale are its
    config.yaml's, else its registry row's. From a hunt: a pending run, a run at its first steps and a queued
    ``--force`` rerun were invisible to every report, and a table said "from 1 run(s)" without a word."""
    workdir = Path(workdir)
    rows = {r.run_id: r for r in registry_rows(workdir)}
    recorded = {rid: r.state.lower() for rid, r in rows.items() if r.state in states.TERMINAL}
    if logged is None:  # W&B files searched for only in the folders of runs the registry has not ended (its ended
        # ones are never waiting: :func:`run_state`); an unreadable folder: its readers say so
        logged = {s.run_id for s in discover_runs(workdir, [], keep=lambda folder, _: folder.name not in recorded)}
    folders = set()
    if (workdir / "runs").is_dir():
        try:
            folders = {p.name for p in (workdir / "runs").iterdir() if p.is_dir()}
        except OSError:
            folders = set()
    active = {rid for rid, r in rows.items() if r.state in states.ACTIVE}
    from arctl.launch.refresh import interrupted_launch

    now = time.time()
    out = []
    for rid, run_dir, row, own in not_ended(workdir, sorted((folders | active) - set(logged)), rows, recorded):
        config = _read_yaml(run_dir / "config.yaml")  # (never raises) only of the runs not ended: a few
        recorded_state = row.state if row is not None else None
        if row is not None and interrupted_launch(row, run_dir, now):  # its launch died before it submitted it:
            state = NOT_LOGGED_INTERRUPTED  # no job runs for it, nothing to wait for (from a review: "pending")
        elif own in ("running", "stopping") or recorded_state == states.RUNNING:
            state = NOT_LOGGED_RUNNING
        elif recorded_state in states.ACTIVE or own in ("submitted", "requeued"):
            state = NOT_LOGGED_RERUN if row is not None and row.generation > 0 else NOT_LOGGED_PENDING
        else:
            state = NOT_LOGGED_UNKNOWN
        experiment, arm, seed = run_identity(config)
        if row is not None and not experiment:
            experiment, arm, seed = row.experiment, row.arm, row.seed
        if not experiment:  # a folder with no config.yaml nor a registry row: no cell it could be of
            continue
        scale = _config_scale(config)
        scale = scale if scale is not None else (row.scale if row is not None else None)
        cells = tuple(c for c in read_served(run_dir, arm) if c[1] is not None and c != (experiment, arm))
        out.append(SkippedRun(rid, experiment, arm, seed, None if scale is None else str(scale), state, cells))
    return out


def _config_scale(config: dict) -> str | None:
    """The scale a run's config says, as :func:`arctl.report.cells.run_scale` reads it from a runs table."""
    from arctl.report.cells import run_scale
    from arctl.track.runs.tidy import flatten_config

    return run_scale(flatten_config(config), prefix="")


def job_states(workdir: Path, run_ids) -> dict[str, str]:
    """``{run_id: state}`` of how each run ended or stands (``completed``, ``preempted``, ``failed``, ``running``,
    ...): :func:`run_state` (the registry's end, its job's status.json in a workspace, the index's ``state`` in an
    export, which copies no status.json); runs without any are left out. A report of final values reads a run as
    finished only where its job said completed: a stopped run (preempted, cancelled) closes its W&B run cleanly,
    and at the paper scale (``trainer.total_steps`` null: an epoch) its W&B history alone cannot tell it from a
    finished one."""
    workdir = Path(workdir)
    index = (read_index(workdir).get("runs") or {}) if (workdir / INDEX_FILE).exists() else {}
    recorded = recorded_states(workdir)
    out = {}
    for rid in run_ids:
        state = run_state(workdir / "runs" / str(rid), recorded, index)
        if state and state != UNKNOWN_STATE:  # the export's guess: not the job's word
            out[str(rid)] = state
    return out


def report_files(source: RunSource, run_dir: Path) -> list[Path]:
    """The files of the run in ``run_dir`` (``source``: as :func:`arctl.track.runs.discover.discover_runs`
    found it) that reports read: its config.yaml, the side files present, and its W&B run files (each
    once, though W&B's ``latest-run`` link names one again). A W&B file is kept where its path as written
    lies in the run's folder, wherever a link takes it (a ``wandb/`` linked to scratch storage: reports read
    it, so the export copies its bytes); one that is no regular file at the end of its links (a link loop, a
    dangling link, a FIFO) or one already kept under another path (a link to the run's own folder) is not."""
    side = [run_dir / name for name in SIDE_FILES if (run_dir / name).is_file()]
    kept: dict[Path, Path] = {}
    for p in source.files:
        if not p.is_relative_to(run_dir) or ".." in p.relative_to(run_dir).parts:
            continue
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13), a dangling link
            continue
        if real.is_file() and real not in kept:
            kept[real] = p
    return ([source.config_path] if source.config_path else []) + side + list(kept.values())


def read_index(out: Path) -> dict:
    """The index of an export folder ({} when ``out`` holds none); ReportError when it is unreadable."""
    path = Path(out) / INDEX_FILE
    if not path.exists():
        return {}
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(index, dict) or not isinstance(index.get("runs"), dict):
            raise ValueError("no 'runs' mapping")
        for run_id, entry in index["runs"].items():
            files = entry.get("files") if isinstance(entry, dict) else None
            if not (isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
                raise ValueError(f"run {run_id!r} has no files mapping")
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: not an arctl export index ({err}); choose another --out folder") from None
    return index


def interrupted_export(workdir: str | Path) -> str | None:
    """The warning for an export folder that an ``arctl export`` left unfinished (runs it was to copy are
    not there: its index's ``pending``, or a ``.staging`` folder left by an export from before the list),
    else None (not an export, or a finished one). From a hunt: a report read 1 of the 3 runs of an
    interrupted export and told the user to launch the 2 others, in a folder that launches nothing."""
    workdir = Path(workdir)
    if not (workdir / INDEX_FILE).is_file():
        return None
    try:
        pending = read_index(workdir).get(PENDING) or []
    except ReportError:  # unreadable: the readers say so in their own words
        return None
    if not pending and not (workdir / STAGING).is_dir():
        return None
    absent = [rid for rid in pending if not (workdir / "runs" / str(rid)).is_dir()]  # (a run replaced: it is)
    which = f" ({len(absent)} run(s) it was to copy are not there)" if absent else ""
    return (f"export interrupted: {workdir} holds a part of the runs it was to hold{which}; rerun "
            f"`arctl export --out {shlex.quote(str(workdir))} ...` (the same command) to complete it")


def producing_in_export(workdir: str | Path) -> str | None:
    """How runs a report lacks come into ``workdir`` where it is an export, for its "produce them with ..."
    (an export launches none: ``arctl run`` refuses it); None for a workspace. For data.py's messages."""
    if not (Path(workdir) / INDEX_FILE).is_file():
        return None
    out = shlex.quote(str(workdir))
    if interrupted_export(workdir):
        return f"`arctl export --out {out} ...`, the command that was interrupted (it completes the export)"
    return f"`arctl export --out {out} --workdir WORKSPACE` from a workspace that has them (an export launches no runs)"


def waiting_in_export(workdir: str | Path) -> str | None:
    """How an export's unfinished runs (exported with ``--unfinished``) come to be finished, for a report's "wait
    for them (...)"; None for a workspace (where `arctl status` shows them). An export has no registry for `arctl
    status`, and exporting a run it has again needs ``--force`` (from a hunt: both commands it named refused)."""
    if not (Path(workdir) / INDEX_FILE).is_file():
        return None
    return (f"they are finished in their workspace, then `arctl export --out {shlex.quote(str(workdir))} --workdir "
            "WORKSPACE --force` replaces them")


def export_runs(workdir: str | Path, out: str | Path, experiments: list[str] | None = None,
                unfinished: bool = False, force: bool = False, run_ids: list[str] | None = None,
                progress: bool = False) -> ExportResult:
    """Copy the report files of the runs of ``workdir`` (of ``experiments``, or those of ``run_ids``, or
    all; completed runs only unless ``unfinished``) into the export folder ``out``. A run of ``run_ids``
    that the workspace does not have is skipped, named in ``skipped``. ``progress``: a progress bar on
    stderr (runs checked, then runs copied). See the module docstring."""
    workdir, out = Path(workdir), Path(out)
    _refuse_places(workdir, out)  # before the lock: a refused export writes nothing, not even its lock file
    with exclusive(f"export {out.resolve()}"):  # two exports into one folder take turns
        return _export(workdir, out, experiments, unfinished, force, run_ids, progress)


@contextmanager
def _bar(enabled: bool, total: int, what: str) -> Iterator[Callable[[], None]]:
    """A progress bar of ``total`` items on stderr while the block runs; yields the call that counts one."""
    with _progress(enabled, total, what) as bar:
        task = bar.add_task(what, total=total) if bar else None
        yield (lambda: bar.advance(task)) if bar else (lambda: None)


def _reader_identity(source: RunSource, workdir: Path) -> tuple[str, str, int | None] | None:
    """(experiment, arm, seed) of a run as reports read it where its config.yaml does not say (absent,
    unreadable, or without them): what the reader (:func:`arctl.track.runs.load.ingest_offline`) makes of
    its W&B config, from the workspace's cache where current, else read into a throwaway cache (an export
    writes nothing in the workspace); None where its files cannot be listed."""
    import tempfile

    from arctl.track.runs.cache import _cached_meta
    from arctl.track.runs.load import ingest_offline, workspace_cache

    try:
        sig = source.signature()
    except OSError:  # moved while listed
        return None
    meta = _cached_meta(workspace_cache(workdir), source.run_id, sig)
    if meta is None:
        with tempfile.TemporaryDirectory(prefix="arctl-export-") as tmp:
            meta = ingest_offline(source, tmp, sig)
    return str(meta.get("experiment") or ""), str(meta.get("arm") or ""), meta.get("seed")


def _config_problem(path: Path | None, config: dict) -> str | None:
    """What is wrong with a run's frozen config (unreadable, not a mapping, no experiment), or None; a run
    without one (logged outside arctl) is known by its W&B files, as reports read it."""
    if path is None or not path.is_file():
        return None
    if not config:
        return f"its config.yaml ({path}) cannot be read as a YAML mapping"
    if not run_identity(config)[0]:
        return f"its config.yaml ({path}) names no experiment"
    return None


def completed_by_wandb(source: RunSource, config: dict) -> tuple[bool, str]:
    """Whether a run without a job's word on it (no ``status.json``: a run from before the file, or one whose
    file was lost) completed, as its own files tell: its last W&B fragment ends with W&B's exit record of a
    clean finish and its history reaches ``trainer.total_steps`` of its config.yaml (a preempted attempt
    finishes its W&B run too, before the last step; a run killed has no exit record). ``(done, why not)``."""
    from arctl.track.runs.stitch import in_attempt_order, stitch_fragments
    from arctl.track.wandbfile import WandbFileError, read_wandb_file

    where = f"no {STATUS_FILE} in its folder (the job's record of how it ended)"
    total = (config.get("trainer") or {}).get("total_steps") if isinstance(config.get("trainer"), dict) else None
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        return False, f"{where}, and no trainer.total_steps in its config.yaml to check its W&B history against"
    frags = []
    for path in source.files:
        try:
            frags.append(read_wandb_file(path, summary=False))
        except (OSError, WandbFileError) as err:
            return False, f"{where}, and its W&B file {path} cannot be read ({' '.join(str(err).split())[:120]})"
    last = in_attempt_order(frags)[-1] if frags else None
    if last is None or last.state != "finished":
        end = "failed" if last is not None and last.state == "failed" else "has no exit record (running, or killed)"
        return False, f"{where}, and its last W&B attempt {end}"
    wide, _ = stitch_fragments(frags)
    step = int(wide.index.max()) if len(wide.index) else None
    if step is None or step < total:
        return False, f"{where}, and its W&B history ends at step {'-' if step is None else step} of {total}"
    return True, ""


def _refuse_places(workdir: Path, out: Path) -> None:
    """ReportError where the workspace has no runs/ or ``out`` cannot be the export's folder."""
    if not (workdir / "runs").is_dir():
        raise ReportError(f"{workdir}: no runs/ folder here; pass --workdir DIR (or set ARCTL_HOME) to a workspace")
    if out.resolve() == workdir.resolve():
        raise ReportError(f"--out {out} is the workspace itself; choose a folder outside it")
    if problem := out_dir_problem(out, workdir):  # inside its runs/, or not a folder that can be written
        raise ReportError(problem)


def _plan_run(source, workdir: Path, out: Path, index: dict, wanted, unfinished: bool, force: bool, exported: dict,
              recorded: dict[str, str], result: ExportResult, cache: Path | None = None):
    """What the export does with one run of the workspace: None where it is not asked for (``wanted``: the
    experiments); else ((run, files, run_dir) or None where it is skipped, the experiments it serves). Its
    warnings and why it is skipped go into ``result``. ``recorded``: :func:`recorded_states`; ``cache``: the
    workspace's cache of parsed runs (:func:`arctl.track.runs.load.workspace_cache`), only read."""
    run_dir = workdir / "runs" / source.run_id
    try:  # as reports read it: the experiment of a config.yaml they can read chooses the run ... (parsed once, or
        # read from the workspace's cache of configs, which reports write: an export writes nothing in the workspace)
        named = read_run_config(source.config_path, cache, source.run_id, store=False) if source.config_path else None
    except ConfigReadError:
        named = None
    config = named if named is not None else _read_yaml(source.config_path) if source.config_path else {}
    experiment, arm, seed = run_identity(config)
    damaged = _config_problem(source.config_path, config)
    if named is None or not experiment or named.get("arm") is None or named.get("seed") is None:
        # ... and where it does not name the run in full, the run is what its W&B config (and config.yaml)
        # make of it (from a hunt: a run without config.yaml was left out of --experiment without a word,
        # though reports read it as one of that experiment's)
        experiment, arm, seed = _reader_identity(source, workdir) or (experiment, arm, seed)
    chosen = experiment if named is None else str(named.get("experiment") or "")
    serves = {chosen, *read_shared(run_dir)}
    if wanted is not None and not serves & wanted:
        if damaged or not chosen:  # it may be one of them: say so, not nothing
            what = damaged or "it has no config.yaml and its W&B config names no experiment"
            result.warnings.append((source.run_id, f"{what}; not exported: with no experiment it matches no "
                                    "--experiment/--sweep (an export without them takes it)"))
        return None
    state = run_state(run_dir, recorded, exported)
    why = f"not completed (state {state})"
    if not state:  # no status.json (a run from before it, a file lost): its W&B files and config.yaml tell
        done, why = completed_by_wandb(source, config)
        state = FINAL_STATE if done else UNKNOWN_STATE
    if state != FINAL_STATE and not unfinished:
        result.skipped.append((source.run_id, why + UNFINISHED_HINT))
        if state.upper() in states.TERMINAL:  # ended (failed, cancelled, preempted): nothing to wait for (a review)
            return None, serves
        scale = _config_scale(config)
        result.not_ended[source.run_id] = SkippedRun(
            source.run_id, experiment, arm, seed, scale, f"{state}{NOT_EXPORTED}",
            tuple(c for c in read_served(run_dir, arm) if c[1] is not None and c != (experiment, arm)))
        return None, serves
    files = report_files(source, run_dir)
    shas = {str(p.relative_to(run_dir)): file_sha256(p) for p in files}
    run = ExportedRun(source.run_id, experiment, arm, seed, state, shas, sum(p.stat().st_size for p in files))
    if damaged:
        result.warnings.append((source.run_id, f"{damaged}; exported as it is: reports know the run by its W&B "
                                "files only"))
    before = (index.get("runs") or {}).get(source.run_id)
    there = all((out / "runs" / source.run_id / p).is_file() for p in shas)  # an interrupted export may lack it
    if before is not None:
        recorded = (before.get("experiment"), before.get("arm"), before.get("seed"), before.get("state"))
        if before.get("files") == shas and there and recorded == (experiment, arm, seed, state):
            run.action = "unchanged"
        elif before.get("files") == shas and there:  # the same files, another state (from a hunt: a run exported
            run.action = "updated"  # running, completed since with the same W&B files, stayed "running")
        elif _data(before.get("files") or {}) == _data(shas):  # a later sweep shares it with more cells
            run.action = "updated"
        elif not force:
            raise ReportError(f"run {source.run_id} is in the export {out} with other files (another attempt or "
                              "machine); --force replaces it, or export into another folder")
        else:
            run.action = "replaced"
    return (run, files, run_dir), serves


def _export(workdir: Path, out: Path, experiments, unfinished, force, run_ids, progress=False) -> ExportResult:
    _refuse_places(workdir, out)  # again under the lock: a folder the export before this one changed
    index = read_index(out)
    # a concurrent export's folder_problem probe (it checks before it waits for the lock) is not content
    if out.is_dir() and any(p.name != STAGING and not p.name.startswith(PROBE_PREFIX) for p in out.iterdir()) \
            and not index:
        raise ReportError(f"--out {out} is neither empty nor an arctl export ({INDEX_FILE} missing); choose an "
                          "empty or new folder, or an earlier export to add runs to")
    wanted = set(experiments) if experiments else None
    ids = None if run_ids is None else set(run_ids)
    result = ExportResult(out)
    plans: list[tuple[ExportedRun, list[Path], Path]] = []
    seen_experiments: set[str] = set()
    found: set[str] = set()
    # an export exported again: its runs have no status.json, their state is in its index (from a review: every
    # run was "not completed (state unknown)")
    exported = (read_index(workdir).get("runs") or {}) if (workdir / INDEX_FILE).is_file() else {}
    recorded = recorded_states(workdir)
    unreadable: list[str] = []  # folders another user made unreadable: skipped, said like the others skipped
    every = discover_runs(workdir, unreadable)
    sources = [s for s in every if ids is None or s.run_id in ids]
    unread: set[str] = set()
    for line in unreadable:  # "run <id>: its folder ... cannot be read (...); left out (...)"
        rid, _, why = line.partition(": ")
        rid = rid.removeprefix("run ")
        if ids is None or rid in ids:  # (chosen runs: another run's folder is not this export's to name)
            unread.add(rid)
            result.skipped.append((rid, why))
    from arctl.track.runs.load import workspace_cache

    cache = workspace_cache(workdir, probe=False)  # only read: no probe file made in the workspace
    with _bar(progress, len(sources), "checking runs") as advance:
        for source in sources:
            advance()
            plan = _plan_run(source, workdir, out, index, wanted, unfinished, force, exported, recorded, result,
                             cache)
            found.add(source.run_id)
            if plan is None:
                continue
            seen_experiments |= plan[1]
            if plan[0] is not None:
                plans.append(plan[0])
    if wanted is not None and (absent := sorted(wanted - seen_experiments)):
        # in this workspace, not ./arctl-runs (from a hunt: a bare `arctl run NAME` was suggested)
        produce = producing_in_export(workdir) or f"`arctl run NAME{workdir_arg(workdir)}`"
        raise ReportError(f"no runs of {', '.join(absent)} in {workdir}; run them first ({produce}) or "
                          "check the name (`arctl ls experiments`)")
    # runs of the selection that have logged nothing yet (pending, at their first steps, a --force rerun queued):
    # skipped, and named in the index, so that a report of the export says they exist (from a hunt: it could not)
    unlogged = {r.run_id: r for r in unlogged_runs(workdir, {s.run_id for s in every})
                if (ids is None or r.run_id in ids) and (wanted is None or {r.experiment, *(e for e, _ in r.cells)} & wanted)}
    for rid in sorted((ids or set()) - found - unread):  # asked for, and no W&B history to read
        there = (workdir / "runs" / rid).is_dir()
        state = (run_state(workdir / "runs" / rid, recorded, exported) or UNKNOWN_STATE) if there else None
        result.skipped.append((rid, f"nothing logged yet (state {state})" if there
                               else "not in the workspace (the sweep has not launched it there)"))
    for rid, run in unlogged.items():
        if rid not in {r for r, _ in result.skipped}:
            result.skipped.append((rid, run.state if NOTHING_LOGGED in run.state else f"{run.state}, {NOTHING_LOGGED} yet"))
        result.not_ended[rid] = run
    if not plans:
        folders = [p for p in (workdir / "runs").iterdir() if p.is_dir()]
        first, reason = result.skipped[0] if result.skipped else ("", "")
        reason = reason.removesuffix(UNFINISHED_HINT)
        there = found or any((workdir / "runs" / rid).is_dir() for rid, _ in result.skipped)  # (asked for: in it)
        blank = all(NOTHING_LOGGED in r for _, r in result.skipped)  # --unfinished has nothing of them to export
        why = (f"{len(result.skipped)} {'have logged nothing yet' if blank else 'not completed'} (the first, {first}: "
               f"{reason}); " + ("export them once they have logged steps" if blank else
                                 "--unfinished exports them as they are") if there and result.skipped
               else f"none of the {len(ids)} runs asked for is in it (another --scale or --seeds?)" if ids is not None
               else f"none of its {len(folders)} run folders has W&B files (runs with wandb.mode=disabled, or not "
                    "started, log none: an export holds what reports read)" if folders and not found
               else "none found")
        raise ReportError(f"no runs to export from {workdir}: {why}")

    index.setdefault("version", INDEX_VERSION)
    entries = index.setdefault("runs", {})
    # the runs skipped that have not ended, this export's and an earlier one's of runs this one did not look at
    # (another selection's); a run exported since is no longer skipped
    looked = {rid for rid, _ in result.skipped} | {run.run_id for run, _, _ in plans}
    earlier = {rid: e for rid, e in (index.get(SKIPPED) or {}).items()
               if rid not in looked and rid not in entries and not _selected(SkippedRun.from_index(rid, e), wanted, ids)}
    skipped = {**earlier, **{rid: run.as_index() for rid, run in result.not_ended.items()}}
    index.pop(SKIPPED, None)
    # what is left to copy, with what an export before this one left (another selection's: kept until it is
    # completed); a run this one found in place, or decided not to export, is not
    pending = {str(rid) for rid in index.get(PENDING) or []} | {run.run_id for run, _, _ in plans
                                                                if run.action != "unchanged"}
    pending -= {run.run_id for run, _, _ in plans if run.action == "unchanged"} | {rid for rid, _ in result.skipped}

    def save_index() -> None:
        index.pop(PENDING, None)
        left = {rid: e for rid, e in sorted(skipped.items()) if rid not in entries}
        atomic_write(out / INDEX_FILE, json.dumps({**index, "runs": dict(sorted(entries.items())),
                                                   **({SKIPPED: left} if left else {}),
                                                   **({PENDING: sorted(pending)} if pending else {})}, indent=1) + "\n")

    out.mkdir(parents=True, exist_ok=True)
    # the index first and after every run: an interrupted export (Ctrl-C, a kill) leaves an export that
    # lists exactly the runs in place, and the same command completes it
    save_index()
    runs_out = out / "runs"
    runs_out.mkdir(parents=True, exist_ok=True)
    with _bar(progress, sum(run.action != "unchanged" for run, _, _ in plans), "copying runs") as advance:
        for run, files, run_dir in plans:
            result.runs.append(run)
            if run.action == "unchanged":
                continue
            before = entries.get(run.run_id) or {}
            if before.get("files") == run.files and all((runs_out / run.run_id / p).is_file() for p in run.files):
                # the same files in place, another state or name (a run exported running, completed since)
                entries[run.run_id] = {**before, "experiment": run.experiment, "arm": run.arm, "seed": run.seed,
                                       "state": run.state}
                pending.discard(run.run_id)
                save_index()
            else:
                _copy_run(run, files, run_dir, out, entries, save_index, pending)
            advance()
    shutil.rmtree(out / STAGING, ignore_errors=True)
    save_index()  # pending: what another export left, or nothing
    return result


def _selected(run: SkippedRun | None, wanted: set[str] | None, ids: set[str] | None) -> bool:
    """Whether an export of ``wanted`` experiments (None: all) and ``ids`` (None: any) looks at ``run``."""
    if run is None:
        return ids is None and wanted is None
    return (ids is None or run.run_id in ids) and (wanted is None or bool({run.experiment, *(e for e, _ in run.cells)}
                                                                          & wanted))


def skipped_in_export(workdir: str | Path) -> list[SkippedRun]:
    """The runs an export's index names as skipped, not ended in their workspace when it was exported
    (:data:`SKIPPED`); [] for a workspace, or an index without them (an earlier arctl's)."""
    if not (Path(workdir) / INDEX_FILE).is_file():
        return []
    try:
        listed = read_index(Path(workdir)).get(SKIPPED)
    except ReportError:  # unreadable: the readers say so in their own words
        return []
    if not isinstance(listed, dict):
        return []
    return [run for rid, e in sorted(listed.items()) if (run := SkippedRun.from_index(rid, e)) is not None]


def _copy_run(run: ExportedRun, files: list[Path], run_dir: Path, out: Path, entries: dict, save_index,
              pending: set[str]) -> None:
    """Copy one run's files into ``out/runs/`` (staged beside, placed whole) and list it in the index with
    the sha256 and size of the bytes copied (a live run's files grow between planning and copying: from a
    hunt, the index described other bytes than the export held), no longer ``pending``. Where listing it fails
    (a full disk), the placed folder goes again (and the one it replaced comes back): runs/ holds only what the
    index lists."""
    runs_out = out / "runs"
    staging = out / STAGING / run.run_id  # outside runs/: a crash leaves no half run there
    previous = out / STAGING / ".previous" / run.run_id  # the folder it replaces, until the index lists the new one
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(previous, ignore_errors=True)
    copied = []
    for path in files:
        target = staging / path.relative_to(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(target)
    run.files = {str(p.relative_to(staging)): file_sha256(p) for p in copied}
    run.bytes = sum(p.stat().st_size for p in copied)
    before = entries.pop(run.run_id, None)  # not listed while its folder is being replaced
    target = runs_out / run.run_id
    if target.exists() or target.is_symlink():
        save_index()
        previous.parent.mkdir(parents=True, exist_ok=True)
        os.replace(target, previous)  # kept aside until the new one is listed
    _place(staging, target)
    entries[run.run_id] = {"experiment": run.experiment, "arm": run.arm, "seed": run.seed, "state": run.state,
                           "files": run.files, "bytes": run.bytes,
                           "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    pending.discard(run.run_id)  # listed in the same write
    try:
        save_index()
    except OSError:
        pending.add(run.run_id)
        entries.pop(run.run_id, None)
        shutil.rmtree(target, ignore_errors=True)
        if previous.exists():
            os.replace(previous, target)
            if before is not None:
                entries[run.run_id] = before
                try:  # listed again; where even that fails, it goes: runs/ holds only what the index lists
                    save_index()
                except OSError:
                    entries.pop(run.run_id, None)
                    shutil.rmtree(target, ignore_errors=True)
        raise
    shutil.rmtree(previous, ignore_errors=True)

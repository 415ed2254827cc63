"""Where runs live: the workspace directory and the layout of one run directory.

Workspace (``--workdir``, else ``$ARCTL_HOME``, else ``./arctl-runs``)::

    registry.sqlite          the run registry (SQLite, WAL)
    runs/<run_id>/           one directory per run
        config.yaml          the frozen resolved config (the job reads only this)
        provenance.json      arctl version, git commit and code hash it was launched with, and the code each attempt
                             of its job started with (arctl.launch.provenance)
        shared.json          the other (experiment, arm) cells it serves (a sweep with share_arms; arctl.launch.shared)
        status.json          written by the job: state, step, last metric, W&B id, error
        job/                 submitit logs and the sbatch script (links into jobs/ for arrays)
        checkpoints/         the backend's checkpoints
        wandb/               W&B's ``dir=``
    jobs/<job_id>/           submitit's folder for SLURM jobs (pickles, logs, sbatch script)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from arctl.backends.base import INIT_MODEL_DIR, INIT_RECORD
from arctl.config.files import nearest_existing, workdir_named, workdir_origin, workdir_path, workdir_remedy
from arctl.launch import states
from arctl.launch.progress import METRIC_FILES
from arctl.launch.status_file import STATUS_FILE, read_status
from arctl.track.phase import PHASE_FILE, WARNING_FILE

EXPORT_INDEX = "export.json"  # marks an export (`arctl export`): runs for reports, no registry, no checkpoints
UTF8_LOCALE_REMEDY = "set LC_ALL=C.UTF-8 or PYTHONUTF8=1"  # where Python names files in an encoding other than UTF-8
FILE_TIME_SLACK_S = 1.0  # the coarsest file-time resolution in use (1 s on some file systems)


def queued_job(run_dir: Path) -> str | None:
    """The SLURM job id of a run submitted whose job has not started, else None.

    The launcher writes status.json "submitted" before it submits, and links ``job/<job id>`` once
    sbatch has accepted the job; the job itself writes "running" when it starts. So: the status
    still says "submitted", and the newest job link is not older than that status. Both times are
    the file system's (the status file's and the link's mtimes), never a host's clock against a file
    server's. A submission sbatch refused leaves "submitted" beside older links only: None."""
    run_dir = Path(run_dir)
    if read_status(run_dir).get("state") != "submitted":
        return None
    try:
        since = (run_dir / STATUS_FILE).stat().st_mtime
        links = [p for p in (run_dir / "job").iterdir() if p.is_symlink() and states.SLURM_JOB_ID.match(p.name)]
        made = sorted((p.lstat().st_mtime, p.name) for p in links)
    except OSError:
        return None
    return made[-1][1] if made and made[-1][0] >= since - FILE_TIME_SLACK_S else None


def workspace_path(workdir: str | Path | None = None) -> Path:
    """The workspace directory: ``workdir``, else ``$ARCTL_HOME``, else ``./arctl-runs`` (absolute)."""
    return workdir_path(workdir).resolve()


def path_encoding_problem(root: str | Path, origin: str | None = None) -> str | None:
    """Why workspace ``root`` cannot be handed to what writes its paths as UTF-8 (W&B's service, the registry),
    or None: its bytes on disk (``os.fsencode``, as this process names files) must be UTF-8 that reads back as
    the same path. From a hunt: under a latin-1 locale (or for a path with a byte that is not UTF-8) wandb-core
    re-encoded the run's folder as UTF-8 and wrote into one that does not exist (the tiny run ended PREEMPTED,
    "W&B lost steps ... a full disk?", and so did every resume), or W&B's settings and the registry raised
    UnicodeEncodeError. ``origin``: where the command line took the path from (the remedy names the setting)."""
    import os
    import sys

    text, encoding = str(root), sys.getfilesystemencoding()
    locale_utf8 = encoding.replace("-", "").lower() == "utf8"
    try:
        raw = os.fsencode(text)
        if raw.decode("utf-8") == text:
            return None
        why = (f"its name on disk is UTF-8 for {raw.decode('utf-8')}, which this locale's encoding ({encoding}) "
               "reads otherwise")
    except UnicodeError:
        why = (f"its name is not UTF-8 in this locale's encoding ({encoding})" if not locale_utf8
               else "its name has bytes that are not UTF-8")
    todo = "" if locale_utf8 else f"{UTF8_LOCALE_REMEDY}, or "
    return (f"{workdir_named(root, origin)}: W&B and the registry write paths as UTF-8, and {why} — {todo}use a "
            f"path of ASCII characters ({workdir_remedy(origin)})")


def workdir_arg(root: str | Path, stored: bool = False) -> str:
    """What a command a hint prints about workspace ``root`` adds to name it: ``""`` where ``root`` is the
    workspace a bare command means (:func:`workspace_path`: ``$ARCTL_HOME``, else ``./arctl-runs`` of the
    working directory), else `` --workdir <root>``, absolute (a report's files are read from elsewhere) and
    quoted for a shell. From a hunt: hints after ``--workdir ws`` said ``arctl sweep paper --seeds 0``,
    ``arctl logs RUN``, ``arctl status``, which act on ./arctl-runs (the sweep started 9 runs in a new, empty
    workspace). Every hint that names a command about a workspace takes its ``--workdir`` from here.
    ``stored``: for a message kept to be read later (the registry's errors), named always: it is read from a
    shell in any folder (from a review: a repair's stored "`arctl resume RUN` resumes it" acted on ./arctl-runs
    of wherever `arctl status` was run)."""
    root = Path(root).expanduser().absolute()
    if stored:
        return f" --workdir {shlex.quote(str(root))}"
    try:
        if root.resolve() == workspace_path():
            return ""
    except (OSError, RuntimeError):  # a path that cannot be resolved (a symlink loop): named as it is
        pass
    return f" --workdir {shlex.quote(str(root))}"


@dataclass(frozen=True)
class Workspace:
    root: Path
    # where the command line took it from (arctl.config.files.workdir_origin): what its errors name;
    # None: built from a path (a test, a job)
    origin: str | None = field(default=None, compare=False)

    @classmethod
    def open(cls, workdir: str | Path | None = None) -> Workspace:
        """The workspace every command means (``workdir``, else ``$ARCTL_HOME``, else ``./arctl-runs``).
        LaunchError (one line) where its layout cannot be used (:meth:`layout_problem`): every command
        refuses it before it reads or writes anything."""
        workspace = cls(workspace_path(workdir), workdir_origin(workdir))
        if problem := workspace.layout_problem():
            from arctl.launch.executors import LaunchError

            raise LaunchError(problem)
        return workspace

    @property
    def named(self) -> str:
        """The workspace as an error names it, with where it came from (``ARCTL_HOME=/x``, ...)."""
        return workdir_named(self.root, self.origin)

    def layout_problem(self) -> str | None:
        """Why this folder cannot be an arctl workspace as it is, or None; read-only (nothing is created or
        probed): it, or a folder above it, is a file; ``registry.sqlite`` is not a file (a folder: SQLite
        cannot open it, and a repair would replace it); ``runs`` or ``jobs`` is a file. A folder that
        cannot be looked into is left to what uses it (its error names the file)."""
        try:
            return self._layout_problem()
        except OSError:
            return None

    def _layout_problem(self) -> str | None:
        place = nearest_existing(self.root)
        if place.exists() and not place.is_dir():
            if place == self.root:
                return f"{self.named} is a file, not an arctl workspace (a folder) — {workdir_remedy(self.origin)}"
            return f"{self.named}: {place} is a file, not a folder — {workdir_remedy(self.origin)}"
        if not self.root.is_dir():
            return None
        registry = self.registry_path
        if registry.exists() and not registry.is_file():
            if self.runs_dir.is_dir() and any(self.runs_dir.iterdir()):
                then = (f"then `arctl repair{workdir_arg(self.root, stored=True)}` rebuilds the registry from the run folders "
                        f"(the runs are in {self.runs_dir}, not in it)")
            else:  # a repair would refuse: there is nothing to rebuild from
                then = "the workspace has no runs yet, so nothing is lost: the next `arctl run` creates the registry"
            kind = "a folder" if registry.is_dir() else "not a regular file"
            return (f"{registry} is {kind}, not a registry file (the workspace's SQLite database) — "
                    f"move it aside; {then}")
        for folder, holds in ((self.runs_dir, "each run in runs/<run id>/"), (self.jobs_dir, "SLURM's job files in jobs/")):
            if folder.exists() and not folder.is_dir():
                return (f"{folder} is a file, not a folder: arctl keeps {holds} — move the file aside, "
                        "then run the command again")
        return None

    @property
    def registry_path(self) -> Path:
        return self.root / "registry.sqlite"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def jobs_dir(self) -> Path:
        return self.root / "jobs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def exists(self) -> bool:
        return self.registry_path.is_file()

    def is_export(self) -> bool:
        return (self.root / EXPORT_INDEX).is_file()

    def unregistered(self, run_ids) -> list[str]:
        """Those of ``run_ids`` (runs the registry has no row for) whose run folder holds a run: a
        config.yaml and something a job made (a state past "submitted" in status.json, a checkpoint, a
        W&B file), or a SLURM job that is queued for it (:func:`queued_job`). The registry was deleted,
        emptied or copied from elsewhere: a launch must not take them for new runs (it would train
        into them, submit a second job for them, or remove them when the submission is refused). A
        folder a launch only prepared (its own, a concurrent launch's, or one an interrupted rollback
        left) holds none of that and is not counted."""
        out = []
        for run_id in run_ids:
            run_dir = self.run_dir(run_id)
            try:
                if not (run_dir / "config.yaml").is_file():
                    continue
                state = read_status(run_dir).get("state")
                made = any(p.is_file() for name in ("checkpoints", "wandb") for p in (run_dir / name).rglob("*"))
            except OSError:  # a folder this user cannot look into (another member's, umask 077): not a new run's
                out.append(run_id)  # (from a hunt: `arctl status` was a PermissionError traceback)
                continue
            if made or state not in (None, "submitted") or queued_job(run_dir):
                out.append(run_id)
        return out


def workspace_root(run_dir: Path) -> Path:
    """The workspace of run folder ``run_dir`` (``<root>/runs/<run id>``, :meth:`Workspace.run_dir`): what a
    warning about one run names in the command it suggests (:func:`workdir_arg`)."""
    return Path(run_dir).parent.parent


def run_paths(run_dir: Path) -> dict[str, Path]:
    """The files and folders of one run directory."""
    return {
        "config": run_dir / "config.yaml",
        "provenance": run_dir / "provenance.json",
        "shared": run_dir / "shared.json",
        "status": run_dir / STATUS_FILE,
        "job": run_dir / "job",
        "checkpoints": run_dir / "checkpoints",
        "wandb": run_dir / "wandb",
        "warning": run_dir / WARNING_FILE,  # what the job warned about (arctl.track.phase)
        "phase": run_dir / PHASE_FILE,  # what it does before its first step, e.g. waiting for another run
        "metrics": run_dir / METRIC_FILES[0],  # a row per step (tiny; verl's file log is the other)
        "verl_metrics": run_dir / METRIC_FILES[1],
        "inputs": run_dir / "inputs.json",  # what identified the inputs it reads from outside its config (an eval)
        "init": run_dir / INIT_RECORD,  # what it took of the run it starts from (trainer.init_from)
        "init_model": run_dir / INIT_MODEL_DIR,  # verl: that run's weights merged into a model
    }

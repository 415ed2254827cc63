"""Create a run directory and freeze its resolved config (``config.yaml``), read it back in the job."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import yaml

from arctl.config import safe_yaml
from arctl.config.files import atomic_write
from arctl.launch.workspace import run_paths

PATH_KEYS = ("run_dir", "init_dir")
"""What :func:`read_run_config` adds to a frozen config and config.yaml never holds (they name folders
of this machine): the run's folder and, for a run that starts from another's weights, that run's."""
READ_KEYS = ("run_id", *PATH_KEYS)
"""What names the run rather than what it computes: its id (written by :func:`frozen_config`; a
config.yaml without one gets its folder's name) and :data:`PATH_KEYS`. Every filter of these keys
(the run id's hash, shared arms, resume, the W&B config) builds on this tuple."""


def write_inputs(run_dir: Path, identity: dict) -> None:
    """Record ``identity`` (:meth:`arctl.backends.base.Backend.inputs_identity`) as what the run's attempt reads."""
    atomic_write(run_paths(Path(run_dir))["inputs"], json.dumps(identity, indent=1, sort_keys=True) + "\n")


def read_inputs(run_dir: Path) -> dict | None:
    """What :func:`write_inputs` recorded, or None: a run launched before arctl recorded it (or whose backend
    has nothing to record), or a file that cannot be read as one (nothing compared: the run is left as it is)."""
    try:
        identity = json.loads(run_paths(Path(run_dir))["inputs"].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return identity if isinstance(identity, dict) else None


class RunDirError(RuntimeError):
    """A run directory is missing or its config.yaml is unreadable."""


def frozen_config(config: dict, run_id: str, wandb_id: str) -> dict:
    """The config as the job will see it: the resolved config plus ``run_id`` and ``wandb.id``."""
    frozen = {k: v for k, v in config.items() if k not in READ_KEYS}
    frozen["run_id"] = run_id
    frozen["wandb"] = {**frozen.get("wandb", {}), "id": wandb_id}
    return frozen


def dump_config(config: dict) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100)


def prepare_run_dir(run_dir: Path, config: dict, fresh: bool = False) -> Path:
    """Create ``run_dir`` with config.yaml, job/, checkpoints/, wandb/.

    ``fresh`` (a --force rerun of a finished run) moves the old checkpoints/, wandb/ and
    status.json to ``previous/<time>/`` so the run starts from scratch. The config is always
    (re)written from ``config``, which has the same identity hash as any earlier version.
    """
    paths = run_paths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if fresh:
        archive_previous(run_dir)
    for key in ("job", "checkpoints", "wandb"):
        paths[key].mkdir(exist_ok=True)
    atomic_write(paths["config"], dump_config(config))
    return run_dir


# the launcher writes a new provenance (and a phase, for a run that waits for another)
# the metrics files too: a rerun that found them would keep (and relog) the replaced run's step 0, and show its progress
# and what identified its inputs (an eval-only run's checkpoint): a refused rerun puts the evaluated run's back
# and what a run that starts from another took of it (init.json; verl's merged copy, init_model/): a rerun takes the
# weights that run has now (from a review: verl's rerun reused the merged copy of that run's previous generation)
ARCHIVED = ("checkpoints", "wandb", "status", "provenance", "warning", "phase", "metrics", "verl_metrics", "inputs",
            "init", "init_model")
MANIFEST = "archived.txt"  # in an archive: the keys :func:`archive_previous` set out to move, one per line
CLAIM_MARK = "#claim"  # the manifest's line naming the claim of the rerun that moved them
KNOWN_MARK = "#archives"  # the manifest's line naming every key its arctl archives (what a restore may remove)
LEGACY_ARCHIVED = ARCHIVED[:6]  # what an arctl that wrote no such line archived (not the metrics files)


def archive_previous(run_dir: Path, claim: str | None = None) -> Path | None:
    """Move a finished run's checkpoints/, wandb/, status.json, provenance.json, warning.json, phase.json,
    metrics files (metrics.jsonl, verl_metrics.jsonl) and inputs.json to
    ``previous/<time>/``, with a copy of its config.yaml (a --force rerun starts from scratch, under
    another W&B id); returns that folder (None: nothing to move). :func:`restore_previous` undoes it.
    Renames only (never a copy and delete: one that stopped halfway would leave two half runs), after
    a manifest of what is moved, which names the registry ``claim`` of the rerun (a launch that dies
    halfway: :func:`claimed_archive` finds what it moved); a failure puts back what was moved and raises."""
    paths = run_paths(run_dir)
    archive = run_dir / "previous" / time.strftime("%Y%m%d-%H%M%S")
    n = 1
    while archive.exists():  # a second rerun within the same second
        archive, n = run_dir / "previous" / f"{time.strftime('%Y%m%d-%H%M%S')}-{n}", n + 1
    keys = [key for key in ARCHIVED if paths[key].exists()]
    if not keys:
        return None
    archive.mkdir(parents=True, exist_ok=True)
    try:  # what needs space first (the manifest, the copy); then renames
        (archive / MANIFEST).write_text("".join(f"{key}\n" for key in [*keys, "config"])
                                        + f"{KNOWN_MARK} {' '.join(ARCHIVED)}\n"
                                        + (f"{CLAIM_MARK} {claim}\n" if claim else ""))
        if paths["config"].is_file():
            shutil.copy2(paths["config"], archive / paths["config"].name)
        for key in keys:
            os.rename(paths[key], archive / paths[key].name)
    except BaseException as err:
        (archive / paths["config"].name).unlink(missing_ok=True)  # a copy (perhaps half written): not put back
        try:
            restore_previous(run_dir, archive)
        except Exception as undo:  # noqa: BLE001 - the first error is the one to report
            raise RunDirError(f"{run_dir}: moving its previous files aside failed ({err}) and moving them back "
                              f"failed too ({undo}): they are in {archive}") from err
        raise
    return archive


def archived_after(run_dir: Path, since: float) -> list[Path]:
    """The archives of ``run_dir``'s earlier generations (``previous/<time>/``: :func:`archive_previous`, as a
    ``--force`` rerun or a rerun of changed inputs makes them) made after ``since``, oldest first: the time of
    a file of the same workspace (its clock, not the launching host's), e.g. a run's :data:`arctl.backends.base.INIT_RECORD`. Read
    from the time their manifest was written (a stat each: no checkpoint is read)."""
    try:
        entries = sorted((run_dir / "previous").iterdir())
    except OSError:  # none (or unreadable: nothing to say)
        return []
    found = []
    for archive in entries:
        try:
            made = (archive / MANIFEST).stat().st_mtime
        except OSError:
            continue
        if made > since:
            found.append(archive)
    return found


def restore_previous(run_dir: Path, archive: Path) -> None:
    """Put back what :func:`archive_previous` moved to ``archive`` (a rerun whose submission was
    refused: the run is the finished run it was), replacing what the rerun wrote since and removing
    what it added (a provenance.json the run had none of; checkpoints/ and wandb/ come back as the
    run had them). Safe to run again after an interruption: a key the manifest lists whose file is no
    longer in the archive was put back already (or never moved) and is left alone; without the
    manifest (removed last) there is nothing left to do."""
    paths = run_paths(run_dir)
    try:
        lines = (archive / MANIFEST).read_text().splitlines()
    except FileNotFoundError:
        return  # put back already (the manifest goes last)
    listed = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    # the keys the arctl that archived knew: a file of another key (an older arctl left its metrics files
    # in the run folder) is the finished run's, not the rerun's, and stays
    known = next((line.split()[1:] for line in lines if line.startswith(KNOWN_MARK)), list(LEGACY_ARCHIVED))
    for key in (*(k for k in ARCHIVED if k in known), "config"):
        kept = archive / paths[key].name
        moved = key in listed
        if moved and not kept.exists():
            continue  # put back already, or never moved
        if paths[key].is_dir() and not paths[key].is_symlink():
            shutil.rmtree(paths[key])  # the rerun's (its job never ran: empty, or the launcher's own)
        elif paths[key].exists() or paths[key].is_symlink():
            paths[key].unlink()  # the rerun's
        if moved:
            os.replace(kept, paths[key])
    (archive / MANIFEST).unlink(missing_ok=True)
    for folder in (archive, archive.parent):  # previous/ itself when this was its only archive
        try:
            folder.rmdir()
        except OSError:
            break


def claimed_archive(run_dir: Path, claim: str | None) -> Path | None:
    """The archive of ``run_dir`` that the rerun of registry claim ``claim`` made and nothing has put
    back yet (its manifest is there and names the claim), or None."""
    if not claim:
        return None
    for archive in (Path(run_dir) / "previous").glob("*"):
        try:
            lines = (archive / MANIFEST).read_text().splitlines()
        except OSError:
            continue
        if f"{CLAIM_MARK} {claim}" in lines:
            return archive
    return None


def read_frozen_run(run_dir: Path, run_id: str, experiment: str, arm: str, seed: int) -> dict:
    """The frozen config of a run about to be resumed, checked as input: the keys added since it was
    written at the values it computed with (:func:`arctl.launch.run_id.with_keys_added_later`), then a
    ``config.yaml`` edited by hand is validated like a composed config, and must still be the run the registry names (the same
    experiment, arm, seed and identity hash: an edited config is another run, launched with
    ``arctl run``). RunDirError (one line) otherwise."""
    from arctl.compose.errors import SpecError
    from arctl.compose.validate import validate_resolved
    from arctl.launch.run_id import make_run_id, with_keys_added_later

    config = with_keys_added_later(read_run_config(run_dir))  # a run frozen before a key existed resumes
    path = run_paths(Path(run_dir))["config"]
    try:
        validate_resolved({k: v for k, v in config.items() if k not in READ_KEYS})
    except SpecError as err:  # the rule's own hint names an override, which a resume does not take (from a hunt)
        what = err.what if err.where is None else f"{err.where}: {err.what}"
        raise RunDirError(f"{path}: {what} — a run resumes from its config.yaml as it is: restore the file if it was "
                          "edited, or launch the changed config as a new run with `arctl run`") from None
    named = (config.get("experiment"), config.get("arm"), config.get("seed"))
    if named != (experiment, arm, seed):
        raise RunDirError(f"{path} names {named[0]}/{named[1]}/s{named[2]} but the registry has run {run_id} as "
                          f"{experiment}/{arm}/s{seed}: the file was edited; restore it or launch a new run")
    if make_run_id(config) != run_id:
        raise RunDirError(f"{path} was edited: it is no longer the config of {run_id} (it would be run "
                          f"{make_run_id(config)}); restore it, or launch the changed config with `arctl run`")
    return config


def read_run_config(run_dir: Path) -> dict:
    """The frozen config of ``run_dir`` with ``run_dir`` (absolute) added, and ``init_dir`` (the
    folder of the run it starts from) when it has a ``trainer.init_run``."""
    path = run_paths(Path(run_dir))["config"]
    try:
        config = safe_yaml.load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{path} does not exist: not an arctl run directory") from None
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError) as err:
        raise RunDirError(f"{path} cannot be read: {err}") from None
    if not isinstance(config, dict):
        raise RunDirError(f"{path} does not hold a config mapping")
    config["run_dir"] = str(Path(run_dir).resolve())
    config.setdefault("run_id", Path(run_dir).name)
    init_run = (config.get("trainer") or {}).get("init_run") if isinstance(config.get("trainer"), dict) else None
    if init_run:  # trainer.init_from: the run it starts from is a sibling folder of the workspace
        from arctl.launch.run_id import SAFE_ID

        if not SAFE_ID.match(str(init_run)):
            raise RunDirError(f"{path}: trainer.init_run={init_run!r} is not a run id (the file was edited)")
        config["init_dir"] = str(Path(run_dir).resolve().parent / str(init_run))
    return config


def run_starts_from(run_dir: Path) -> str | None:
    """The run the run of ``run_dir`` starts from (its frozen ``trainer.init_run``), else None (none, or no config
    to read: the job itself reports an unreadable config)."""
    try:
        return (read_run_config(run_dir).get("trainer") or {}).get("init_run") or None
    except (RunDirError, AttributeError):
        return None

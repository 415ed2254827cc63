"""Finding the runs of a workspace: their .wandb fragment files, config.yaml and shared.json.

Workspace layout: ``<workdir>/runs/<run_id>/config.yaml`` (experiment, arm, seed) and
``<workdir>/runs/<run_id>/wandb/**/run-*.wandb``. A directory without ``runs/`` is searched for
``run-*.wandb`` files directly, one run per W&B run id.

A run may serve cells besides its own (a sweep with ``share_arms: true`` runs a config shared by
several experiments, or by arms of other names, once): ``<workdir>/runs/<run_id>/shared.json`` =
``{"cells": [[experiment, arm], ...]}`` lists them (:func:`read_served`); a file of an earlier
arctl, ``{"experiments": [...]}``, serves those experiments under the run's own arm.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arctl.track.identity import EVAL_SUFFIX

SHARED_FILE = "shared.json"  # written by the launcher (arctl.launch.shared)


class RunReadWarning(UserWarning):
    """A run file was truncated or corrupt, or a run could not be read; the rest was kept."""


@dataclass
class RunSource:
    """Where one arctl run's data is: its W&B fragments and (optionally) its config.yaml."""

    run_id: str
    files: list[Path]
    config_path: Path | None = None

    def signature(self) -> list[list]:
        """What the cache of this run is valid for: each file's path, size, modification time, inode and
        change time (a file replaced by rename with its size and mtime kept, as ``cp -p`` or ``tar`` do or
        on a filesystem with 1-s timestamps, has another inode or ctime). OSError where a file is gone."""
        sig = []
        for p in [*self.files, *([self.config_path] if self.config_path else [])]:
            st = p.stat()
            sig.append([str(p), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
        return sig


def default_workdir() -> Path:
    """``$ARCTL_HOME`` if set, else ``./arctl-runs`` (:func:`arctl.config.files.workdir_path`)."""
    from arctl.config.files import workdir_path

    return workdir_path()


def _unique_wandb_files(root: Path) -> list[Path]:
    seen: dict[Path, Path] = {}
    for p in sorted(root.rglob("run-*.wandb")):
        real = p.resolve()  # wandb's latest-run symlink points at the same file
        if real not in seen:
            seen[real] = p
    return sorted(seen.values(), key=str)


def discover_runs(workdir: str | Path, unreadable: list[str] | None = None,
                  keep: Callable[[Path, Path | None], bool] | None = None) -> list[RunSource]:
    """Every run under ``workdir`` (see the module docstring for the layout). A run folder that cannot be
    looked into (another user's, made with umask 077) is left out with one line naming it, appended to
    ``unreadable``, else warned as a :class:`RunReadWarning`: from a hunt, its PermissionError aborted every
    report and export of the workspace, of every experiment. ``keep(run folder, config.yaml or None)``: whether a run
    folder with a ``wandb/`` is wanted, asked before its W&B files are searched for (a report of 100 runs of a
    workspace of 5,000 searched every run's ``wandb/``)."""
    workdir = Path(workdir)
    runs_root = workdir / "runs"
    out: list[RunSource] = []
    if runs_root.is_dir():
        for run_dir in sorted(runs_root.iterdir()):
            try:
                if not run_dir.is_dir() or not (run_dir / "wandb").is_dir():
                    continue
                cfg = run_dir / "config.yaml"
                config_path = cfg if cfg.is_file() else None
                if keep is not None and not keep(run_dir, config_path):
                    continue
                files = _unique_wandb_files(run_dir / "wandb")
                if files:
                    out.append(RunSource(run_dir.name, files, config_path))
            except OSError as err:
                line = (f"run {run_dir.name}: its folder {err.filename or run_dir} cannot be read "
                        f"({err.strerror or err}); left out (its owner can let you read it: chmod -R a+rX)")
                if unreadable is None:
                    warnings.warn(line, RunReadWarning, stacklevel=2)
                else:
                    unreadable.append(line)
        return out
    if workdir.is_dir():
        by_id: dict[str, list[Path]] = {}
        for p in _unique_wandb_files(workdir):
            by_id.setdefault(p.stem[4:], []).append(p)
        out = [RunSource(rid, files) for rid, files in sorted(by_id.items())]
    return out


class ConfigReadError(ValueError):
    """A run's config.yaml cannot be used (one line: why)."""


def read_run_yaml(path: Path) -> dict:
    """A run's frozen config.yaml; :class:`ConfigReadError` when it cannot be read, is not a mapping,
    or names its experiment with something that is not a name (a reader then says so and falls back to
    the W&B config, instead of leaving the run out of a report without a word)."""
    from arctl.config import safe_yaml

    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"))
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError) as err:
        raise ConfigReadError(" ".join(str(err).split())[:200] or type(err).__name__) from None
    if not isinstance(data, dict):
        raise ConfigReadError(f"not a mapping but {type(data).__name__}")
    if "experiment" in data and not isinstance(data["experiment"], str):
        raise ConfigReadError(f"its experiment is {data['experiment']!r}, not a name")
    return data


def read_run_config(path: Path, cache: Path | None, run_id: str, *, store: bool = True) -> dict:
    """:func:`read_run_yaml` of run ``run_id``'s config.yaml, parsed once and then read from the runs' cache folder
    ``cache`` while the file is as it was (:func:`arctl.track.runs.cache.cached_config`: its path, size, mtime,
    inode and ctime) and can be read; ``store``: cache what is parsed here (an export reads the workspace's cache
    but writes nothing in the workspace). Without ``cache``, :func:`read_run_yaml`."""
    from arctl.track.runs.cache import cached_config, config_key, store_config

    if cache is None:
        return read_run_yaml(path)
    try:
        key = config_key(path)  # before the file is read: a file that changes meanwhile leaves a key that is stale
    except OSError:
        return read_run_yaml(path)  # says why it cannot be read
    config = cached_config(cache, run_id, key)
    if config is not None and os.access(path, os.R_OK):  # a file this user cannot read is read (and refused) as one
        return config
    config = read_run_yaml(path)
    if store:
        store_config(cache, run_id, key, config)
    return config


def _read_yaml(path: Path) -> dict:
    """A run's frozen config; {} when it cannot be read (the run is then known by its W&B files)."""
    from arctl.config import safe_yaml

    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"))
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def run_identity(config: dict, fallback_name: str = "") -> tuple[str, str, int | None]:
    """(experiment, arm, seed) of a run config; arm/seed fall back to a W&B name ``{arm}-s{seed}`` (or an eval-only
    run's ``{arm}-s{seed}-eval``: :data:`arctl.track.identity.EVAL_SUFFIX`)."""

    experiment = str(config.get("experiment") or config.get("wandb", {}).get("group") or "")
    arm = config.get("arm")
    seed = config.get("seed")
    if (arm is None or seed is None) and fallback_name:
        base, sep, s = fallback_name.removesuffix(EVAL_SUFFIX).rpartition("-s")
        if sep and s.isdigit():
            arm = arm if arm is not None else base
            seed = seed if seed is not None else int(s)
    try:
        seed = int(seed) if seed is not None else None
    except (TypeError, ValueError):
        seed = None
    return experiment, str(arm if arm is not None else fallback_name), seed


def read_served(run_dir: str | Path, own_arm: str | None = None) -> list[tuple[str, str | None]]:
    """The (experiment, arm) cells a run serves besides its own, per ``run_dir/shared.json``, sorted
    and without repeats: its ``cells``; an earlier arctl's ``experiments`` list serves each under
    ``own_arm`` (None when not given). [] when the file is absent or broken (it then serves nothing)."""
    try:
        data = json.loads((Path(run_dir) / SHARED_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    cells = data.get("cells")
    if isinstance(cells, list):
        out = {(c[0], c[1]) for c in cells
               if isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) and x for x in c)}
        return sorted(out)
    names = data.get("experiments")
    if not isinstance(names, list):
        return []
    return [(n, own_arm) for n in sorted({n for n in names if isinstance(n, str) and n})]

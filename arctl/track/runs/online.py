"""Runs of a W&B project read through the W&B API (:mod:`arctl.track.wandb_online`), cached like
workspace runs (:mod:`arctl.track.runs.cache`) under ``$ARCTL_HOME/.arctl-cache/wandb/<project>``."""

from __future__ import annotations

import re
from pathlib import Path

from arctl.track.identity import wandb_generation
from arctl.track.run_data import RunData
from arctl.track.runs.cache import CACHE_VERSION, WORKSPACE_CACHE, _cached_meta, _write_cache
from arctl.track.runs.discover import run_identity
from arctl.track.runs.pool import _progress
from arctl.track.runs.stitch import nonfinite_notes, stitch_logged


def ingest_online(run: RunData, run_id: str, signature: list, cache_dir: str) -> dict:
    """Cache one run read through the W&B API (same layout as :func:`arctl.track.runs.load.ingest_offline`)."""
    experiment, arm, seed = run_identity(run.config, run.name)
    wide, logged, notes = stitch_logged([run])
    meta = {
        "version": CACHE_VERSION,
        "run_id": run_id,
        "experiment": experiment or run.group,
        "arm": arm,
        "seed": seed,
        "state": run.state,
        "exit_code": run.exit_code,
        "wandb_ids": [run.wandb_id],
        "name": run.name,
        "group": run.group,
        "project": run.project,
        "n_fragments": 1,
        "n_steps": int(len(wide)),
        "last_step": int(wide.index.max()) if len(wide) else None,
        "metrics": [str(c) for c in wide.columns],
        "config": run.config,
        "summary": {k: v for k, v in run.summary.items() if not str(k).startswith("_")},
        "signature": signature,
        "warnings": notes + run.warnings,
        "nonfinite": [f"run {run_id}: {n}" for n in nonfinite_notes(wide, logged)],
    }
    return _write_cache(wide, logged, meta, Path(cache_dir))


def _online_cache_dir(project: str) -> Path:
    from arctl.config.files import workdir_path

    base = workdir_path()
    return base / WORKSPACE_CACHE / "wandb" / project.replace("/", "__")


def _load_online(project: str, filters, exp_set, cache_dir, progress, api, serves=None) -> list[dict]:
    """The runs of ``project`` (of ``exp_set``'s experiments when given), each read once and cached.
    ``serves(config) -> [(experiment, arm), ...]``: the requested cells a run of another experiment
    serves, judged from its config (W&B has no ``shared.json``: a run one sweep shares with another
    experiment's cell is that cell's run by its config); such a run is kept and labelled like a
    workspace run that serves them (:func:`arctl.track.runs.load.load_runs`)."""
    from arctl.track.wandb_online import _unwrap_config, list_runs, read_run, run_signature

    cache = Path(cache_dir) if cache_dir else _online_cache_dir(project)
    flt = dict(filters or {})
    if exp_set is not None and serves is None and "group" not in flt and "config.experiment" not in flt:
        flt["$or"] = [{"group": {"$in": sorted(exp_set)}}, {"config.experiment": {"$in": sorted(exp_set)}}]
    listed = list_runs(project, filters=flt or None, api=api)
    wanted: list[tuple[object, list]] = []  # (run, the requested cells it serves besides its own)
    for r in listed:
        config = _unwrap_config(dict(r.config or {}))
        own = str(config.get("experiment") or r.group)
        cells = [tuple(c) for c in serves(config)] if serves is not None else []
        if exp_set is None or own in exp_set or cells:
            wanted.append((r, cells))
    wanted, replaced = _newest_per_run_id(wanted)
    metas = []
    with _progress(progress, len(wanted), "downloading runs") as bar:
        task = bar.add_task("downloading runs", total=len(wanted)) if bar else None
        for r, cells in wanted:
            run_id = _run_id_of(r)
            sig = run_signature(r)
            meta = _cached_meta(cache, run_id, sig)
            if meta is None:
                meta = ingest_online(read_run(r), run_id, sig, str(cache))
            own = (meta["experiment"], meta["arm"])
            cells = [c for c in cells if c != own]
            if exp_set is not None and meta["experiment"] not in exp_set:
                if not cells:
                    continue
                meta = {**meta, "experiment": cells[0][0], "arm": cells[0][1]}
            others = [list(c) for c in cells if c != (meta["experiment"], meta["arm"])]
            if run_id in replaced:  # said on every read, not kept in the run's cache
                meta = {**meta, "warnings": [*meta.get("warnings", []), replaced[run_id]]}
            metas.append({**meta, "serves": others} if others else meta)
            if bar:
                bar.advance(task)
    return metas


def _run_id_of(run) -> str:
    """The arctl run id of a W&B run (its cache key): ``config.run_id``, else the W&B id."""
    return str((run.config or {}).get("run_id") or run.id)


def _age(item: tuple) -> tuple:
    """Sort key, oldest first, of a ``(run, cells)``: W&B's ``createdAt``, then the rerun's generation
    (``<run id>-g<n>``: g10 after g9), then the W&B id."""
    run = item[0]
    generation = wandb_generation(_run_id_of(run), str(run.id))  # a long run id's W&B id ends in a hash
    if generation is None:  # a W&B id not made from the run id: its own -g<n>, if any
        found = re.search(r"-g(\d+)$", str(run.id))
        generation = int(found.group(1)) if found else 0
    return (str((getattr(run, "_attrs", None) or {}).get("createdAt") or ""), generation, str(run.id))


def _newest_per_run_id(wanted: list[tuple]) -> tuple[list[tuple], dict[str, str]]:
    """One ``(run, cells)`` per arctl run id: a ``--force`` rerun is a new W&B run (``<run id>-g<n>``)
    with the run id of the one it replaced, and a workspace keeps only the rerun, so the newest (W&B's
    ``createdAt``, then the W&B id) is read. Also ``{run id: a warning line}`` for each run id so chosen."""
    groups: dict[str, list[tuple]] = {}
    for item in wanted:
        groups.setdefault(_run_id_of(item[0]), []).append(item)
    kept, notes = [], {}
    for rid, group in groups.items():
        group.sort(key=_age)
        kept.append(group[-1])
        if len(group) > 1:
            notes[rid] = (f"run {rid}: W&B runs {', '.join(str(r.id) for r, _ in group)} have its run id (a --force "
                          f"rerun and what it replaced): read the newest, {group[-1][0].id}")
    return kept, notes

"""Runs of a W&B project read through the W&B API (:mod:`arctl.track.wandb_online`), cached like
workspace runs (:mod:`arctl.track.runs.cache`) under ``$ARCTL_HOME/.arctl-cache/wandb/<project>``."""

from __future__ import annotations

from pathlib import Path

from arctl.track.run_data import RunData
from arctl.track.runs.cache import CACHE_VERSION, _cached_meta, _write_cache
from arctl.track.runs.discover import run_identity
from arctl.track.runs.pool import _progress
from arctl.track.runs.stitch import nonfinite_notes, stitch_logged


def ingest_online(run: RunData, run_id: str, signature: list, cache_dir: str) -> dict:
    """Cache one run read through the W&B API (same layout as :func:`arctl.track.runs.load.ingest_offline`)."""
    experiment, arm, seed = run_identity(run.config, run.name)
    wide, logged, notes = stitch_logged([run])
    notes += [f"run {run_id}: {n}" for n in nonfinite_notes(wide, logged)]
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
    }
    return _write_cache(wide, logged, meta, Path(cache_dir))


def _online_cache_dir(project: str) -> Path:
    from arctl.config.files import workdir_path

    base = workdir_path()
    return base / ".arctl-cache" / "wandb" / project.replace("/", "__")


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
    metas = []
    with _progress(progress, len(wanted), "downloading runs") as bar:
        task = bar.add_task("downloading runs", total=len(wanted)) if bar else None
        for r, cells in wanted:
            run_id = str((r.config or {}).get("run_id") or r.id)
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
            metas.append({**meta, "serves": others} if others else meta)
            if bar:
                bar.advance(task)
    return metas


"""The parquet cache of parsed runs: per run, one parquet file per column group plus a JSON
sidecar (metadata, group index, last value of every metric) keyed on the size and mtime of every
source file, so re-rendering reads only what changed.

Layout in the cache directory: ``<run>.g<i>.parquet`` (step + the columns of group i, only the
rows where they were logged) and ``<run>.json`` (the sidecar).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arctl.config.files import atomic_write, replacing
from arctl.track.metrics_schema import STEP_KEY

CACHE_VERSION = 5  # 5: a logged NaN is a value (a group file's rows are the logged ones, NaN included)


def _cache_paths(cache_dir: Path, run_id: str) -> tuple[Path, Path]:
    safe = run_id.replace("/", "_")
    return cache_dir / f"{safe}.parquet", cache_dir / f"{safe}.json"


def _group_path(base: Path, i: int) -> Path:
    return base.with_name(base.name.replace(".parquet", f".g{i}.parquet"))


def _column_groups(logged: np.ndarray) -> list[list[int]]:
    """Column indices grouped by the rows at which they were logged (train metrics every step,
    evals every k steps, the final evaluation once), so a reader loads dense blocks only."""
    groups: dict[bytes, list[int]] = {}
    for j in range(logged.shape[1]):
        mask = logged[:, j]
        if mask.any():
            groups.setdefault(np.packbits(mask).tobytes(), []).append(j)
    return list(groups.values())


def _last_values(values: np.ndarray, logged: np.ndarray, steps: np.ndarray, names: list[str]) -> dict[str, list]:
    """metric → [step, value] of its last logged value (NaN where the run logged NaN last): the final
    evaluation, kept in the JSON sidecar so reports that need only final values read no parquet at all."""
    if not values.size:
        return {}
    last = len(values) - 1 - np.argmax(logged[::-1], axis=0)
    return {names[j]: [int(steps[last[j]]), float(values[last[j], j])]
            for j in range(values.shape[1]) if logged[last[j], j]}


def _write_cache(wide, logged: np.ndarray, meta: dict, cache_dir: Path) -> dict:
    """One parquet file per column group (``<run>.g<i>.parquet``: step + its columns, only the
    rows where they were logged: ``logged``, bool, ``wide``'s shape, a logged NaN included) and a JSON
    sidecar with the metadata, the group index and the last value of every metric."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cache_dir.mkdir(parents=True, exist_ok=True)
    base, js = _cache_paths(cache_dir, meta["run_id"])
    names = [str(c) for c in wide.columns]
    values = wide.to_numpy(dtype=np.float64, copy=False) if names else np.zeros((len(wide), 0))
    steps = wide.index.to_numpy().astype(np.int64, copy=False)
    logged = np.asarray(logged, dtype=bool).reshape(values.shape)
    groups = _column_groups(logged)
    meta["groups"] = [[names[j] for j in g] for g in groups]
    meta["metrics"] = [m for g in meta["groups"] for m in g]
    meta["last"] = _last_values(values, logged, steps, names)
    for i, cols in enumerate(groups):
        rows = np.flatnonzero(logged[:, cols[0]])
        arrays = [pa.array(steps[rows])] + [pa.array(values[rows, j]) for j in cols]
        table = pa.Table.from_arrays(arrays, names=[STEP_KEY, *meta["groups"][i]])
        target = _group_path(base, i)
        with replacing(target) as tmp:
            pq.write_table(table, tmp, use_dictionary=False)  # float metrics: dictionaries only cost time
    atomic_write(js, json.dumps(meta, default=str))
    return meta


def _cached_meta(cache_dir: Path, run_id: str, signature: list) -> dict | None:
    base, js = _cache_paths(cache_dir, run_id)
    if not js.is_file():
        return None
    try:
        meta = json.loads(js.read_text())
    except ValueError:
        return None
    if meta.get("version") != CACHE_VERSION or meta.get("signature") != json.loads(json.dumps(signature)):
        return None
    if not all(_group_path(base, i).is_file() for i in range(len(meta.get("groups", [])))):
        return None
    return meta

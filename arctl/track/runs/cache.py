"""The parquet cache of parsed runs: per run, one parquet file per column group plus a JSON
sidecar (metadata, group index, last value of every metric) keyed on the state of every source
file, so re-rendering reads only what changed.

Layout in the cache directory: ``<run>.<generation>.g<i>.parquet`` (step + the columns of group i,
only the rows where they were logged) and ``<run>.json`` (the sidecar, naming its generation). A
rewrite writes a new generation's files beside the old ones and then replaces the sidecar, so a
report reading the run meanwhile (another process) reads one version whole: the old sidecar with
the old files or the new with the new. Another generation's files are removed by a later write of
the run once they are :data:`STALE_GENERATION_S` old.

The frozen ``config.yaml`` of every run a read looks at, read or not (a report of one experiment looks at every run
of the workspace to tell which are its cells' runs), is cached too, parsed, in ``configs/<run>.json``
(:func:`cached_config`), keyed on the state of that file alone: a report of 100 runs in a workspace of 5,000 parsed
5,000 YAML files each time (from a hunt: 70 s), and now parses those that changed.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path

import numpy as np

from arctl.config.files import atomic_write, replacing
from arctl.track.metrics_schema import STEP_KEY

CACHE_VERSION = 8  # 8: a resumed attempt without its run record ordered by its folder's time, live files' cut tails; 7: `recorded`, the config's top-level keys a job recorded in W&B (not config.yaml); 5: a logged NaN is a value (a group file's rows are the logged ones); 6: generations
GENERATION = r"[0-9a-f]{12}"  # a write's token in its files' names (uuid4 hex)
STALE_GENERATION_S = 600.0  # another generation's files older than this are removed (no reader still holds them)
WORKSPACE_CACHE = ".arctl-cache"  # a workspace's cache folder: parsed runs (runs/), W&B online runs (wandb/), sweeps' cells
CONFIGS = "configs"  # the cache's folder of parsed config.yaml files (:func:`cached_config`)
CONFIG_VERSION = 1
# a config.yaml changed this recently is not cached: a file rewritten in place within one tick of the kernel's coarse
# clock keeps its mtime and ctime, so a key taken then may name the content that follows (git's "racily clean")
RECENT_NS = 2_000_000_000


def _cache_paths(cache_dir: Path, run_id: str) -> tuple[Path, Path]:
    safe = run_id.replace("/", "_")
    return cache_dir / f"{safe}.parquet", cache_dir / f"{safe}.json"


def _group_path(base: Path, i: int, generation: str) -> Path:
    return base.with_name(base.name.replace(".parquet", f".{generation}.g{i}.parquet"))


def _remove_stale(base: Path, keep: str, now: float) -> None:
    """Remove the group files of ``base``'s run from other generations (and from the layout before
    generations) that are :data:`STALE_GENERATION_S` old; best effort."""
    run = re.escape(base.name.removesuffix(".parquet"))
    mine = re.compile(rf"{run}(?:\.({GENERATION}))?\.g\d+\.parquet")
    try:
        entries = list(os.scandir(base.parent))
    except OSError:
        return
    for entry in entries:
        m = mine.fullmatch(entry.name)
        if m is None or m.group(1) == keep:
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime >= STALE_GENERATION_S:
                os.unlink(entry.path)
        except OSError:  # removed by another writer meanwhile
            pass


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
    """One parquet file per column group (``<run>.<generation>.g<i>.parquet``: step + its columns, only the
    rows where they were logged: ``logged``, bool, ``wide``'s shape, a logged NaN included) and a JSON
    sidecar with the metadata, the group index and the last value of every metric."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cache_dir.mkdir(parents=True, exist_ok=True)
    base, js = _cache_paths(cache_dir, meta["run_id"])
    rewrite = js.exists()
    meta["generation"] = generation = uuid.uuid4().hex[:12]
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
        with replacing(_group_path(base, i, generation)) as tmp:
            pq.write_table(table, tmp, use_dictionary=False)  # float metrics: dictionaries only cost time
    atomic_write(js, json.dumps(meta, default=str))
    if rewrite:
        _remove_stale(base, generation, time.time())
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
    generation = meta.get("generation")
    if not isinstance(generation, str) or not re.fullmatch(GENERATION, generation):
        return None
    if not all(_group_path(base, i, generation).is_file() for i in range(len(meta.get("groups", [])))):
        return None
    return meta


def config_key(path: Path) -> list:
    """What a cached parse of the file ``path`` is valid for: its absolute path (a workspace copied elsewhere is
    another), size, modification time, inode and change time (a chmod, a file replaced by rename with its size and
    mtime kept). Taken before the file is read. OSError where it cannot be stat'ed."""
    st = os.stat(path)
    return [os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _config_path(cache_dir: Path, run_id: str) -> Path:
    return cache_dir / CONFIGS / f"{run_id.replace('/', '_')}.json"


def cached_config(cache_dir: Path, run_id: str, key: list) -> dict | None:
    """The parsed config.yaml of run ``run_id`` that :func:`store_config` cached under ``key``
    (:func:`config_key`), or None where there is none, of another key, or unreadable."""
    try:
        entry = json.loads(_config_path(cache_dir, run_id).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("version") != CONFIG_VERSION or entry.get("key") != key:
        return None
    config = entry.get("config")
    return config if isinstance(config, dict) else None


def store_config(cache_dir: Path, run_id: str, key: list, config: dict) -> None:
    """Cache ``config``, run ``run_id``'s config.yaml as parsed after ``key`` was taken (:func:`config_key`),
    written atomically (a reader meanwhile reads the old entry or the new, whole). Not where the file changed within
    :data:`RECENT_NS` of now, or where JSON would not give it back as it is (a key that is not a string, a NaN);
    best effort: a cache that cannot be written is left as it is."""
    if time.time_ns() - max(key[2], key[4]) < RECENT_NS:
        return
    try:
        text = json.dumps({"version": CONFIG_VERSION, "key": key, "config": config})
        if json.loads(text)["config"] != config:
            return
    except (TypeError, ValueError, RecursionError):
        return
    path = _config_path(cache_dir, run_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    except OSError:
        pass

"""Runs of a workspace (offline .wandb files) or of a W&B project → tidy pandas data.

``load_runs`` returns :class:`Runs`: ``history``, one long DataFrame with columns
(run_id, arm, experiment, seed, step, metric, value), and ``runs``, one row per run with its
flattened config. Steps are ``trainer/global_step`` values; fragments of a resumed run (several
.wandb files of one run) are stitched on that key, later fragments winning on overlapping steps.

Each run is parsed once and cached as parquet (wide: one column per metric) plus a JSON sidecar
keyed on the size and mtime of every source file, so re-rendering reads only what changed. Runs
that need parsing are read in parallel processes with a progress bar.

Workspace layout: ``<workdir>/runs/<run_id>/config.yaml`` (experiment, arm, seed) and
``<workdir>/runs/<run_id>/wandb/**/run-*.wandb``. A directory without ``runs/`` is searched for
``run-*.wandb`` files directly, one run per W&B run id.

A run may serve experiments besides its own (a sweep with ``share_arms: true`` runs an arm shared
by several experiments once): ``<workdir>/runs/<run_id>/shared.json`` = ``{"experiments": [...]}``
lists them, and ``load_runs(experiments=...)`` then counts it as a run of those experiments too.
"""

from __future__ import annotations

import fnmatch
import json
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arctl.track.metrics_schema import STEP_KEY
from arctl.track.run_data import RunData

CACHE_VERSION = 3
ID_COLUMNS = ("run_id", "arm", "experiment", "seed")
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
        sig = []
        for p in [*self.files, *([self.config_path] if self.config_path else [])]:
            st = p.stat()
            sig.append([str(p), st.st_size, st.st_mtime_ns])
        return sig


@dataclass
class Runs:
    """Tidy run data: ``history`` (long) and ``runs`` (one row per run, config flattened)."""

    history: object  # pandas.DataFrame
    runs: object  # pandas.DataFrame
    warnings: list[str] = field(default_factory=list)


def default_workdir() -> Path:
    """``$ARCTL_HOME`` if set, else ``./arctl-runs``."""
    return Path(os.environ.get("ARCTL_HOME") or "arctl-runs")


# ---------------------------------------------------------------------------------------------
# discovery
def _unique_wandb_files(root: Path) -> list[Path]:
    seen: dict[Path, Path] = {}
    for p in sorted(root.rglob("run-*.wandb")):
        real = p.resolve()  # wandb's latest-run symlink points at the same file
        if real not in seen:
            seen[real] = p
    return sorted(seen.values(), key=str)


def discover_runs(workdir: str | Path) -> list[RunSource]:
    """Every run under ``workdir`` (see the module docstring for the layout)."""
    workdir = Path(workdir)
    runs_root = workdir / "runs"
    out: list[RunSource] = []
    if runs_root.is_dir():
        for run_dir in sorted(p for p in runs_root.iterdir() if p.is_dir()):
            files = _unique_wandb_files(run_dir / "wandb") if (run_dir / "wandb").is_dir() else []
            cfg = run_dir / "config.yaml"
            if files:
                out.append(RunSource(run_dir.name, files, cfg if cfg.is_file() else None))
        return out
    if workdir.is_dir():
        by_id: dict[str, list[Path]] = {}
        for p in _unique_wandb_files(workdir):
            by_id.setdefault(p.stem[4:], []).append(p)
        out = [RunSource(rid, files) for rid, files in sorted(by_id.items())]
    return out


def _read_yaml(path: Path) -> dict:
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f)
    return data if isinstance(data, dict) else {}


def run_identity(config: dict, fallback_name: str = "") -> tuple[str, str, int | None]:
    """(experiment, arm, seed) of a run config; arm/seed fall back to a W&B name ``{arm}-s{seed}``."""
    experiment = str(config.get("experiment") or config.get("wandb", {}).get("group") or "")
    arm = config.get("arm")
    seed = config.get("seed")
    if (arm is None or seed is None) and fallback_name:
        base, sep, s = fallback_name.rpartition("-s")
        if sep and s.isdigit():
            arm = arm if arm is not None else base
            seed = seed if seed is not None else int(s)
    try:
        seed = int(seed) if seed is not None else None
    except (TypeError, ValueError):
        seed = None
    return experiment, str(arm if arm is not None else fallback_name), seed


# ---------------------------------------------------------------------------------------------
# stitching
def stitch_fragments(fragments: Sequence[RunData]):
    """One wide DataFrame (index: trainer/global_step, one column per metric) from the fragments
    of one run, ordered by start time; for a step logged by several fragments the later fragment
    wins, per metric. Rows logged without the step key take the last step seen in their fragment
    (W&B's own rule for ``define_metric(step_metric=...)``); a fragment with no step key at all
    falls back to ``_step``. Keys starting with ``_`` are dropped. A fragment that rewound the run
    (``resume_from="<id>?_step=N"``, :attr:`RunData.rewind_step`) first cuts the history of the
    earlier fragments after step N, as W&B does on sync (arctl logs ``_step`` = its global step)."""
    import pandas as pd

    parts = []
    notes: list[str] = []
    for order, frag in enumerate(sorted(fragments, key=lambda f: (f.start_time, f.source))):
        if frag.rewind_step is not None:
            parts = [p[p[STEP_KEY] <= frag.rewind_step] for p in parts]
        if frag.n_rows == 0:
            continue
        if STEP_KEY in frag.keys:
            step = pd.Series(frag.column(STEP_KEY)).ffill().to_numpy()
        else:
            step = frag.column("_step")
            notes.append(f"{frag.source}: no {STEP_KEY} logged; used W&B's _step instead")
        keep = [j for j, k in enumerate(frag.keys) if not k.startswith("_") and k != STEP_KEY]
        df = pd.DataFrame(frag.values[:, keep], columns=[frag.keys[j] for j in keep])
        df.insert(0, "_order", order)
        df.insert(0, STEP_KEY, step)
        parts.append(df[~np.isnan(step)])
    if not parts:
        return pd.DataFrame(index=pd.Index([], name=STEP_KEY, dtype="int64")), notes
    allrows = pd.concat(parts, ignore_index=True, sort=False) if len(parts) > 1 else parts[0]
    allrows = allrows.drop(columns="_order")
    allrows[STEP_KEY] = allrows[STEP_KEY].astype("int64")
    if len(parts) == 1 and allrows[STEP_KEY].is_monotonic_increasing and allrows[STEP_KEY].is_unique:
        wide = allrows.set_index(STEP_KEY)
    else:
        wide = allrows.groupby(STEP_KEY, sort=True).last()  # last non-null per column
    return wide, notes


# ---------------------------------------------------------------------------------------------
# ingestion (runs in worker processes: module-level, arguments and results picklable)
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
    """metric → [step, value] of its last logged (non-NaN) value: the final evaluation, kept in the
    JSON sidecar so reports that need only final values read no parquet at all."""
    if not values.size:
        return {}
    last = len(values) - 1 - np.argmax(logged[::-1], axis=0)
    return {names[j]: [int(steps[last[j]]), float(values[last[j], j])]
            for j in range(values.shape[1]) if logged[last[j], j]}


def _write_cache(wide, meta: dict, cache_dir: Path) -> dict:
    """One parquet file per column group (``<run>.g<i>.parquet``: step + its columns, only the
    rows where they were logged) and a JSON sidecar with the metadata, the group index and the
    last value of every metric."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cache_dir.mkdir(parents=True, exist_ok=True)
    base, js = _cache_paths(cache_dir, meta["run_id"])
    names = [str(c) for c in wide.columns]
    values = wide.to_numpy(dtype=np.float64, copy=False) if names else np.zeros((len(wide), 0))
    steps = wide.index.to_numpy().astype(np.int64, copy=False)
    logged = ~np.isnan(values)
    groups = _column_groups(logged)
    meta["groups"] = [[names[j] for j in g] for g in groups]
    meta["metrics"] = [m for g in meta["groups"] for m in g]
    meta["last"] = _last_values(values, logged, steps, names)
    tag = f".tmp{os.getpid()}"
    for i, cols in enumerate(groups):
        rows = np.flatnonzero(logged[:, cols[0]])
        arrays = [pa.array(steps[rows])] + [pa.array(values[rows, j]) for j in cols]
        table = pa.Table.from_arrays(arrays, names=[STEP_KEY, *meta["groups"][i]])
        target = _group_path(base, i)
        tmp = target.with_name(target.name + tag)
        pq.write_table(table, tmp, use_dictionary=False)  # float metrics: dictionaries only cost time
        os.replace(tmp, target)
    tmpj = js.with_name(js.name + tag)
    tmpj.write_text(json.dumps(meta, default=str))
    os.replace(tmpj, js)
    return meta


def ingest_offline(source: RunSource, cache_dir: str) -> dict:
    """Parse the fragments of one run, stitch them, cache them; return the run's metadata."""
    from arctl.track.wandb_offline import WandbFileError, read_wandb_file

    notes: list[str] = []
    frags: list[RunData] = []
    for p in source.files:
        try:
            frags.append(read_wandb_file(p, summary=False))
        except (OSError, WandbFileError) as e:
            notes.append(f"{p}: unreadable ({e}); skipped it")
    for f in frags:
        notes.extend(f.warnings)
    # an unfinished fragment followed by a later one is a resumed run, not damage
    ordered = sorted(frags, key=lambda f: (f.start_time, f.source))
    notes = [n for n in notes if not (n.endswith("(run still running, killed or crashed)")
                                      and ordered and not n.startswith(ordered[-1].source))]
    config: dict = {}
    if source.config_path is not None:
        try:
            config = _read_yaml(source.config_path)
        except Exception as e:  # a broken config.yaml: fall back to the W&B config
            notes.append(f"{source.config_path}: unreadable ({e}); used the W&B config")
    if not config:
        for f in ordered:
            config = f.config or config
    last = ordered[-1] if ordered else None
    experiment, arm, seed = run_identity(config, last.name if last else "")
    if not experiment and last is not None:
        experiment = last.group
    wide, stitch_notes = stitch_fragments(frags)
    notes.extend(stitch_notes)
    summary: dict = {}
    for f in ordered:
        summary.update(f.summary)
    meta = {
        "version": CACHE_VERSION,
        "run_id": source.run_id,
        "experiment": experiment,
        "arm": arm,
        "seed": seed,
        "state": last.state if last else "empty",
        "exit_code": last.exit_code if last else None,
        "wandb_ids": sorted({f.wandb_id for f in frags}),
        "name": last.name if last else "",
        "group": last.group if last else "",
        "project": last.project if last else "",
        "n_fragments": len(frags),
        "n_steps": int(len(wide)),
        "last_step": int(wide.index.max()) if len(wide) else None,
        "metrics": [str(c) for c in wide.columns],
        "config": config,
        "summary": {k: v for k, v in summary.items() if not k.startswith("_")},
        "signature": source.signature(),
        "warnings": notes,
    }
    return _write_cache(wide, meta, Path(cache_dir))


def ingest_online(run: RunData, run_id: str, signature: list, cache_dir: str) -> dict:
    """Cache one run read through the W&B API (same layout as :func:`ingest_offline`)."""
    experiment, arm, seed = run_identity(run.config, run.name)
    wide, notes = stitch_fragments([run])
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
    return _write_cache(wide, meta, Path(cache_dir))


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


# ---------------------------------------------------------------------------------------------
def _progress(enabled: bool, total: int, what: str):
    from contextlib import nullcontext

    if not enabled or total < 2:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    return progress


def _prefetch(paths: list[Path]) -> None:
    """Ask the OS to read ``paths`` into its page cache, in order, in a background thread, so the
    disk reads overlap the parsing (a no-op where posix_fadvise does not exist)."""
    if not paths or not hasattr(os, "posix_fadvise"):
        return
    import threading

    def run() -> None:
        for p in paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    threading.Thread(target=run, name="arctl-prefetch", daemon=True).start()


def _run_parallel(fn, jobs: list[tuple], processes: int | None, progress: bool, what: str,
                  prefetch: list[Path] | None = None) -> list:
    """Call ``fn(*job)`` for every job, in worker processes when there are several jobs;
    ``prefetch``: files the jobs will read, in job order (see :func:`_prefetch`)."""
    results: list = [None] * len(jobs)
    n_proc = min(processes or os.cpu_count() or 1, len(jobs))
    if n_proc <= 1:
        _prefetch(prefetch or [])
        with _progress(progress, len(jobs), what) as bar:
            task = bar.add_task(what, total=len(jobs)) if bar else None
            for i, job in enumerate(jobs):
                results[i] = fn(*job)
                if bar:
                    bar.advance(task)
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # imported once here and inherited by forked workers instead of imported by each of them
    import pandas  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import wandb.proto.wandb_internal_pb2  # noqa: F401

    import arctl.track.wandb_history  # noqa: F401
    import arctl.track.wandb_offline  # noqa: F401

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx) as pool:
        # submit (and so fork) before the progress bar starts its refresh thread
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        _prefetch(prefetch or [])  # a thread: started after the workers were forked
        with _progress(progress, len(jobs), what) as bar:
            task = bar.add_task(what, total=len(jobs)) if bar else None
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                if bar:
                    bar.advance(task)
    return results


def _match_any(name: str, patterns: Iterable[str] | None) -> bool:
    return patterns is None or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def flatten_config(config: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists stay values."""
    out: dict = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_config(v, key + "."))
        else:
            out[key] = v
    return out


def _assemble(metas: list[dict], cache_dir: Path, metrics: Sequence[str] | None, last_only: bool = False) -> Runs:
    import pandas as pd

    run_ids, steps, codes, values = [], [], [], []
    metric_index: dict[str, int] = {}
    matched: dict[str, bool] = {}
    for meta in metas:
        base, _ = _cache_paths(cache_dir, meta["run_id"])
        for gi, group in enumerate(meta["groups"]):
            wanted = []
            for m in group:
                hit = matched.get(m)
                if hit is None:
                    hit = matched[m] = _match_any(m, metrics)
                if hit:
                    wanted.append(m)
            if not wanted:
                continue
            if last_only:  # one row per metric, from the sidecar
                last = [meta["last"][m] for m in wanted]
                code = np.array([metric_index.setdefault(m, len(metric_index)) for m in wanted], dtype=np.int32)
                steps.append(np.array([s for s, _ in last], dtype=np.int64))
                values.append(np.array([v for _, v in last], dtype=np.float64))
                codes.append(code)
                run_ids.append((meta["run_id"], len(wanted)))
                continue
            import pyarrow.parquet as pq

            # ParquetFile.read without threads: ~6x less overhead than read_table on small files
            table = pq.ParquetFile(_group_path(base, gi)).read(columns=[STEP_KEY, *wanted], use_threads=False)
            step = table.column(0).to_numpy()
            mat = np.empty((len(wanted), table.num_rows))  # metric × row
            for j in range(len(wanted)):
                mat[j] = table.column(j + 1).to_numpy(zero_copy_only=False)
            ok = ~np.isnan(mat)
            n = int(ok.sum())
            if not n:
                continue
            code = np.array([metric_index.setdefault(m, len(metric_index)) for m in wanted], dtype=np.int32)
            steps.append(np.broadcast_to(step, mat.shape)[ok])  # per metric, steps ascending
            values.append(mat[ok])
            codes.append(np.broadcast_to(code[:, None], mat.shape)[ok])
            run_ids.append((meta["run_id"], n))
    run_cats = [m["run_id"] for m in metas]
    run_pos = {r: i for i, r in enumerate(run_cats)}
    if steps:
        run_code = np.repeat(np.array([run_pos[r] for r, _ in run_ids], dtype=np.int32),
                             np.array([n for _, n in run_ids], dtype=np.int64))
        step_all = np.concatenate(steps).astype(np.int64)
        value_all = np.concatenate(values)
        code_all = np.concatenate(codes)
    else:
        run_code = np.zeros(0, dtype=np.int32)
        step_all = np.zeros(0, dtype=np.int64)
        value_all = np.zeros(0)
        code_all = np.zeros(0, dtype=np.int32)
    arm_of = [m["arm"] for m in metas]
    exp_of = [m["experiment"] for m in metas]
    seed_of = np.array([m["seed"] if m["seed"] is not None else -1 for m in metas], dtype=np.int64)
    arm_cats = sorted(set(arm_of))
    exp_cats = sorted(set(exp_of))
    arm_code = np.array([arm_cats.index(a) for a in arm_of], dtype=np.int32)
    exp_code = np.array([exp_cats.index(e) for e in exp_of], dtype=np.int32)
    history = pd.DataFrame(
        {
            "run_id": pd.Categorical.from_codes(run_code, categories=run_cats),
            "arm": pd.Categorical.from_codes(arm_code[run_code], categories=arm_cats),
            "experiment": pd.Categorical.from_codes(exp_code[run_code], categories=exp_cats),
            "seed": seed_of[run_code],
            "step": step_all,
            "metric": pd.Categorical.from_codes(code_all, categories=list(metric_index)),
            "value": value_all,
        }
    )
    records = []
    for m in metas:
        rec = {
            "run_id": m["run_id"],
            "experiment": m["experiment"],
            "arm": m["arm"],
            "seed": m["seed"],
            "state": m["state"],
            "exit_code": m.get("exit_code"),
            "name": m.get("name", ""),
            "n_steps": m["n_steps"],
            "last_step": m["last_step"],
            "n_fragments": m["n_fragments"],
            "wandb_ids": ",".join(m["wandb_ids"]),
        }
        rec.update({f"config.{k}": v for k, v in flatten_config(m.get("config") or {}).items()})
        records.append(rec)
    runs = pd.DataFrame.from_records(records, columns=None if records else ["run_id", *ID_COLUMNS[1:]])
    notes = [w for m in metas for w in m.get("warnings", [])]
    return Runs(history=history, runs=runs, warnings=notes)


def load_runs(
    workdir: str | Path | None = None,
    *,
    experiments: Iterable[str] | None = None,
    metrics: Sequence[str] | None = None,
    wandb_project: str | None = None,
    filters: dict | None = None,
    cache_dir: str | Path | None = None,
    processes: int | None = None,
    progress: bool = True,
    api=None,
    last_only: bool = False,
) -> Runs:
    """Read the runs of a workspace (default) or of a W&B project (``wandb_project="entity/project"``).

    ``experiments`` keeps only runs of those experiments; ``metrics`` is a list of glob patterns
    (``eval/*/acc@*``) selecting the metrics put in ``history`` (all when ``None``). Damaged files
    give :class:`RunReadWarning` warnings (also listed in ``Runs.warnings``), never an exception.
    ``last_only`` keeps only the last logged value of each (run, metric) — the rows
    ``history.drop_duplicates(["run_id", "metric"], keep="last")`` would keep — read from the
    cache's JSON sidecars without opening any parquet file.

    A workspace run that serves other experiments (its ``shared.json``, ``share_arms``) counts
    as a run of them: when its own experiment is not among ``experiments`` but one it serves is,
    it is kept with ``experiment`` set to the first (sorted) requested experiment it serves. Each
    run is one row whatever it serves; without ``experiments`` nothing is relabelled.
    """
    exp_set = set(experiments) if experiments is not None else None
    if wandb_project:
        metas = _load_online(wandb_project, filters, exp_set, cache_dir, progress, api)
        cache = Path(cache_dir) if cache_dir else _online_cache_dir(wandb_project)
    else:
        workdir = Path(workdir) if workdir is not None else default_workdir()
        cache = Path(cache_dir) if cache_dir else workdir / ".arctl-cache" / "runs"
        metas = _load_offline(workdir, exp_set, cache, processes, progress)
    metas.sort(key=lambda m: (m["experiment"], m["arm"], m["seed"] if m["seed"] is not None else -1, m["run_id"]))
    out = _assemble(metas, cache, metrics, last_only)
    for w in out.warnings:
        warnings.warn(w, RunReadWarning, stacklevel=2)
    return out


def _served_label(source: RunSource, exp_set: set) -> str | None:
    """The first (sorted) experiment of ``exp_set`` the run serves besides its own, per its
    ``shared.json`` (next to its config.yaml); None when it has none (the usual case: one stat)."""
    if source.config_path is None:
        return None
    path = source.config_path.parent / SHARED_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    names = data.get("experiments") if isinstance(data, dict) else None
    hits = sorted(n for n in names if isinstance(n, str) and n in exp_set) if isinstance(names, list) else []
    return hits[0] if hits else None


def _load_offline(workdir: Path, exp_set, cache: Path, processes, progress) -> list[dict]:
    metas: list[dict | None] = []
    sources: list[RunSource] = []
    todo: list[tuple[int, RunSource]] = []
    labels: dict[str, str | None] = {}  # run_id -> the served experiment it is read as (shared.json)
    for s in discover_runs(workdir):
        meta = _cached_meta(cache, s.run_id, s.signature())
        if exp_set is not None and s.config_path is not None:  # the experiment config.yaml names
            if meta is not None:  # the sidecar holds that config.yaml (its mtime is in the signature)
                exp = str((meta.get("config") or {}).get("experiment", ""))
            else:
                try:
                    exp = str(_read_yaml(s.config_path).get("experiment", ""))
                except Exception:
                    exp = None
            if exp is not None and exp not in exp_set:
                labels[s.run_id] = _served_label(s, exp_set)
                if labels[s.run_id] is None:
                    continue
        metas.append(meta)
        sources.append(s)
        if meta is None:
            todo.append((len(metas) - 1, s))
    if todo:
        results = _run_parallel(ingest_offline, [(s, str(cache)) for _, s in todo], processes, progress,
                                "reading runs", prefetch=[p for _, s in todo for p in s.files])
        for (i, _), meta in zip(todo, results):
            metas[i] = meta
    if exp_set is None:
        return [m for m in metas if m is not None]
    out = []
    for s, m in zip(sources, metas):
        if m is None:
            continue
        if m["experiment"] not in exp_set:  # not its own: one it serves (a copy: the cache keeps its own)
            label = labels[s.run_id] if s.run_id in labels else _served_label(s, exp_set)
            if label is None:
                continue
            m = {**m, "experiment": label}
        out.append(m)
    return out


def _online_cache_dir(project: str) -> Path:
    base = Path(os.environ.get("ARCTL_HOME") or "arctl-runs")
    return base / ".arctl-cache" / "wandb" / project.replace("/", "__")


def _load_online(project: str, filters, exp_set, cache_dir, progress, api) -> list[dict]:
    from arctl.track.wandb_online import list_runs, read_run, run_signature

    cache = Path(cache_dir) if cache_dir else _online_cache_dir(project)
    flt = dict(filters or {})
    if exp_set is not None and "group" not in flt and "config.experiment" not in flt:
        flt["$or"] = [{"group": {"$in": sorted(exp_set)}}, {"config.experiment": {"$in": sorted(exp_set)}}]
    metas = []
    runs = list_runs(project, filters=flt or None, api=api)
    with _progress(progress, len(runs), "downloading runs") as bar:
        task = bar.add_task("downloading runs", total=len(runs)) if bar else None
        for r in runs:
            run_id = str((r.config or {}).get("run_id") or r.id)
            sig = run_signature(r)
            meta = _cached_meta(cache, run_id, sig)
            if meta is None:
                meta = ingest_online(read_run(r), run_id, sig, str(cache))
            metas.append(meta)
            if bar:
                bar.advance(task)
    if exp_set is not None:
        metas = [m for m in metas if m["experiment"] in exp_set]
    return metas

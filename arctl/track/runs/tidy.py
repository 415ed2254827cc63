"""Cached runs → tidy pandas data: :class:`Runs`, with ``history`` one long DataFrame (run_id,
arm, experiment, seed, step, metric, value) and ``runs`` one row per run, its config flattened
(and ``serves``: the other cells a shared run serves)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arctl.track.metrics_schema import CONFIG_PREFIX, STEP_KEY
from arctl.track.runs.cache import _cache_paths, _group_path

ID_COLUMNS = ("run_id", "arm", "experiment", "seed")


@dataclass
class Runs:
    """Tidy run data: ``history`` (long) and ``runs`` (one row per run, config flattened)."""

    history: object  # pandas.DataFrame
    runs: object  # pandas.DataFrame
    warnings: list[str] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)  # the warnings that say a run logged NaN or an infinity (one a run)


RECORDED = "recorded"  # a runs-table column: the config's top-level keys its job recorded in W&B (load.py)


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
            table = pq.ParquetFile(_group_path(base, gi, meta["generation"])).read(columns=[STEP_KEY, *wanted],
                                                                                 use_threads=False)
            step = table.column(0).to_numpy()
            mat = np.empty((len(wanted), table.num_rows))  # metric × row; every row logged them (a NaN too)
            for j in range(len(wanted)):
                mat[j] = table.column(j + 1).to_numpy(zero_copy_only=False)
            if not mat.size:
                continue
            code = np.array([metric_index.setdefault(m, len(metric_index)) for m in wanted], dtype=np.int32)
            steps.append(np.broadcast_to(step, mat.shape).ravel())  # per metric, steps ascending
            values.append(mat.ravel())
            codes.append(np.repeat(code, table.num_rows))
            run_ids.append((meta["run_id"], mat.size))
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
            "serves": json.dumps(m["serves"]) if m.get("serves") else "",  # other cells it serves (shared.json)
            RECORDED: ",".join(m.get("recorded") or []),  # config sections its job recorded, not its config.yaml's
        }
        rec.update({f"{CONFIG_PREFIX}{k}": v for k, v in flatten_config(m.get("config") or {}).items()})
        records.append(rec)
    runs = pd.DataFrame.from_records(records, columns=None if records else ["run_id", *ID_COLUMNS[1:]])
    notes = [w for m in metas for w in m.get("warnings", [])]
    nonfinite = [line for m in metas if (line := _nonfinite_line(m, matched, metrics, last_only)) is not None]
    return Runs(history=history, runs=runs, warnings=notes + nonfinite, nonfinite=nonfinite)


def _nonfinite_line(meta: dict, matched: dict[str, bool], metrics: Sequence[str] | None, last_only: bool) -> str | None:
    """The run's one line of what it logged NaN or an infinity in (:func:`arctl.track.runs.stitch.run_nonfinite_line`),
    among the metrics read: those ``metrics`` matches, and with ``last_only`` only those whose last value (the
    one read) is such."""
    import math

    from arctl.track.runs.stitch import run_nonfinite_line

    def read(key: str) -> bool:
        if not matched.setdefault(key, _match_any(key, metrics)):
            return False
        last = (meta.get("last") or {}).get(key)
        return not last_only or last is None or not math.isfinite(float(last[1]))

    return run_nonfinite_line(meta["run_id"], meta.get("nonfinite") or [], read)

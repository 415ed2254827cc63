"""Stitching the fragments of one run (a resumed run writes several .wandb files) into one wide
table keyed on ``trainer/global_step``."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import PurePath

import numpy as np

from arctl.track.metrics_schema import STEP_KEY, WANDB_STEP_KEY, nan_means_undefined
from arctl.track.run_data import RunData


def attempt_order(frag: RunData, offset: float | None = None) -> tuple[int, int, float, str]:
    """Sort key of the fragments of one run: the order their attempts started. That is the start time
    of the fragment's run record (every ``wandb.init`` stamps its own, a resume too); on a tie, W&B's
    count of the attempts started within the same second (the sync folder of the second is
    ``...-<id>-1``, which a plain path sort puts before ``...-<id>/``); the path last. A fragment whose
    run record was lost (damage in its first 32 KiB block: no start time) takes the time its folder's
    name gives (``offline-run-YYYYMMDD_HHMMSS-<id>``, the start in the local time of the machine that wrote
    it): from a hunt, such a resumed attempt sorted first, and the killed attempt's values won the steps both
    logged. ``offset``: that machine's local time minus UTC, in seconds (:func:`in_attempt_order` measures it on
    the run's intact fragments); None: this machine's. (The count is compared within the second before the
    start time itself: a folder's time has no fraction.)"""
    folder = _attempt_folder(frag)
    start = frag.start_time or (_folder_time(folder[0], offset) if folder else 0.0)
    return math.floor(start), folder[1] if folder else 0, start, frag.source


def in_attempt_order(fragments: Sequence[RunData]) -> list[RunData]:
    """``fragments`` of one run sorted by :func:`attempt_order`, a lost run record's folder time read in the time
    zone its intact fragments' folders were named in (their start time against their folder's: from the review of
    the folder order, a report read in Tokyo put a resumed attempt written in UTC before the attempt it resumed);
    where none is intact, in this machine's."""
    if all(f.start_time for f in fragments):
        return sorted(fragments, key=attempt_order)
    offsets = [_folder_time(folder[0], 0.0) - f.start_time for f in fragments
               if f.start_time and (folder := _attempt_folder(f)) and _folder_time(folder[0], 0.0)]
    # a time zone's offset is whole quarter hours; a folder's second and its run's start differ by about one
    offset = round(sorted(offsets)[len(offsets) // 2] / 900) * 900.0 if offsets else None

    def by_folder(frag: RunData) -> tuple[float, int, str]:
        # every fragment by its folder's time, where it has one: the folder is named at wandb.init's start, the run
        # record's start time a fraction of a second later, so a folder's second against another attempt's run
        # record put an attempt that came within the second after it first (from a CI run)
        folder = _attempt_folder(frag)
        if folder and (at := _folder_time(folder[0], offset)):
            return at, folder[1], frag.source
        return frag.start_time, 0, frag.source

    return sorted(fragments, key=by_folder)


def _attempt_folder(frag: RunData) -> tuple[str, int] | None:
    """(its start ``YYYYMMDD_HHMMSS``, W&B's count of the attempts started in that second) of the sync folder of
    ``frag`` (``[offline-]run-<start>-<id>[-<count>]``), None where the file is not in one."""
    path = PurePath(frag.source)
    wid = path.stem[4:] if path.stem.startswith("run-") else path.stem
    m = re.fullmatch(rf"(?:offline-)?run-(\d{{8}}_\d{{6}})-{re.escape(wid)}(?:-(\d+))?", path.parent.name)
    return (m.group(1), int(m.group(2) or 0)) if m else None


def _folder_time(stamp: str, offset: float | None = None) -> float:
    """The epoch time of a sync folder's ``YYYYMMDD_HHMMSS``, a local time ``offset`` seconds ahead of UTC (None:
    this machine's local time); 0.0 where it is no date."""
    import calendar
    import time

    try:
        parsed = time.strptime(stamp, "%Y%m%d_%H%M%S")
        return time.mktime(parsed) if offset is None else calendar.timegm(parsed) - offset
    except (ValueError, OverflowError):
        return 0.0


def lost_run_record_notes(fragments: Sequence[RunData]) -> list[str]:
    """One note per fragment of a run of several whose run record was lost (no start time): its place among the
    attempts is its folder's name's (:func:`attempt_order`), and, for a later attempt, where it rewound the run is
    unknown: an earlier attempt's values stay at the steps past its resume point it has none of (those lost with
    its run record's block, those it did not log again), where its rewind would have cut them."""
    if len(fragments) < 2:
        return []
    ordered = in_attempt_order(fragments)
    notes = []
    for i, frag in enumerate(ordered):
        if frag.start_time:
            continue
        place = f"its place among the run's {len(ordered)} attempts ({i + 1})"
        folder = PurePath(frag.source).parent.name
        said = (f"{place} is inferred from its folder's name ({folder})" if _attempt_folder(frag) else
                f"{place} is unknown (its folder's name gives no start time)")
        if i:
            said += (", and where it rewound the run is unknown: the steps after its resume point that it has no "
                     "value of (lost with that record, or not logged again) keep an earlier attempt's")
        notes.append(f"{frag.source}: its run record (start time, rewind) was lost to damage: {said}")
    return notes


def stitch_fragments(fragments: Sequence[RunData]):
    """``(wide, notes)`` of :func:`stitch_logged` (``wide``: NaN where a step did not log a metric, or
    logged NaN)."""
    wide, _, notes = stitch_logged(fragments)
    return wide, notes


def stitch_logged(fragments: Sequence[RunData]):
    """``(wide, logged, notes)``: one wide DataFrame (index: trainer/global_step, one column per metric)
    from the fragments of one run, in the order their attempts started (:func:`attempt_order`), and
    ``logged`` (bool, ``wide``'s shape): the cells logged, a NaN the run logged included (``wide`` holds
    NaN there and where nothing was logged). For a step logged by several fragments the later fragment
    wins, per metric, a logged NaN too. Rows logged without the step key take the last step seen in
    their fragment (W&B's own rule for ``define_metric(step_metric=...)``); a fragment with no step key
    at all falls back to ``_step``. Keys starting with ``_`` are dropped. A fragment that rewound the run
    (``resume_from="<id>?_step=N"``, :attr:`RunData.rewind_step`) first cuts the history of the
    earlier fragments after step N, as W&B does on sync (arctl logs ``_step`` = its global step)."""
    import pandas as pd

    parts: list[tuple[np.ndarray, list[str], np.ndarray, np.ndarray]] = []  # (step, keys, values, logged) rows
    notes: list[str] = lost_run_record_notes(fragments)
    for frag in in_attempt_order(fragments):
        if frag.rewind_step is not None:
            parts = [(st[k], keys, v[k], lg[k]) for st, keys, v, lg in parts for k in [st <= frag.rewind_step]]
        if frag.n_rows == 0:
            continue
        if STEP_KEY in frag.keys:
            step = pd.Series(frag.column(STEP_KEY)).ffill().to_numpy()
        else:
            step = frag.column(WANDB_STEP_KEY)
            notes.append(f"{frag.source}: no {STEP_KEY} logged; used W&B's {WANDB_STEP_KEY} instead")
        keep = [j for j, k in enumerate(frag.keys) if not k.startswith("_") and k != STEP_KEY]
        rows = ~np.isnan(step)
        parts.append((step[rows].astype(np.int64), [frag.keys[j] for j in keep],
                      frag.values[np.ix_(rows, keep)], frag.logged()[np.ix_(rows, keep)]))
    if not parts:
        empty = pd.DataFrame(index=pd.Index([], name=STEP_KEY, dtype="int64"))
        return empty, np.zeros((0, 0), dtype=bool), notes
    steps, names, values, logged = _last_per_step(parts)
    wide = pd.DataFrame(values, index=pd.Index(steps, name=STEP_KEY), columns=names)
    return wide, logged, notes


def _last_per_step(parts):
    """The rows of ``parts`` (in order) → one row per step (ascending), the last logged cell of each
    metric: ``(steps, names, values, logged)``, names in order of first appearance."""
    if len(parts) == 1:
        step, names, values, logged = parts[0]
        if (np.diff(step) > 0).all():  # one attempt, each step logged once: already the table
            return step, names, values, logged
    col: dict[str, int] = {}
    for _, keys, _, _ in parts:
        for k in keys:
            col.setdefault(k, len(col))
    n = sum(len(p[0]) for p in parts)
    step = np.concatenate([p[0] for p in parts])
    values = np.full((n, len(col)), np.nan)
    logged = np.zeros((n, len(col)), dtype=bool)
    if not n:
        return step, list(col), values, logged
    at = 0
    for st, keys, v, lg in parts:
        idx = np.array([col[k] for k in keys], dtype=np.int64)
        values[at : at + len(st), idx] = v
        logged[at : at + len(st), idx] = lg
        at += len(st)
    order = np.argsort(step, kind="stable")  # by step, then in logging order
    step, values, logged = step[order], values[order], logged[order]
    starts = np.flatnonzero(np.concatenate([[True], step[1:] != step[:-1]]))
    pos = np.where(logged, np.arange(n)[:, None], -1)
    last = np.maximum.reduceat(pos, starts, axis=0)  # per step and metric: its last logged row
    cols = np.arange(len(col))
    out = np.where(last >= 0, values[np.maximum(last, 0), cols], np.nan)
    return step[starts], list(col), out, last >= 0


def nonfinite_notes(wide, logged: np.ndarray) -> list[str]:
    """One line per metric of :func:`stitch_logged`'s ``(wide, logged)`` that logged NaN or an infinity
    (a diverged loss, a skipped step's gradient norm): how often and from which step. Reports read those
    values, not the last finite one before them (a mean leaves a NaN out). Keys where NaN means "undefined"
    (:func:`arctl.track.metrics_schema.nan_means_undefined`) are not listed."""
    if not wide.size:
        return []
    values = wide.to_numpy(dtype=np.float64)
    bad = logged & ~np.isfinite(values)
    notes = []
    for j in np.flatnonzero(bad.any(axis=0)).tolist():
        key = str(wide.columns[j])
        if nan_means_undefined(key):
            continue
        rows = np.flatnonzero(bad[:, j])
        kinds = sorted({"NaN" if np.isnan(v) else f"{v:+}" for v in values[rows, j]})
        notes.append(f"{key} logged {'/'.join(kinds)} at {len(rows)} of its {int(logged[:, j].sum())} logged "
                     f"step(s), the first at step {int(wide.index[rows[0]])}")
    return notes


# one note of :func:`nonfinite_notes` (as the cache keeps it, after "run <id>: "), read back by :func:`run_nonfinite_line`
_NOTE = re.compile(r"(?P<key>.+?) logged (?P<kinds>\S+) at \d+ of its \d+ logged step\(s\), the first at step (?P<first>-?\d+)")


def run_nonfinite_line(run_id: str, notes: Sequence[str], read: Callable[[str], bool]) -> str | None:
    """One line for a run's :func:`nonfinite_notes` (``notes``, each "run <run_id>: <note>", as the cache keeps
    them), limited to the metrics a reader reads (``read(key)``), None where it reads none of them: "run X logged
    NaN from step 81 in eval/toy/final_acc and 3 other metric(s) read". From a hunt: one diverged seed printed a
    line per metric it logged NaN in (34, most of which the report never reads; a real tiny run has 49). A note
    in another form is kept as it is."""
    prefix = f"run {run_id}: "
    hits, other = [], []
    for note in notes:
        m = _NOTE.fullmatch(note.removeprefix(prefix))
        if m is None:
            other.append(note)
        elif read(m["key"]):
            hits.append((int(m["first"]), m["key"], m["kinds"].split("/")))
    if not hits:
        return "; ".join(other) or None
    hits.sort(key=lambda h: (h[0], h[1]))  # the earliest; on a tie, by name (the notes come in no fixed order)
    first, key, _ = hits[0]
    kinds = "/".join(sorted({k for _, _, ks in hits for k in ks}))
    more = f" and {len(hits) - 1} other metric(s) read" if len(hits) > 1 else ""
    line = f"run {run_id} logged {kinds} from step {first} in {key}{more} (a mean over runs leaves those values out)"
    return "; ".join([line, *other])

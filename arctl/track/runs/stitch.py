"""Stitching the fragments of one run (a resumed run writes several .wandb files) into one wide
table keyed on ``trainer/global_step``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

import numpy as np

from arctl.track.metrics_schema import STEP_KEY, WANDB_STEP_KEY
from arctl.track.run_data import RunData


def attempt_order(frag: RunData) -> tuple[float, int, str]:
    """Sort key of the fragments of one run: the order their attempts started. That is the start time
    of the fragment's run record (every ``wandb.init`` stamps its own, a resume too); on a tie, W&B's
    count of the attempts started within the same second (the sync folder of the second is
    ``...-<id>-1``, which a plain path sort puts before ``...-<id>/``); the path last."""
    path = PurePath(frag.source)
    wid = path.stem[4:] if path.stem.startswith("run-") else path.stem
    again = re.fullmatch(rf"(?:offline-)?run-\d{{8}}_\d{{6}}-{re.escape(wid)}-(\d+)", path.parent.name)
    return frag.start_time, int(again.group(1)) if again else 0, frag.source


def stitch_fragments(fragments: Sequence[RunData]):
    """One wide DataFrame (index: trainer/global_step, one column per metric) from the fragments
    of one run, in the order their attempts started (:func:`attempt_order`); for a step logged by
    several fragments the later fragment wins, per metric. Rows logged without the step key take the
    last step seen in their fragment (W&B's own rule for ``define_metric(step_metric=...)``); a
    fragment with no step key at all falls back to ``_step``. Keys starting with ``_`` are dropped. A fragment that rewound the run
    (``resume_from="<id>?_step=N"``, :attr:`RunData.rewind_step`) first cuts the history of the
    earlier fragments after step N, as W&B does on sync (arctl logs ``_step`` = its global step)."""
    import pandas as pd

    parts = []
    notes: list[str] = []
    for order, frag in enumerate(sorted(fragments, key=attempt_order)):
        if frag.rewind_step is not None:
            parts = [p[p[STEP_KEY] <= frag.rewind_step] for p in parts]
        if frag.n_rows == 0:
            continue
        if STEP_KEY in frag.keys:
            step = pd.Series(frag.column(STEP_KEY)).ffill().to_numpy()
        else:
            step = frag.column(WANDB_STEP_KEY)
            notes.append(f"{frag.source}: no {STEP_KEY} logged; used W&B's {WANDB_STEP_KEY} instead")
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

"""tree_mask (paper Fig. 8), from a mutation hunt of arctl/report/tree_mask.py: the table written beside the figure
(tree_mask.csv: segment, start, end, visible_keys) describes the mask drawn: its segments tile the packed sequence
end to end, in order, each summary branch named by its cut, and visible_keys counts each segment's query rows."""

from __future__ import annotations

import numpy as np

from arctl.report.specs import load_spec
from arctl.report.tree_mask import build, build_mask


def test_the_table_s_segments_tile_the_mask_and_count_its_visible_keys():
    spec = load_spec("figure", "tree_mask")
    mask, _ = build_mask(spec)
    _, table = build(spec)
    rows = table.to_dict("records")
    assert [r["segment"] for r in rows] == ["prompt", "thinking", *(f"summary@{c}" for c in spec["cuts"])]
    assert rows[0]["start"] == 0 and rows[-1]["end"] == mask.shape[0]
    assert all(a["end"] == b["start"] for a, b in zip(rows, rows[1:]))
    assert rows[1]["end"] - rows[1]["start"] == spec["thinking_len"]
    assert [r["visible_keys"] for r in rows] == [int(mask[r["start"]:r["end"]].sum()) for r in rows]
    assert sum(r["visible_keys"] for r in rows) == int(np.sum(mask))


def test_the_figure_separates_every_segment_from_the_one_before_it():
    """A line between each segment and the next (prompt | thinking | each summary branch), across and down."""
    spec = load_spec("figure", "tree_mask")
    fig, table = build(spec)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    drawn = sorted({float(np.asarray(line.get_ydata())[0]) for line in ax.lines
                    if np.ptp(np.asarray(line.get_ydata(), dtype=float)) == 0})
    assert drawn == [s - 0.5 for s in table["start"].tolist()[1:]]

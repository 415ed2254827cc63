"""Figure ``tree_mask`` (paper Fig. 8): the dense attention mask of one packed tree — prompt and
thinking trunk, then one summary branch per thinking budget — built by
:func:`arctl.algo.tree.pack_tree` and :func:`arctl.algo.tree.dense_tree_mask`."""

from __future__ import annotations

import numpy as np

from arctl.report.style import new_figure, report_rc


def build_mask(spec: dict):
    """(mask [L, L] bool, segments [(name, start, end)]) for the tree described by ``spec``."""
    from arctl.algo.tree import SummaryBranch, dense_tree_mask, pack_tree

    p, t = int(spec.get("prompt_len", 4)), int(spec.get("thinking_len", 24))
    k, s = int(spec.get("inserted_len", 2)), int(spec.get("summary_len", 3))
    cuts = [int(c) for c in spec.get("cuts", [t // 2, t])]
    branches = [SummaryBranch(cut=c, inserted=[1] * k, summary=[2] * s) for c in cuts]
    tree = pack_tree(list(range(3, 3 + p)), list(range(10, 10 + t)), branches)
    mask = dense_tree_mask(tree.cut, tree.branch_start).numpy()
    segments = [("prompt", 0, p), ("thinking", p, p + t)]
    segments += [(f"summary@{c}", sp.start, sp.end) for c, sp in zip(cuts, tree.branches)]
    return mask, segments


@report_rc()  # drawn with matplotlib's defaults and arctl's settings, not the user's
def build(spec: dict, data=None):
    import pandas as pd
    from matplotlib.colors import ListedColormap

    mask, segments = build_mask(spec)
    fig, axes = new_figure(1, 1, panel_w=5.2, panel_h=5.0)
    ax = axes[0][0]
    ax.imshow(mask.astype(float), cmap=ListedColormap(["#f4f4f4", "#2b6cb0"]), interpolation="nearest",
              vmin=0, vmax=1)
    length = mask.shape[0]
    for _, start, _end in segments[1:]:
        ax.axhline(start - 0.5, color="#c53030", lw=0.8)
        ax.axvline(start - 0.5, color="#c53030", lw=0.8)
    centers = [(a + b - 1) / 2 for _, a, b in segments]
    names = [n for n, _, _ in segments]
    ax.set_xticks(centers, names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(centers, names, fontsize=7)
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(length - 0.5, -0.5)
    ax.set_xlabel("key position (attended to)")
    ax.set_ylabel("query position")
    ax.set_title("Tree attention mask (blue = attend)", fontsize=10)
    table = pd.DataFrame(segments, columns=["segment", "start", "end"])
    table["visible_keys"] = [int(np.sum(mask[a:b])) for _, a, b in segments]
    return fig, table

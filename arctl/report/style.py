"""Shared look of the figures: arm colours, saving in PNG + PDF + SVG, the "runs used" footnote."""

from __future__ import annotations

from pathlib import Path

FORMATS = ("png", "pdf", "svg")
_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22", "#7f7f7f"]


def arm_colors(arms: list[str]) -> dict[str, str]:
    return {a: _PALETTE[i % len(_PALETTE)] for i, a in enumerate(arms)}


MIN_FIGURE_WIDTH_IN = 5.5  # room for the legend and the footnote when there is one column of panels


def new_figure(nrows: int, ncols: int, panel_w: float = 3.6, panel_h: float = 2.8):
    """A pyplot-free Figure (no global state) with an nrows × ncols grid of axes."""
    from matplotlib.figure import Figure

    width = max(panel_w * ncols, MIN_FIGURE_WIDTH_IN)
    fig = Figure(figsize=(width, panel_h * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def runs_footnote(used: list[dict], arm_label, arms: list[str] | None = None) -> str:
    """'Runs: GRPO ×2 (main-grpo), AR-base ×1 (main-ar-base)' — which runs a figure used."""
    groups: dict[tuple[str, str], int] = {}
    for r in used:
        key = (str(r["arm"]), str(r["experiment"]))
        groups[key] = groups.get(key, 0) + 1
    rank = {a: i for i, a in enumerate(arms or [])}
    keys = sorted(groups, key=lambda k: (rank.get(k[0], len(rank)), k))
    return "Runs: " + ", ".join(f"{arm_label(a)} ×{groups[(a, e)]} ({e})" for a, e in keys)


def add_legend(fig, handles, labels) -> None:
    """One legend above the panels, with as many columns as fit the figure's width (never cut)."""
    if not labels:
        return
    longest = max(len(str(lb)) for lb in labels)
    per_entry_in = 0.6 + 0.085 * longest  # handle + padding + text at the default font size
    ncols = max(1, min(len(labels), 6, int(fig.get_size_inches()[0] // per_entry_in)))
    fig.legend(handles, labels, loc="outside upper center", ncols=ncols, frameon=False)


def add_footnote(fig, text: str) -> None:
    """A note under the axes (which runs were used), wrapped to the figure's width; constrained
    layout makes room for it."""
    import textwrap

    width = max(40, int(fig.get_size_inches()[0] * 20))
    fig.supxlabel(textwrap.fill(text, width), x=0.01, ha="left", fontsize=6, color="0.35")


def save_figure(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name.png/.pdf/.svg`` into ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    engine = fig.get_layout_engine()
    for fmt in FORMATS:
        p = out_dir / f"{name}.{fmt}"
        fig.savefig(p, dpi=150 if fmt == "png" else None)
        paths.append(p)
        if fig.get_layout_engine() is not None:
            fig.set_layout_engine("none")  # the layout is fixed by the first save: do not redo it
    if engine is not None:
        fig.set_layout_engine(engine)
    return paths

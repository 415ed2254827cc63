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
    """Write ``name.png/.pdf/.svg`` into ``out_dir``; returns the paths.

    The layout is computed once for the three formats. On Linux the PDF is written by a forked copy
    of the process while this one writes the PNG and the SVG (the renderings are independent; on 2
    cores this takes about half the time); a copy that fails or hangs is replaced by writing that
    format here."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{fmt}" for fmt in FORMATS]
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
        fig.set_layout_engine("none")  # the layout is fixed: do not redo it in every format
    try:
        _save_formats(fig, paths)
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
    return paths


CHILD_TIMEOUT_S = 120.0
FORKED_FORMATS = (".pdf",)


def _savefig(fig, path: Path) -> None:
    fig.savefig(path, dpi=150 if path.suffix == ".png" else None)


def _save_formats(fig, paths: list[Path]) -> None:
    import os
    import sys

    if not sys.platform.startswith("linux") or os.environ.get("ARCTL_SERIAL_SAVE"):
        for p in paths:
            _savefig(fig, p)
        return
    # the PDF (its backend imports fontTools) takes about as long as the PNG and the SVG together
    forked = [p for p in paths if p.suffix in FORKED_FORMATS]
    here = [p for p in paths if p.suffix not in FORKED_FORMATS]
    children: dict[int, Path] = {}
    for p in forked:
        pid = os.fork()
        if pid == 0:  # child: write one format, never return into the caller's code
            code = 1
            try:
                _savefig(fig, p)
                code = 0
            finally:
                os._exit(code)
        children[pid] = p
    for p in here:
        _savefig(fig, p)
    for pid, p in children.items():
        if not _wait_ok(pid, CHILD_TIMEOUT_S):
            _savefig(fig, p)  # here, so that an error surfaces with its real traceback


def _wait_ok(pid: int, timeout_s: float) -> bool:
    """Whether child ``pid`` exited with status 0 within ``timeout_s`` (killed after that)."""
    import os
    import signal
    import time

    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)

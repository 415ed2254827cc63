"""Shared look of the figures: arm colours (one per arm, in every figure), saving in PNG + PDF + SVG, the "runs
used" footnote; and how a report puts its files in place (:class:`Outputs`: all of them together, or none)."""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from pathlib import Path

from arctl.config.files import replacing
from arctl.launch.signals import signals_held
from arctl.report.specs import fixed_arm_colors

FORMATS = ("png", "pdf", "svg")
# the colours of arms that labels.yaml's `colors` does not list (a user's own): colour-blind-safe ones (Paul Tol's)
# far from the listed ones (CIELAB distance >= 20 from each, and from each other). From a hunt: colours were given
# by an arm's place among the arms a figure had, so AR-uniform was orange beside AR-base and red without it, and
# red meant another arm in each figure.
FALLBACK_COLORS = ("#EE3377", "#663333", "#EE8866", "#BBCC33", "#225555", "#77AADD", "#004488", "#997700",
                   "#FFAABB", "#BBBBBB")


def arm_color(arm: str) -> str:
    """The colour of ``arm`` in every figure: ``labels.yaml``'s ``colors``, else one of the
    :data:`FALLBACK_COLORS` no listed arm has, chosen by a hash of the arm's name (the same in every
    process and on every machine)."""
    return arm_colors([arm])[arm]


def arm_colors(arms) -> dict[str, str]:
    """arm -> colour for the arms of one figure: :func:`arm_color` of each, whichever other arms are there;
    only where two unlisted arms' names choose the same colour does the later one (in ``arms``' order) take
    the next colour no arm of the figure has."""
    fixed = fixed_arm_colors()
    taken = {c.lower() for c in fixed.values()}
    free = [c for c in FALLBACK_COLORS if c.lower() not in taken]
    colors: dict[str, str] = {}
    used: set[str] = set()
    for arm in dict.fromkeys(str(a) for a in arms):
        if arm in fixed:
            colors[arm] = fixed[arm]
            continue
        start = _name_hash(arm)
        options = [free[(start + k) % len(free)] for k in range(len(free))]
        color = next((c for c in options if c.lower() not in used), None) or _derived_color(arm, taken | used)
        colors[arm] = color
        used.add(color.lower())
    return colors


def _name_hash(name: str, salt: int = 0) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{name}\0{salt}".encode()).digest()[:8], "big")


def _derived_color(arm: str, taken: set[str]) -> str:
    """A colour from the arm's name, not in ``taken``: where every fallback colour is taken (labels.yaml lists
    them all, or a figure has more unlisted arms than there are)."""
    import colorsys

    salt = 0
    while True:
        h = _name_hash(arm, salt)
        r, g, b = colorsys.hsv_to_rgb((h % 360) / 360, 0.55 + (h >> 9) % 30 / 100, 0.45 + (h >> 17) % 35 / 100)
        color = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        if color not in taken:
            return color
        salt += 1


# what every figure is drawn and saved with, over matplotlib's own defaults (:func:`report_rc`). TrueType (42), not
# Type 3, fonts in a PDF (and PostScript): camera-ready checkers refuse Type 3 (from a hunt: every PDF had one). The
# SVG keeps its text as paths: text elements would be drawn in whatever font the viewer has, with other widths than
# the layout was computed for. No TeX: a label such as "accuracy (%)" or a run id with "_" is text, not TeX.
PINNED_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "path", "text.usetex": False}


@contextmanager
def report_rc(extra: dict | None = None):
    """Within the block (or the decorated function), matplotlib's settings are its own defaults and
    :data:`PINNED_RC` (and ``extra``), whatever ``matplotlibrc`` the user has (in the working directory,
    ``$MATPLOTLIBRC``, ``$MPLCONFIGDIR``, ``~/.config/matplotlib``); the previous settings come back after it.
    Figures read the settings when their artists are made, laid out, drawn and saved: a figure is built and saved
    within it. From a hunt: a paper repo's ``font.family: serif`` changed every figure's bytes, ``svg.fonttype:
    none`` wrote SVG text elements, and ``text.usetex: True`` stopped every figure and ``--claims`` with a traceback."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # (the backend and the other settings of no style stay as they are)
        matplotlib.rcParams.update({**PINNED_RC, **(extra or {})})
        yield


MIN_FIGURE_WIDTH_IN = 5.5  # room for the legend and the footnote when there is one column of panels


def new_figure(nrows: int, ncols: int, panel_w: float = 3.6, panel_h: float = 2.8):
    """A pyplot-free Figure (no global state) with an nrows × ncols grid of axes; a builder makes and draws it
    within :func:`report_rc`."""
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


def path_from(out_dir: str | Path, path: str | Path) -> str:
    """``path`` as a report's files in ``out_dir`` name it: relative to ``out_dir`` (both resolved), so that the same
    workspace gives the same bytes however its path was typed and wherever the two lie together (a paper repo's
    figures/ beside data/: ``../data``). From a hunt: runs.json's ``source`` and claims.md's commands held the path as
    typed, or absolute (a home folder published in a paper repo)."""
    return os.path.relpath(Path(path).expanduser().resolve(), Path(out_dir).expanduser().resolve())


def paths_from(out_dir: str | Path, workdir: str | Path, text: str) -> str:
    """``text`` (a report's warning) as the report's files in ``out_dir`` say it: the workspace ``workdir`` and every
    path under it named as :func:`path_from` names it, where ``text`` names it as typed, absolute or resolved (a W&B
    file's path, ``--workdir W`` of a command, ``--out W`` of an export's), shell-quoted where it was. Only a path is
    replaced: an absolute form (or a relative one with a ``/`` in it, ``../data``) as a whole token, one that begins
    after a space, a quote, a bracket, ``=`` or ``,`` and ends at a ``/``, a space or a mark (``ws`` in ``ws2/`` or
    ``rows`` is not the workspace ``ws``); a name typed bare (``runs``) only where a ``/`` follows it (a path under
    it) or as the argument of ``--workdir``/``--out``; a workspace typed ``.`` as ``runs/...``, its paths. From a
    hunt of determinism: claims.md's warnings held the paths as typed, so the same report written from another folder
    differed; from a review: a workspace typed ``runs``, ``tiny`` or an experiment's name changed those words too
    ("these ../runs ran uniform", ``--scale ../tiny``, ``arctl run ../ablation-vr``)."""
    import re
    import shlex

    base = Path(workdir).expanduser()
    rel = Path(path_from(out_dir, base))
    whole: dict[str, str] = {}  # replaced as a whole token
    under: dict[str, str] = {}  # replaced only where a "/" follows (a path under the workspace)

    def add(pairs: dict[str, str], old: str, new: str) -> None:
        pairs.setdefault(old, new)
        if shlex.quote(old) != old:
            pairs.setdefault(shlex.quote(old), shlex.quote(new))

    for form in (base, base.absolute(), base.resolve()):
        for flag in ("--workdir", "--out"):  # a command's, "." and a bare name too
            whole.setdefault(f"{flag} {shlex.quote(str(form))}", f"{flag} {shlex.quote(str(rel))}")
        if str(form) in (".", ""):  # the workspace typed ".": its paths are "runs/..."
            add(under, "runs", str(rel / "runs"))
        elif form.is_absolute() or len(form.parts) > 1:  # a path whatever follows it
            add(whole, str(form), str(rel))
        else:  # a bare name ("runs", "tiny", an experiment's): a word unless a path under it follows
            add(under, str(form), str(rel))

    def alternatives(pairs: dict[str, str]) -> str:
        return "|".join(re.escape(p) for p in sorted(pairs, key=len, reverse=True)) or "(?!)"

    begins = r"(?<![^\s`'\"(\[=,])"
    pattern = (rf"{begins}(?:({alternatives(whole)})(?=$|[\s`'\")\],;:/])|({alternatives(under)})(?=/))")
    return re.sub(pattern, lambda m: whole[m.group(1)] if m.group(1) is not None else under[m.group(2)], text)


class Outputs:
    """The files of one report, put in place together when the ``with`` block ends, or none of them.

    ``stage(target)`` gives a temporary file beside ``target`` to write (:func:`arctl.config.files.replacing`);
    when the block ends each replaces its target, one rename after another, with Ctrl-C (and SIGTERM, SIGHUP)
    held back until the last is done. A block that raises (a Ctrl-C while a figure renders, an error) removes
    the temporaries: the folder holds the previous report's files, each whole. From a hunt: a Ctrl-C during
    ``arctl report`` left a PDF cut at 457 bytes, and ``claims.json``/``.md`` of one run beside the
    ``claims.html`` of the run before. ``in_place``: whether the new files are there (a Ctrl-C held back
    during the renames, or one soon after, comes when they are: what the caller says of it depends on this);
    ``named``: whether any target is known yet (staged, or announced by :meth:`expect` before its slow
    rendering); ``had_previous``: whether any of them was there when it became known (a report stopped before
    it put its files in place left that folder's previous files, if it had any: from a review, a first report
    stopped early said "holds the previous outputs" of a folder it never made)."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.paths: list[Path] = []
        self.in_place = False
        self.named = False
        self.had_previous = False

    def expect(self, targets) -> None:
        """Announce targets that will be staged once rendered: a stop while they render then knows whether
        there were previous files of them."""
        for target in targets:
            self.named = True
            self.had_previous = self.had_previous or Path(target).exists()

    def __enter__(self) -> Outputs:
        self._stack.__enter__()
        return self

    def stage(self, target: str | Path) -> Path:
        """A temporary file to write ``target``'s content into; it becomes ``target`` when the block ends."""
        target = Path(target)
        self.expect([target])
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._stack.enter_context(replacing(target))
        self.paths.append(target)
        return tmp

    def write_text(self, target: str | Path, text: str) -> Path:
        """Stage ``target`` with ``text`` in UTF-8, whatever the locale (claims.html declares utf-8; from a hunt:
        the .md, .tex and .html differed by machine, and a latin-1 locale raised UnicodeEncodeError on "→")."""
        self.stage(target).write_text(text, encoding="utf-8")
        return Path(target)

    def __exit__(self, kind, value, tb) -> bool:
        if kind is not None:  # the temporaries go; the targets are as they were
            return bool(self._stack.__exit__(kind, value, tb))
        with signals_held():
            self._stack.__exit__(None, None, None)
            self.in_place = True
        return False


def save_figure(fig, out_dir: str | Path, name: str, outputs: Outputs | None = None) -> list[Path]:
    """Write ``name.png/.pdf/.svg`` into ``out_dir``; returns the paths. ``outputs``: the report's
    :class:`Outputs`, which puts them in place with its other files; without, they are put in place when
    the three are written (never one of them half written).

    The layout is computed once for the three formats. On Linux the PDF is written by a forked copy
    of the process while this one writes the PNG and the SVG (the renderings are independent; on 2
    cores this takes about half the time); a copy that fails or hangs is replaced by writing that
    format here. The formats are written into a folder of temporaries beside the targets (named as the
    targets are: matplotlib chooses the format by the suffix), then staged."""
    import secrets
    import shutil

    if outputs is None:
        with Outputs() as own:
            return save_figure(fig, out_dir, name, own)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{fmt}" for fmt in FORMATS]
    outputs.expect(paths)  # before the rendering, where a Ctrl-C comes
    # named before it is made, inside the try: a Ctrl-C between tempfile.mkdtemp's mkdir and its return left the
    # folder in the outputs (seen under load in tests/report/test_interrupted_report.py)
    work = out_dir / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    engine = fig.get_layout_engine()
    try:
        work.mkdir(mode=0o700)
        with report_rc():  # the layout, with the figure's settings
            if engine is not None:
                engine.execute(fig)
                fig.set_layout_engine("none")  # the layout is fixed: do not redo it in every format
        written = [work / p.name for p in paths]
        _save_formats(fig, written)
        for p, w in zip(paths, written):
            os.replace(w, outputs.stage(p))
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
        shutil.rmtree(work, ignore_errors=True)
    return paths


CHILD_TIMEOUT_S = 120.0
FORKED_FORMATS = (".pdf",)


# no date in a PDF or an SVG, and SVG ids from the file's name, not uuid4: the same runs give the same bytes, so a
# regenerated figure committed to git shows no diff (from a hunt: every PDF and SVG differed on every rerun)
UNDATED = {".pdf": {"CreationDate": None}, ".svg": {"Date": None}}


def _savefig(fig, path: Path) -> None:
    with report_rc({"svg.hashsalt": path.stem}):
        saving(fig.savefig, path, dpi=150 if path.suffix == ".png" else None, metadata=UNDATED.get(path.suffix))


def saving(save, *args, **kwargs):
    """``save(*args, **kwargs)`` (matplotlib writing a figure) with a Ctrl-C (and SIGTERM, SIGHUP) that comes while it
    runs held until it returns, then raised (:func:`arctl.launch.signals.signals_held`; main thread only, the previous
    handlers put back). A KeyboardInterrupt raised inside a weakref callback, which matplotlib's callbacks and
    caches run during a save, is dropped by CPython ("Exception ignored in ..."): from CI, `arctl report --figure`
    went on after a Ctrl-C to its process group. The one way :func:`_savefig` and the claims page's figures save."""
    with signals_held():
        return save(*args, **kwargs)


def _save_formats(fig, paths: list[Path]) -> None:
    import signal
    import sys

    if not sys.platform.startswith("linux") or os.environ.get("ARCTL_SERIAL_SAVE"):
        for p in paths:
            _savefig(fig, p)
        return
    # the PDF (its backend imports fontTools) takes about as long as the PNG and the SVG together
    forked = [p for p in paths if p.suffix in FORKED_FORMATS]
    here = [p for p in paths if p.suffix not in FORKED_FORMATS]
    children: dict[int, Path] = {}
    try:
        for p in forked:
            pid = os.fork()
            if pid == 0:  # child: write one format, never return into the caller's code
                code = 1
                try:
                    # a terminal's Ctrl-C reaches the whole process group: the parent decides (it stops
                    # this copy and removes its file), a copy that died on it left a PDF cut short
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    _savefig(fig, p)
                    code = 0
                finally:
                    os._exit(code)
            children[pid] = p
        for p in here:
            _savefig(fig, p)
        for pid, p in list(children.items()):
            ok = _wait_ok(pid, CHILD_TIMEOUT_S)
            del children[pid]
            if not ok:
                _savefig(fig, p)  # here, so that an error surfaces with its real traceback
    finally:  # interrupted (or failed) while a copy still writes: it stops before its file is removed
        for pid in children:
            _stop(pid)


def _stop(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _wait_ok(pid: int, timeout_s: float) -> bool:
    """Whether child ``pid`` exited with status 0 within ``timeout_s`` (killed after that)."""
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

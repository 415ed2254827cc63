"""Shared plumbing of the CLI commands: one-line user errors (exit 2), JSON output, consoles.

Every command wraps its body in ``with user_errors():`` so that a user mistake (a SpecError, a
ValueError raised for bad input, a missing file) prints ONE red line on stderr and exits with code
2, with nothing submitted. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import io
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from arctl.config.files import DEFAULT_WORKDIR, HOME_ENV, PLACE_ERRNOS
from arctl.config.terminal import can_redraw, is_tty

EXIT_USER_ERROR = 2

# 128 + SIGPIPE, as a shell reports a command whose reader went away (`arctl status | head -1`): rich and click exit 1
# there, which a script cannot tell from a failed command (from a hunt: a sweep whose jobs were all submitted)
CLOSED_OUTPUT_EXIT = 141


class _Console(Console):
    """rich's console, ending on a closed output as a shell says it (:data:`CLOSED_OUTPUT_EXIT`), not with 1; and
    knowing whether the code that made it forced it to be a terminal (``forced_terminal``: rich's own record of it,
    ``_force_terminal``, is set from ``FORCE_COLOR`` by rich 13.x, which pyproject allows)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.forced_terminal: bool | None = kwargs.get("force_terminal")

    def on_broken_pipe(self) -> None:
        try:
            super().on_broken_pipe()  # quiet from now on, stdout onto /dev/null; raises SystemExit(1)
        except SystemExit:
            raise SystemExit(CLOSED_OUTPUT_EXIT) from None


# emoji=False: a user's ":smile:" (in a description, a path, a name) is printed as written, not as an emoji
console = _Console(highlight=False, soft_wrap=True, emoji=False)
err_console = _Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def is_terminal(on: Console | None = None) -> bool:
    """Whether ``on``'s stream (stdout's console by default) really is a terminal (:func:`arctl.config.terminal.is_tty`):
    the one test of where arctl draws tables and sizes them to a width; FORCE_COLOR and TTY_COMPATIBLE choose colour
    only (from a hunt: CI logs got box tables 80 columns wide). A console made with ``force_terminal=`` (a test's
    screen) is what it was told."""
    on = on or console
    forced = on.forced_terminal if isinstance(on, _Console) else on._force_terminal  # (another: a test's own)
    return forced if forced is not None else is_tty(on.file)


def progress_bars(on: Console | None = None) -> bool:
    """Whether to draw progress bars and spinners, or redraw a line: where stderr (``on``) is a terminal
    (:func:`is_terminal`) that can redraw a line (:func:`arctl.config.terminal.can_redraw`: not ``TERM=dumb``),
    whatever ``--json`` says (its document is stdout's alone; from a hunt: ``--json`` hid every bar). A pipe, a log
    and a dumb terminal get none: a transient bar leaves blank lines there (from a hunt: ``TERM=dumb arctl
    export``), and its frames pile up in a file (from a hunt: ``FORCE_COLOR=1``)."""
    on = on or err_console
    return is_terminal(on) and can_redraw()


SLOW_NOTE_AFTER_S = 1.0  # a wait on another program (sacct) is said after this long, where stderr is a terminal


@contextmanager
def slow_note(text: str, after_s: float = SLOW_NOTE_AFTER_S, on: Console | None = None) -> Iterator[None]:
    """While the block runs past ``after_s`` seconds, a spinner with ``text`` on stderr, gone when it ends; only where
    stderr is a terminal (a script, a pipe and a log get nothing). From a hunt: `arctl status` waited up to 60 s for
    an accounting daemon that did not answer, without a word."""
    import threading

    on = on or err_console
    if not progress_bars(on):
        yield
        return
    shown = []
    lock = threading.Lock()

    def show() -> None:
        with lock:
            if not done:
                shown.append(on.status(escape(text)))
                shown[0].start()

    done = False
    timer = threading.Timer(after_s, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            done = True
            for spinner in shown:
                spinner.stop()


class UserError(Exception):
    """A mistake of the user's that a command detected itself (bad flag combination, missing run)."""


def esc(value: Any) -> str:
    """``value`` as text that rich prints verbatim: user-supplied strings (names, paths, errors,
    overrides) are never read as markup (``[/x]`` would crash, ``[link=...]`` would hide itself).

    Backslashes at the end are rich's one trap: before a tag each pair prints one, elsewhere each prints
    itself, and rich's ``escape`` doubles one (from a hunt: ``--foo\\`` printed ``--foo\\\\`` before ": ...",
    and two at the end before ``[/]`` printed one). So the text's own trailing backslashes are doubled and
    an empty tag follows them: one each, whatever comes after."""
    text = str(value)
    body = text.rstrip("\\")
    if len(body) == len(text):
        return escape(text)
    return escape(body) + "\\" * (2 * (len(text) - len(body))) + _EMPTY_TAG


_EMPTY_TAG = "[dim][/dim]"  # prints nothing; the backslashes before it are read in pairs


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``): user text that reaches the
    terminal (an override Hydra could not parse, a name read from disk) cannot move the cursor,
    recolour, retitle or clear it."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


_SGR = re.compile(r"\x1b\[[0-9;:]*m")  # a colour/bold sequence: the one a job's output may keep
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")  # C0 but \t \n \r, DEL, C1 (\x9b: CSI, \x9d: OSC)


def output_text(text: str) -> str:
    """A job's output as the terminal may show it: its colours (SGR ``\\x1b[...m``), tabs, newlines and carriage
    returns kept, every other control character written as an escape like :func:`printable`'s, so that a
    sequence that retitles or clears the terminal, moves its cursor or starts an OSC shows as text (from a hunt:
    `arctl logs` wrote a job's ``\\x1b]0;TITLE\\x07`` and ``\\x1b[2J`` to the terminal)."""
    parts = _SGR.split(text)
    kept = _SGR.findall(text)
    escaped = [_CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), part) for part in parts]
    return "".join(a + b for a, b in zip(escaped, [*kept, ""]))


def secrets_masked(text: str) -> str:
    """``text`` with the value of every secret arctl knows of (:func:`arctl.track.identity.known_secrets`: the
    environment's, the W&B key in ~/.netrc, the Hugging Face token files') written as ``<value of $NAME>``. An
    error line echoes what the user typed, and a secret pasted into an argument that is no override (an experiment's
    name, --arm, --seeds, a run target, ...) was shown in it (from a hunt); overrides are refused unechoed before."""
    from arctl.track.identity import known_secrets, secret_shown

    for name, value in sorted(known_secrets(os.environ).items(), key=lambda kv: -len(kv[1])):  # the longest first
        if value in text:
            text = text.replace(value, f"<value of {secret_shown(name)}>")
    return text


def error_line(message: str) -> str:
    """The one error line of ``message``, as rich markup: ``error:`` and its text on one line, its control
    characters written as escapes (:func:`printable`), known secrets' values masked (:func:`secrets_masked`)."""
    line = printable(" ".join(secrets_masked(str(message)).split()))
    return f"[bold red]error:[/] {esc(line)}"


def fail(message: str) -> NoReturn:
    """Print one clear error line on stderr (:func:`error_line`) and exit with code 2."""
    err_console.print(error_line(message), markup=True, highlight=False)
    raise typer.Exit(EXIT_USER_ERROR)


def _user_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [UserError]
    for module, name in (("arctl.compose.errors", "SpecError"), ("arctl.launch.registry", "RegistryError")):
        loaded = sys.modules.get(module)
        if loaded is not None:
            types.append(getattr(loaded, name))
    return tuple(types)




def place_problem(err: BaseException) -> str | None:
    """One line for an OSError about a path the user can act on, else None."""
    if not isinstance(err, OSError) or err.errno not in PLACE_ERRNOS or not err.filename:
        return None
    where = str(err.filename) + (f" -> {err.filename2}" if err.filename2 else "")
    hint = {errno.ENOSPC: "free some space and run the command again",
            errno.EDQUOT: "your disk quota is exceeded there (see `quota`): free some of your space, then run the command again",
            errno.EROFS: "the folder is read-only: choose another with --workdir/--out"}.get(err.errno, "")
    return f"{where}: {err.strerror or os.strerror(err.errno)}" + (f" ({hint})" if hint else "")


# The commands that read specs, by what a $ARCTL_SPECS entry that can hold no spec (a missing folder, the experiments/
# folder itself) costs each (:func:`spec_path_checked`). A launch composes the spec of the name further down the
# search path and trains it as the user's: refused. The others miss the user's specs in a listing, a shown config, a
# sweep's status or a report, or resume a run's frozen config (no spec composed): a note, and they go on. `arctl cp`
# says it among its own warnings; the rest (logs, cancel, data) read no spec.
SPEC_LAUNCHES = ("run", "sweep")
SPEC_READERS = ("ls", "show", "status", "report", "export", "resume", "repair")
# in the click context's meta (shared by the contexts of one command line): the check was made; the user_errors blocks open
_SPEC_PATH_CHECKED, _BLOCKS_OPEN = "arctl.spec_path_checked", "arctl.user_errors_open"


@contextmanager
def spec_path_checked() -> Iterator[None]:
    """The check of the spec search path of a command (:data:`SPEC_LAUNCHES`, :data:`SPEC_READERS`) around its
    :func:`user_errors` blocks, once per command line; nothing outside a command (no click context). A launch whose
    ``$ARCTL_SPECS`` has an entry that can hold no spec is refused as its first block starts
    (:func:`arctl.compose.paths.spec_path_error`: one line, exit 2, before anything is composed or written). Another
    command notes each such entry on stderr (:func:`arctl.compose.paths.spec_path_notes`) where its outermost block
    ends without an error, the specs read: before what it prints after (`arctl ls`'s table, `arctl show`'s configs),
    else at its end; an error line stays the only line (an unknown spec's names the entries itself). From a hunt:
    such an entry was skipped without a word, and the shipped spec of the name trained in place of the user's, exit 0."""
    ctx = _command_context()
    if ctx is None:
        yield
        return
    top = ctx
    while top.parent is not None and top.parent.parent is not None:  # the command under `arctl` (`data prepare`: data)
        top = top.parent
    name, meta = top.command.name, ctx.meta
    if name in SPEC_LAUNCHES and not meta.get(_SPEC_PATH_CHECKED):
        meta[_SPEC_PATH_CHECKED] = True
        from arctl.compose.paths import spec_path_error

        if (err := spec_path_error()) is not None:
            fail(str(err))
    meta[_BLOCKS_OPEN] = meta.get(_BLOCKS_OPEN, 0) + 1
    try:
        yield
    finally:
        meta[_BLOCKS_OPEN] -= 1
    if name in SPEC_READERS and not meta[_BLOCKS_OPEN] and not meta.get(_SPEC_PATH_CHECKED):
        meta[_SPEC_PATH_CHECKED] = True
        from arctl.compose.paths import spec_path_notes

        for note in spec_path_notes():
            err_console.print(f"[yellow]note:[/] {esc(printable(note))}", markup=True, highlight=False)


def _command_context():
    """The click context of the command running now, or None: from the click Typer runs on (recent Typers vendor
    their own, ``typer._click``; older ones run on click itself)."""
    import importlib

    for module in ("typer._click.globals", "click.globals"):
        try:
            ctx = importlib.import_module(module).get_current_context(silent=True)
        except ImportError:
            continue
        if ctx is not None:
            return ctx
    return None


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn user mistakes raised inside the block into one line + exit code 2; within the check of the spec search
    path (:func:`spec_path_checked`)."""
    with spec_path_checked():
        try:
            yield
        except typer.Exit:
            raise
        except BaseException as err:  # noqa: BLE001 - re-raised unless it is a user mistake
            if isinstance(err, _user_error_types()):
                fail(str(err))
            place = place_problem(err)
            if place:
                fail(place)
            raise


def _given(value):
    """An option given as ``""`` is a mistake (``--workdir "$DIR"`` with DIR unset), never the default."""
    if value is not None and not str(value).strip():
        raise typer.BadParameter("is empty: give it a value, or leave the option out")
    return value


SCALE_HELP = ("A backend's scale profile: tiny (CPU toy, the default), tiny-running-sum, paper (GPU "
              "clusters), or one an installed backend brings.")
"""``--scale`` of run, sweep and show (the options: ``arctl.compose.paths.group_options("scale")``)."""


WORKDIR_HELP = f"Workspace (default ${HOME_ENV} or ./{DEFAULT_WORKDIR})."
"""``--workdir`` of the commands that act on a workspace (:func:`arctl.config.files.workdir_path`)."""
WORKDIR_RUNS_HELP = f"Workspace holding runs/ (default ${HOME_ENV} or ./{DEFAULT_WORKDIR})."
"""``--workdir`` of the commands that read its runs (report, export)."""

PARALLELISM_HELP = "(default: cluster.array_parallelism; local: what the cores and memory allow)."
"""What ``--array-parallelism`` of run, sweep and resume defaults to (after what it counts)."""

EXECUTOR_HELP = ("slurm | local | debug (default: cluster.executor; auto = slurm if sbatch is on PATH and a "
                 "controller answers, else local).")


def nonempty_option(*names: str, help: str, default: Any = None):  # noqa: A002 - typer's own name
    """``typer.Option(default, *names, help=help)`` that refuses an empty value (one error line, exit 2).
    Declare the parameter ``str``: typer turns ``""`` into ``Path(".")`` before any check could see it."""
    return typer.Option(default, *names, help=help, callback=_given)


def print_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else; a NaN or inf is ``null``
    (:func:`arctl.config.json_text.json_text`: a bare ``NaN`` is not JSON)."""
    from arctl.config.json_text import json_text

    sys.stdout.write(json_text(data, indent=2) + "\n")
    sys.stdout.flush()


def parse_seeds(text: str | None) -> list[int] | None:
    """``"0,1,2"`` or ``"0-2"`` -> [0, 1, 2]; None -> None. Seeds up to ``SEED_MAX``, at most
    ``MAX_SEEDS`` of them (ranges are sized before they are expanded)."""
    from arctl.config.ranges import MAX_SEEDS, SEED_MAX

    if text is None:
        return None
    import re

    seeds: list[int] = []
    try:
        for part in text.split(","):  # each part N or N-M in ASCII digits: no empty part ("1,,2", "1,")
            found = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part)
            if found is None:
                raise ValueError
            lo = int(found[1])
            hi = int(found[2]) if found[2] is not None else lo
            if hi < lo:
                raise ValueError
            if hi - lo + 1 + len(seeds) > MAX_SEEDS:
                fail(f"--seeds {text!r} names {hi - lo + 1 + len(seeds)} seeds; at most {MAX_SEEDS} per launch")
            seeds.extend(range(lo, hi + 1))
    except ValueError:
        fail(f"--seeds {text!r} is not a list of seeds — use e.g. --seeds 0,1,2 or --seeds 0-2")
    if not seeds or any(s < 0 or s > SEED_MAX for s in seeds) or len(set(seeds)) != len(seeds):
        fail(f"--seeds {text!r} must list distinct integers from 0 to {SEED_MAX} — e.g. --seeds 0,1,2")
    if len(seeds) > MAX_SEEDS:
        fail(f"--seeds {text!r} names {len(seeds)} seeds; at most {MAX_SEEDS} per launch")
    return seeds


def plain_columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``rows`` under ``headers`` as aligned plain columns on stdout, never cut or folded: what a pipe gets (a
    script splits a line on whitespace, a user greps for a name), and a terminal too narrow for the table. Rich's
    table, given less room than its cells, folded run ids and names over lines and cut others with "…" (from a
    hunt). Fast for thousands of rows."""
    widths = [max([cell_len(h)] + [cell_len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(v + " " * (w - cell_len(v)) for v, w in zip(row, widths)).rstrip() for row in [headers, *rows]]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def fit_columns(table, natural: Sequence[int], give_way: Sequence[int], least: Sequence[int], width: int) -> bool:
    """Fix the widths of ``table``'s columns so that it is at most ``width`` cells wide: each column at its
    ``natural`` width (its longest line), and where that is too wide the columns indexed by ``give_way`` give
    way in turn, each down to its ``least``; False, the table left as it was, where even then it is too wide
    (print :func:`plain_columns` instead). Left to itself rich shrinks every column alike at the last, run ids
    and states too: `arctl status` in 100 columns cut run ids with "…" and dropped the state (from a hunt)."""
    from rich.measure import Measurement

    columns = table.columns
    before = [(c.width, c.min_width, c.max_width) for c in columns]
    for column in columns:
        column.width, column.min_width, column.max_width = 1, None, None
    wide = Console(width=10**6, file=io.StringIO())
    overhead = Measurement.get(wide, wide.options, table).maximum - len(columns)  # borders and padding
    widths = [max(1, w) for w in natural]
    for i in give_way:
        excess = overhead + sum(widths) - width
        if excess <= 0:
            break
        widths[i] -= max(0, min(excess, widths[i] - least[i]))
    if overhead + sum(widths) > width:
        for column, (w, lo, hi) in zip(columns, before):
            column.width, column.min_width, column.max_width = w, lo, hi
        return False
    for column, w in zip(columns, widths):
        column.width = w
    return True


def section(title: str) -> None:
    """A rule headed by ``title`` (rich markup), on stdout; where the title would not fit whole on the rule (a
    long log path, a run id in a narrow terminal), a plain rule and then the title on its own line, soft-wrapped:
    ``console.rule`` cut it with "…" at the width (from a hunt: `arctl logs` printed no file's whole path). Drawn
    with "-" where stdout's encoding has no "─": rich's untitled rule ignores its own ascii_only, and raised
    UnicodeEncodeError under an ascii or latin-1 stdout (from a hunt: `arctl logs RUN` printed no logs at all)."""
    from rich.text import Text

    line = RULE_LINE if _encodable(RULE_LINE, console.encoding) else "-"
    if Text.from_markup(title).cell_len + 6 <= console.width:  # the rule's own ends and spaces
        console.rule(title, characters=line)
    else:
        console.rule(characters=line)
        console.print(title)


RULE_LINE = "─"  # rich's own rule character


def _encodable(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True

"""Shared plumbing of the CLI commands: one-line user errors (exit 2), JSON output, consoles.

Every command wraps its body in ``with user_errors():`` so that a user mistake (a SpecError, a
ValueError raised for bad input, a missing file) prints ONE red line on stderr and exits with code
2, with nothing submitted. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from arctl.config.files import PLACE_ERRNOS

EXIT_USER_ERROR = 2

# emoji=False: a user's ":smile:" (in a description, a path, a name) is printed as written, not as an emoji
console = Console(highlight=False, soft_wrap=True, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


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


def fail(message: str) -> NoReturn:
    """Print one clear error line on stderr and exit with code 2."""
    line = printable(" ".join(str(message).split()))
    err_console.print(f"[bold red]error:[/] {esc(line)}", markup=True, highlight=False)
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
            errno.EDQUOT: "free some space and run the command again",
            errno.EROFS: "the folder is read-only: choose another with --workdir/--out"}.get(err.errno, "")
    return f"{where}: {err.strerror or os.strerror(err.errno)}" + (f" ({hint})" if hint else "")


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn user mistakes raised inside the block into one line + exit code 2."""
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


EXECUTOR_HELP = ("slurm | local | debug (default: cluster.executor; auto = slurm if sbatch is on PATH and a "
                 "controller answers, else local).")


def nonempty_option(*names: str, help: str, default: Any = None):  # noqa: A002 - typer's own name
    """``typer.Option(default, *names, help=help)`` that refuses an empty value (one error line, exit 2).
    Declare the parameter ``str``: typer turns ``""`` into ``Path(".")`` before any check could see it."""
    return typer.Option(default, *names, help=help, callback=_given)


def print_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
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

"""Entry point of the ``arctl`` console script.

Commands live in ``arctl/cli/cmd_<name>.py`` modules, each with ``register(app)``; they are found
by name, so adding a command is adding a module. Module imports must stay light (typer, rich):
``arctl --help`` imports no torch, verl, wandb, pandas, hydra.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import pkgutil
from typing import NoReturn

import typer

import arctl

app = typer.Typer(
    name="arctl",
    help="Experiment orchestration for AnytimeReasoner: specs -> jobs -> W&B runs -> the paper's figures.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"arctl {arctl.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """arctl: declarative specs -> submitit jobs (local or SLURM) -> W&B -> figures and tables."""


def _register_commands() -> None:
    package = importlib.import_module("arctl.cli")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"arctl.cli.{info.name}").register(app)


_register_commands()


def _whole_summaries() -> None:
    """Each command's one-line summary in ``arctl --help`` is its docstring's first paragraph as one line: in
    rich markup mode Typer keeps the docstring's source line breaks there, and the summaries broke mid-sentence
    at them, a word or two alone on a line (from a hunt). The command's own ``--help`` is left as it is."""
    import inspect

    for info in app.registered_commands:
        if info.short_help is None and info.callback is not None:
            text = inspect.cleandoc(info.help if isinstance(info.help, str) else info.callback.__doc__ or "")
            info.short_help = " ".join(text.split("\n\n")[0].split()) or None


_whole_summaries()


def _flags_without_metavar(typer_app: typer.Typer | None = None) -> None:
    """A flag (``--json``, ``--dry-run``, ``--wait/--no-wait``) shows no ``<bool>`` in the help: it takes no value,
    and ``--dry-run <bool>`` read as if it took one (from a hunt: `arctl run X --dry-run true` was refused as an
    override). Set on each command's declared options, so every way of building the commands has it."""
    import inspect

    typer_app = typer_app or app
    for info in typer_app.registered_commands:
        for param in inspect.signature(info.callback).parameters.values() if info.callback else ():
            default = param.default
            if (isinstance(default, typer.models.OptionInfo) and param.annotation in (bool, "bool")
                    and default.metavar is None):
                default.metavar = ""
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _flags_without_metavar(group.typer_instance)


_flags_without_metavar()


@functools.cache
def command():
    """The click command tree of ``app``, built once per process: Typer rebuilds it from every command's
    signature on each ``app()`` call (~30 ms here), which a process that runs arctl many times (the
    bad-input tests: ~2,000 calls) pays again and again. ``app()`` with pretty exceptions off does
    nothing else. A Ctrl-C that no command answered is said there (:func:`_saying_interrupts`)."""
    root = typer.main.get_command(app)
    root.invoke = _saying_interrupts(root.invoke)
    return root


INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


def interrupted(state: str | None = None) -> NoReturn:
    """Say on stderr that the command was interrupted, with what it left where it knows (``"<dir> holds the
    previous outputs"``), and exit 130. From a hunt: a Ctrl-C during a report, an export or a launch exited
    130 without a word, and the user could not tell what was left half done."""
    from arctl.cli.common import err_console, esc, printable

    err_console.print(f"[yellow]interrupted[/]{esc(printable(': ' + state)) if state else ''}", markup=True,
                      highlight=False)
    raise typer.Exit(INTERRUPTED_EXIT)


def interrupt_state(err: BaseException) -> str | None:
    """What a Ctrl-C (or a SIGTERM/SIGHUP the launcher turns into one) says of itself: the signal, and the notes
    the code it went through added (the launcher's rollback: what it could not undo)."""
    args = [str(a) for a in getattr(err, "args", ()) if str(a).startswith("signal ")]
    parts = [f"by {args[0].removeprefix('signal ')}"] if args else []
    return "; ".join(parts + [" ".join(str(n).split()) for n in getattr(err, "__notes__", ())]) or None


def interrupt_in(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C that ``err`` came from (``err`` itself, or one it was raised from or while handling, as its
    traceback shows it: a context suppressed with ``from None`` is not followed), else None. From a test under
    load: a Ctrl-C during matplotlib's first import of its Agg renderer surfaced as "ImportError: initialization
    failed", raised from the KeyboardInterrupt, and `arctl report` printed a 60-line traceback and exited 1."""
    seen: set[int] = set()
    at: BaseException | None = err
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return at
        seen.add(id(at))
        at = at.__cause__ if at.__cause__ is not None else None if at.__suppress_context__ else at.__context__
    return None


def _saying_interrupts(invoke):
    """``invoke`` (the root group's), with a Ctrl-C that reaches it said in one line (:func:`interrupted`):
    Typer turns one into exit 130 without a word. A command that knows what the interrupt left says so
    itself (``arctl report``, ``arctl export``) and exits 130 before this."""

    @functools.wraps(invoke)
    def run(ctx):
        try:
            return invoke(ctx)
        except KeyboardInterrupt as err:
            interrupted(interrupt_state(err))
        except Exception as err:  # an error a Ctrl-C caused (interrupt_in); a command's own exits are not one
            own = isinstance(err, typer.Exit) or type(err).__module__.split(".")[0] in ("click", "typer")
            stop = None if own else interrupt_in(err)
            if stop is None:
                raise
            interrupted(interrupt_state(stop))

    return run


def main() -> None:
    """Run the CLI; a usage mistake (unknown option, bad value, missing argument) is one
    ``error:`` line and exit code 2, like every other user mistake (never a usage box)."""
    import sys

    from arctl.cli.common import CLOSED_OUTPUT_EXIT, EXIT_USER_ERROR, err_console, error_line

    _escaping_stdout()
    usage, abort = _click_exceptions()
    repeated = repeated_option(command(), sys.argv[1:])
    if repeated is not None:
        err_console.print(error_line(repeated), markup=True, highlight=False)
        sys.exit(EXIT_USER_ERROR)
    try:
        with _plain_help_when_narrow():
            code = command()(standalone_mode=False)
    except usage as err:
        ctx = getattr(err, "ctx", None)
        if type(err).__name__ == "NoArgsIsHelpError":  # `arctl` alone: the help, once
            text = err.format_message()  # built with the error; in rich mode already printed, and ""
            if text:
                print(text)
            sys.exit(EXIT_USER_ERROR)
        path = ctx.command_path if ctx is not None else command_path(command(), sys.argv[1:])
        # click's parse errors of an option's value (`--state` without one) carry no context: the path from argv
        message = err.format_message().replace("Value error, ", "")  # typer's wording of a choice refused
        err_console.print(error_line(f"{message} (`{path} --help`)"), markup=True, highlight=False)
        sys.exit(EXIT_USER_ERROR)
    except abort:  # end of input at a question (click's Abort)
        sys.exit(INTERRUPTED_EXIT)
    except SystemExit:
        if _output_closed():
            sys.exit(CLOSED_OUTPUT_EXIT)
        raise
    sys.exit(code if isinstance(code, int) else 0)


RICH_HELP_MIN_COLUMNS = 80
"""Below this width the help is click's plain text: Typer's boxed help cuts option names there (``--array-para…`` at
60 columns, a split terminal pane) and wraps each description into a column of a dozen characters."""


@contextlib.contextmanager
def _plain_help_when_narrow():
    """Within: the plain help where the output is narrower than :data:`RICH_HELP_MIN_COLUMNS` (from a hunt of
    terminals). Typer reads ``typer.core.HAS_RICH`` as it formats a help (what ``TYPER_USE_RICH=0`` sets at its
    import); restored after, for the tests that run commands in one process."""
    import os

    import typer.core
    from rich.console import Console

    before = getattr(typer.core, "HAS_RICH", None)
    # the width Typer's help console takes (its TERMINAL_WIDTH, else the terminal's or COLUMNS, as rich reads them now)
    width = int(os.environ["TERMINAL_WIDTH"]) if os.environ.get("TERMINAL_WIDTH", "").isdigit() else Console().width
    narrow = before is not None and width < RICH_HELP_MIN_COLUMNS
    columns = os.environ.get("COLUMNS")
    if narrow:  # and click's formatter wraps at that width too (it reads COLUMNS, else stdout's terminal: a pipe's
        typer.core.HAS_RICH = False  # 80, where rich found the terminal on stderr; from a review)
        os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if narrow:
            typer.core.HAS_RICH = before
            if columns is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = columns


def _output_closed() -> bool:
    """Did the command end on a closed output (EPIPE)? click answers it by wrapping stdout and stderr in its
    ``PacifyFlushWrapper`` and exiting 1, and only there (by name: Typer vendors its own click, ``typer._click``)."""
    import sys

    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def _escaping_stdout() -> None:
    """Stdout writes what its encoding cannot hold as an escape (``\\u2014``), as stderr does: it was strict, and
    such text was a traceback (from a hunt: a spec's description with "—" in `arctl ls experiments` under an
    ascii stdout, a non-ASCII --workdir in `run --dry-run`, a path with a byte that is not UTF-8 under UTF-8).
    ``--json`` output stays JSON: ``json.dumps`` writes ASCII only (:func:`arctl.cli.common.print_json`)."""
    import sys

    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (OSError, ValueError):  # a stream that cannot change now (closed): left as it is
            pass


def repeated_option(root, args: list[str]) -> str | None:
    """The error line for an option that takes one value and is given more than once (``--seeds 0
    --seeds 1``: click keeps the last and drops the first without a word), else None. Walks ``args``
    as click does: down the command groups by name, each option's value skipped, ``--`` ends options;
    options declared ``multiple`` and flags may repeat. Usage mistakes of any other kind are left to
    click (None)."""
    before_dashes = args[: args.index("--")] if "--" in args else args
    if any(a in ("-h", "--help", "--version") for a in before_dashes):
        return None  # the help (or the version) wins, wherever it is, as in click
    cmd, path, i = root, [root.name or "arctl"], 0
    seen: dict[str, int] = {}
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-":
            sub = getattr(cmd, "commands", {}).get(token)
            if sub is not None:
                cmd, path, seen = sub, [*path, token], {}
            continue
        name, attached = (token.split("=", 1)[0], True) if token.startswith("--") and "=" in token else (token, False)
        if not token.startswith("--") and len(token) > 2:  # -oVALUE
            name, attached = token[:2], True
        option = next((p for p in cmd.params if name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))), None)
        if option is None or getattr(option, "param_type_name", "") != "option":
            continue  # unknown: click says so
        takes_value = not (option.is_flag or option.count)
        if takes_value and not attached:
            i += 1  # its value, whatever it looks like
        if takes_value and not option.multiple:
            seen[option.name] = seen.get(option.name, 0) + 1
            if seen[option.name] == 2:
                shown = "/".join(option.opts)
                return (f"{shown} is given more than once; it takes one value: give it once "
                        f"(`{' '.join(path)} --help`)")
    return None


def command_path(root, args: list[str]) -> str:
    """``arctl status``: the command ``args`` name (the command groups' names before ``--``, as click walks them)."""
    cmd, path = root, [root.name or "arctl"]
    for token in args:
        if token == "--":
            break
        sub = getattr(cmd, "commands", {}).get(token)
        if sub is not None:
            cmd, path = sub, [*path, token]
    return " ".join(path)


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Click's UsageError and Abort classes (typer vendors its own click; plain click may be there too)."""
    usage, abort = [], [typer.Abort]
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        usage.append(mod.UsageError)
        if hasattr(mod, "Abort"):
            abort.append(mod.Abort)
    return tuple(usage), tuple(abort)


if __name__ == "__main__":
    main()

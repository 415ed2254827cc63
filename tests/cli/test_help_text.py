"""The commands' help as a pipe or an 80-column terminal shows it, and the usage errors (from a hunt of arctl's
output in pipes): a documented default is never cut with "…", a flag shows no ``<bool>`` (it takes no value: `--dry-run
<bool>` read as if it did), a default is said once, run, sweep and resume say the same of --array-parallelism, and a
usage error is one line without typer's "Value error," and with the command's `--help`."""

from __future__ import annotations

import re

import pytest

BOX = re.compile(r"[│╭╮╰╯─┃]")


def _help(sandbox, monkeypatch, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    done = sandbox.run(*command, "--help")
    assert done.code == 0 and done.crash is None, done.err + (done.crash or "")
    return done.out


def _said(text: str) -> str:
    """The help's words, the box and the line breaks gone."""
    return " ".join(BOX.sub(" ", text).split())


@pytest.mark.parametrize("command", ["run", "sweep", "resume"])
def test_the_array_parallelism_default_is_whole_and_the_same_in_run_sweep_and_resume(sandbox, monkeypatch, command):
    text = _help(sandbox, monkeypatch, command)
    assert "…" not in text, text
    assert "at a time (default: cluster.array_parallelism; local: what the cores and memory allow)." in _said(text), text


@pytest.mark.parametrize("command", [("run",), ("sweep",), ("resume",), ("status",), ("export",), ("ls",),
                                     ("data", "prepare")])
def test_a_flag_shows_no_value(sandbox, monkeypatch, command):
    text = _help(sandbox, monkeypatch, *command)
    flags = [line for line in text.splitlines() if re.search(r"--(json|dry-run|force|wait|hub|unfinished)\b", line)
             and "│ --" in line]
    assert flags, text
    assert not [line for line in flags if "<bool>" in line], text


def test_the_datasets_default_is_said_once(sandbox, monkeypatch):
    said = _said(_help(sandbox, monkeypatch, "data", "prepare"))
    option = said[said.index("--datasets"):said.index("--source")]
    assert option.count("default") == 1 and "all" in option, option


def test_the_workspace_default_names_the_variable_and_the_folder(sandbox, monkeypatch):
    from arctl.config.files import DEFAULT_WORKDIR, HOME_ENV

    for command in ("run", "sweep", "resume", "cancel", "logs", "repair", "report", "export"):
        assert f"(default ${HOME_ENV} or ./{DEFAULT_WORKDIR})" in _said(_help(sandbox, monkeypatch, command)), command


def test_ls_names_its_kinds_whole(sandbox, monkeypatch):
    said = _said(_help(sandbox, monkeypatch, "ls"))
    assert "What to list: experiments, sweeps, figures, tables." in said, said


@pytest.mark.parametrize("args, says, command", [
    (["ls", "Experiments"], "'Experiments' is not one of 'experiments', 'sweeps', 'figures', 'tables'.", "ls"),
    (["status", "--state"], "Option '--state' requires an argument.", "status"),
    (["data", "prepare", "--datasets"], "Option '--datasets' requires an argument.", "data prepare"),
])
def test_usage_errors_are_one_line_with_the_command_s_help(sandbox, args, says, command):
    done = sandbox.check_refused(*args)
    assert says in done.err and "Value error" not in done.err, done.err
    # the hint names the command (after the program's name as click has it: under pytest, pytest's)
    assert done.err.rstrip().endswith(f" {command} --help`)"), done.err


def test_resume_takes_array_parallelism(sandbox):
    done = sandbox.check_refused("resume", "x", "--array-parallelism", "0", "--workdir", str(sandbox.ws))
    assert "--array-parallelism" in done.err, done.err


@pytest.mark.parametrize("columns", [60, 79])  # (at 50 click overflows one line by a character)
def test_a_narrow_terminal_gets_every_option_name_whole(sandbox, monkeypatch, columns):
    """From a hunt of terminals: below ~75 columns Typer's boxed help cut option names (`--array-para…` at 60, a
    split terminal pane) and wrapped each description into a dozen characters. Below 80 the help is click's plain
    text: every option of every command whole, nothing cut, and the boxes come back at 80 (the test above)."""
    from arctl.cli.main import command

    monkeypatch.setenv("COLUMNS", str(columns))
    group = command()
    for name in ("run", "sweep", "resume", "status", "logs", "report", "export"):
        done = sandbox.run(name, "--help")
        assert done.code == 0 and done.crash is None, done.err + (done.crash or "")
        assert "…" not in done.out and not BOX.search(done.out), done.out
        assert max(len(line) for line in done.out.splitlines()) <= columns, done.out
        words = set(re.findall(r"--[\w-]+", done.out))
        assert {o for p in group.commands[name].params for o in p.opts if o.startswith("--")} <= words, done.out
    assert BOX.search(_help(sandbox, monkeypatch, "run"))  # at 80 columns, in the same process: boxed again


def test_a_narrow_terminal_piping_the_help_gets_it_at_the_terminal_s_width():
    """From a review: in a 60-column terminal, `arctl run --help | head` took the plain help (rich found the width on
    stderr's terminal) but click wrapped it at 80 (stdout, a pipe, has none). Both now use the terminal's."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    main_fd, tty_fd = pty.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 60, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}
    try:
        done = subprocess.run([sys.executable, "-m", "arctl.cli.main", "run", "--help"], stdin=tty_fd,
                              stdout=subprocess.PIPE, stderr=tty_fd, env={**env, "TERM": "xterm"}, timeout=60)
    finally:
        os.close(tty_fd)
        os.close(main_fd)
    text = done.stdout.decode()
    assert done.returncode == 0 and "--array-parallelism" in text and not BOX.search(text), text
    assert max(len(line) for line in text.splitlines()) <= 60, text

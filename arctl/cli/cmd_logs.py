"""``arctl logs RUN [--follow]``: the job's stdout/stderr, with the reason of a failure on top."""

from __future__ import annotations

import codecs
import os
import re
import sys
import time
from pathlib import Path

import typer

from arctl.cli.common import (
    WORKDIR_HELP,
    console,
    err_console,
    esc,
    fail,
    is_terminal,
    nonempty_option,
    output_text,
    printable,
    section,
)
from arctl.cli.launching import launch_errors, styled
from arctl.config.terminal import can_redraw


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def logs(
        run: str = typer.Argument(..., metavar="RUN", help="Run id (or a unique prefix)."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run stops."),
        tail: int = typer.Option(200, "--tail", min=0, help="Lines of each file to show first (0: all)."),
        workdir: str | None = nonempty_option("--workdir", help=WORKDIR_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the run's state, job, error and log files (their "
                                     "last --tail lines) as one JSON document."),
    ) -> None:
        """Print the stdout and stderr of RUN's current job; a failed run's error comes first, in red."""
        if as_json and follow:
            fail("--json prints one document: leave out --follow")
        with launch_errors():
            from arctl.launch import states
            from arctl.launch.control import (
                earlier_job_dirs,
                error_summary,
                is_current_log,
                log_files,
                log_job,
                open_existing,
                select_one,
            )
            from arctl.launch.refresh import UNSAVED_NOTE, refresh

            workspace, reg = open_existing(workdir, reading=True)
            with reg:
                rec = refresh(reg, workspace, [select_one(reg, run)], reading=True)[0]
                if reg.unsaved:  # a full disk: what the refresh found is shown all the same
                    err_console.print(f"[yellow]note[/]: {esc(UNSAVED_NOTE.format(why=reg.unsaved))}")
                from arctl.launch.refresh import interrupted_launch

                # a dead launch's new run, never submitted: the state `arctl status` shows (the registry says
                # SUBMITTING, a wait that never ends); why is said where its log files would be
                gone = interrupted_launch(rec, workspace.run_dir(rec.run_id), time.time())
                shown = states.INTERRUPTED if gone else rec.state
                files = log_files(workspace, rec)
                earlier = earlier_job_dirs(workspace, rec)
                # an earlier attempt's files where the current job has none yet (resubmitted, still queued): said
                # so, never shown as its own (from a hunt: a queued rerun showed its previous job's "completed")
                own = not files or is_current_log(rec, files[0])
                if as_json:
                    _print_json_lines({
                        "run_id": rec.run_id, "state": shown, "recorded_state": rec.state, "job_id": rec.job_id,
                        "run_dir": str(workspace.run_dir(rec.run_id)),
                        "error": error_summary(workspace, rec) if rec.state in (
                            states.FAILED, states.CANCELLED, states.PREEMPTED) else None,
                        "logs": [{"path": str(path.resolve()), "job": rec.job_id if own else log_job(path),
                                  "earlier_attempt": not own,
                                  "lines": _LINES_AT.format(i) if not tail else _lines(path, tail)}
                                 for i, path in enumerate(files)],
                        "earlier_jobs": [str(folder) for folder in earlier],
                    }, files)
                    return
                console.print(f"{esc(rec.run_id)}  {styled(shown)}  {esc('job ' + (rec.job_id or '-') + f'  ({workspace.run_dir(rec.run_id)})')}")
                if rec.state in (states.FAILED, states.CANCELLED, states.PREEMPTED):
                    why = error_summary(workspace, rec)
                    if why:
                        err_console.print(f"[bold red]{rec.state.lower()}:[/] {esc(printable(why))}")  # Ray's colour codes
                if earlier:  # a resumed, requeued or rerun run's earlier jobs: their logs are kept there
                    console.print("[dim]earlier jobs of this run (most recent first):[/]")
                    for folder in earlier:
                        console.print(f"[dim]  {esc(folder)}[/]")
                jobs = workspace.run_dir(rec.run_id) / "job"
                if not files:  # a dead launch's new run has no job at all (from a hunt: "has not started" of it)
                    console.print(f"[dim]no log files: {esc(gone)}[/]" if gone else
                                  "[dim]no log files yet (the job has not started)[/]" if rec.state in states.ACTIVE
                                  else f"[dim]no log files (in {esc(jobs)})[/]")
                elif not own:
                    this = f"job {rec.job_id}" if rec.job_id else "its job"
                    none = (f"no log files: {gone}" if gone else f"no log files of {this} yet"
                            if rec.state in states.ACTIVE else f"no log files of {this} (in {jobs})")
                    console.print(f"[dim]{esc(none)}; below: the logs of earlier job {esc(log_job(files[0]))}, "
                                  f"not {esc(this)}'s[/]")
                out = _Output()
                for path in files:
                    out.header(path, own)
                    out.first(path, tail, follow)
                if not follow or gone:
                    out.end(rec)
                # a run its dead launch never submitted has no job to follow: the command ends, as status says
                # why (from a hunt: --follow waited for ever on its SUBMITTING row)
                while follow and not gone:
                    time.sleep(1.0)
                    # the run first, then its files: a job that has just started is its current job (its files
                    # not taken for an earlier attempt's), one that has just ended has written all it wrote
                    rec = refresh(reg, workspace, [reg.get(rec.run_id)], reading=True)[0]
                    gone = interrupted_launch(rec, workspace.run_dir(rec.run_id), time.time())
                    out.follow(log_files(workspace, rec), rec)
                    if gone or rec.state not in states.ACTIVE:  # and a last line without \n
                        out.end(rec)
                    if gone:  # killed now
                        console.print(f"-- {esc(rec.run_id)} {styled(states.INTERRUPTED)}: {esc(gone)}")
                        break
                    if rec.state not in states.ACTIVE:
                        console.print(f"-- {esc(rec.run_id)} {styled(rec.state)}")
                        if rec.state == states.FAILED:
                            err_console.print(f"[bold red]failed:[/] {esc(printable(error_summary(workspace, rec) or 'see above'))}")
                        break


# a log is read from its end, this much first and twice as much while its last --tail lines are not all in what was
# read (a multi-GB verl/Ray log was read and decoded whole, 3.5 times its size in memory, to show 200 lines: from a
# hunt); --tail 0 reads it in pieces of _CHUNK
_BLOCK = 1 << 16
_CHUNK = 1 << 20
# where a read from the middle of a log may begin: after a line end of the whole file's text, a \n, or after a \r
# that is not a line's trailing one, where what follows is the end of a line of progress bar frames, all a terminal
# shows of it (:func:`_shown`): a bar's line of 10,000 frames is not read whole to show its last. An ASCII byte is
# never part of another character, even among invalid bytes
_CUT = re.compile(rb"\n|\r(?=[^\r\n])")


def _shown(line: str) -> str:
    """What a terminal shows of one line of a log: the text after its last \\r but a trailing one (a progress bar's
    frames, as tqdm writes them to a file, are one line: ``\\rLoading 0%|...\\rLoading 100%|...``; a \\r\\n ends a
    line as \\n does)."""
    body = line.rstrip("\r")
    return body[body.rfind("\r") + 1:]


def _frame(pending: str) -> str:
    """The newest whole frame of a followed file's unended last line, to draw where stdout is a terminal
    (:func:`~arctl.cli.common.is_terminal`) that can redraw a line (not ``TERM=dumb``: from a review), else "": a
    pipe gets the line once it ends, as it gets every line."""
    end = pending.rfind("\r")
    return _shown(pending[:end]) if end > 0 and is_terminal(console) and can_redraw() else ""


def _split_lines(text: str) -> list[str]:
    """The lines of ``text``, cut at \\n only, as ``tail`` counts them, each as a terminal shows it (:func:`_shown`).
    ``str.splitlines`` cut at every \\r too (and \\v, \\f, \\x1c-\\x1e, \\x85, \\u2028, \\u2029): a bar's frames filled
    the last 200 lines, and a log's real last lines were not shown (from a hunt)."""
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    return [_shown(line) for line in lines]


class _Output:
    """What `arctl logs` writes of the log files: their text made safe for the terminal (:func:`output_text`), each
    file's under its header, again where another file's came between (from a hunt: --follow wrote one file's new
    lines under the other's header), and a followed file's last line only once it has ended. A followed file is
    followed by bytes read, not by the length of decoded text (a \\r\\n or an invalid byte made the offset wrong,
    and what came next was repeated or lost: from a review), a character split between two reads decoded whole, and
    by its inode: one truncated (``: > log``, logrotate's copytruncate) or replaced (another file under its name) is
    shown again from its start, below a line saying so, as ``tail -F`` does (from a hunt: nothing was shown until
    the file grew past the old offset, then the rest of a line)."""

    def __init__(self) -> None:
        self.offsets: dict[Path, int] = {}
        self.inodes: dict[Path, int] = {}
        self.decoders: dict[Path, codecs.IncrementalDecoder] = {}
        self.pending: dict[Path, str] = {}  # a followed file's text after its last line end
        self.current: Path | None = None  # the file whose header was written last
        self.last = "\n"  # the last character written
        self.coloured = False  # a job's colour was written: reset before arctl's own lines

    def decoder(self, path: Path) -> codecs.IncrementalDecoder:
        return self.decoders.setdefault(path, _decoder())

    def header(self, path: Path, own: bool) -> None:
        self._close()
        from arctl.launch.control import log_job

        label = "" if own else f"job {log_job(path)} (an earlier attempt's): "
        section(esc(f"{label}{path.name}  ({path.resolve()})"))
        self.current, self.last = path, "\n"

    def first(self, path: Path, tail: int, follow: bool) -> None:
        """Write the last ``tail`` lines of ``path`` (0: all), read from its end; ``follow``: its last line only
        once it has ended (from a hunt: its end came later, under the other file's header), and what it gains
        later from where this read stopped."""
        with path.open("rb") as fh:
            st = os.fstat(fh.fileno())
            if tail:
                shown, pending, self.decoders[path] = _tail(fh, st.st_size, tail, follow=follow, final=False)
                self.write("\n".join(shown) + ("\n" if shown else ""))
            else:
                pending = _stream(fh, st.st_size, self.decoder(path), lambda lines: self.write("\n".join(lines) + "\n"),
                                  follow=follow, final=False)
        if follow:
            self._hold(path, pending)
        self.offsets[path], self.inodes[path] = st.st_size, st.st_ino

    def _hold(self, path: Path, pending: str) -> None:
        """Keep ``path``'s unended last line until it ends (its header written last); where it holds a progress bar's
        frames and stdout is a terminal, its newest whole frame written now, then \\r: the bar moves as the job draws
        it, and the line that ends it is written over it, as :func:`_shown` gives it. Only its newest frame on is
        kept: a bar of 10,000 steps is one line."""
        if frame := _frame(pending):
            self.write(frame + "\r")
        last = pending.rstrip("\r").rfind("\r")
        self.pending[path] = pending[last:] if last >= 0 else pending

    def write(self, text: str) -> None:
        if text:
            safe = output_text(text)
            self.coloured = self.coloured or "\x1b[" in safe
            sys.stdout.write(safe)
            self.last = safe[-1]

    def follow(self, files: list[Path], rec) -> None:
        """Write what ``files`` gained since the last read, up to the last line end of each."""
        from arctl.launch.control import is_current_log

        for path in files:
            try:
                fh = path.open("rb")
            except FileNotFoundError:  # renamed away (logrotate), its successor not made yet: the next look has it
                continue
            with fh:
                st = os.fstat(fh.fileno())
                offset = self.offsets.get(path, 0)
                if path in self.inodes and (st.st_ino != self.inodes[path] or st.st_size < offset):
                    self._restart(path, rec, "replaced" if st.st_ino != self.inodes[path] else "truncated")
                    offset = 0
                self.inodes[path] = st.st_ino
                fh.seek(offset)
                chunk = fh.read()
            if not chunk:
                continue
            self.offsets[path] = offset + len(chunk)
            text, pending = _split_tail(self.pending.get(path, "") + self.decoder(path).decode(chunk))
            if (text or _frame(pending)) and path != self.current:
                self.header(path, is_current_log(rec, path))
            self.write("".join(line + "\n" for line in _split_lines(text)))
            self._hold(path, pending)
        sys.stdout.flush()

    def _restart(self, path: Path, rec, how: str) -> None:
        """``path`` was truncated or replaced: its unended last line written, a line saying so, and the file read
        again from its start with a new decoder."""
        from arctl.launch.control import is_current_log

        if path != self.current:
            self.header(path, is_current_log(rec, path))
        if held := self.pending.pop(path, ""):  # its unended last line: what it held is not coming back
            self.write(_shown(held) + "\n")
        self._close()
        console.print(f"[dim]-- log {how}; from its start --[/]")
        self.decoders[path] = _decoder()

    def end(self, rec) -> None:
        """Write the followed files' last lines that never ended (a newline after each)."""
        from arctl.launch.control import is_current_log

        for path, text in self.pending.items():
            if text:
                if path != self.current:
                    self.header(path, is_current_log(rec, path))
                self.write(_shown(text) + "\n")
        self.pending.clear()
        self._close()

    def _close(self) -> None:
        if self.last == "\r":  # a line a carriage return ended stays above what comes next
            sys.stdout.write("\n")
            self.last = "\n"
        if self.coloured:
            sys.stdout.write("\x1b[0m")
            self.coloured = False
        sys.stdout.flush()


_LINES_AT = "\x00lines of log {}\x00"  # where --json --tail 0 writes a log's lines as it reads them


def _print_json_lines(doc: dict, files: list[Path]) -> None:
    """:func:`arctl.cli.common.print_json` of ``doc``, each ``lines`` that is :data:`_LINES_AT` of a log (--tail 0:
    every line) written as that log is read, a piece at a time (:func:`_stream`): the document is never held whole
    (from a hunt: a multi-GB verl/Ray log's lines were held as a list, then as one JSON text, ~3x the log in memory)."""
    from arctl.config.json_text import json_text

    text = json_text(doc, indent=2)
    for i, path in enumerate(files):
        mark = json_text(_LINES_AT.format(i))
        if mark in text:
            head, text = text.split(mark, 1)
            sys.stdout.write(head)
            _write_json_lines(path)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _write_json_lines(path: Path) -> None:
    """Every line of ``path`` (as --tail 0 gives them) as a JSON array on stdout, a piece of the file at a time."""
    import json

    said = 0

    # a piece's lines (~1 MB) in one write; a str is JSON as json_text writes it (ASCII, no number to make finite),
    # by json.dumps' default encoder (json_text's arguments build an encoder per call: 2x slower on a 200 MB log)
    def emit(lines: list[str]) -> None:
        nonlocal said
        if lines:
            sys.stdout.write(("\n" if not said else ",\n") + ",\n".join("        " + json.dumps(line) for line in lines))
            said += len(lines)

    sys.stdout.write("[")
    with path.open("rb") as fh:
        _stream(fh, os.fstat(fh.fileno()).st_size, _decoder(), emit, follow=False, final=True)
    sys.stdout.write("\n      ]" if said else "]")


def _decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def _lines(path: Path, tail: int) -> list[str]:
    """The last ``tail`` lines of ``path`` (0: all), as ``--json`` gives them: a character cut at its end replaced."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if tail:
            return _tail(fh, size, tail, follow=False, final=True)[0]
        lines: list[str] = []
        _stream(fh, size, _decoder(), lines.extend, follow=False, final=True)
        return lines


def _tail(fh, size: int, tail: int, *, follow: bool, final: bool) -> tuple[list[str], str, codecs.IncrementalDecoder]:
    """(the last ``tail`` lines of the text of ``fh``'s first ``size`` bytes, the text after its last line end where
    ``follow`` holds it back (:func:`_split_tail`), the decoder that read them), those :func:`_split_lines` gives of
    the whole text, reading and decoding only the file's end: blocks from the end back (:data:`_BLOCK`, doubled) until
    the text after the first line end in them (:data:`_CUT`) has ``tail`` lines, or the file's start is reached."""
    data, low, window = b"", size, _BLOCK
    while True:
        start = max(0, size - window)
        fh.seek(start)
        data, low = fh.read(low - start) + data, start
        cut = _CUT.search(data) if start else None
        if not start or cut:
            dec = _decoder()
            text = dec.decode(data[cut.end():] if cut else data, final)
            pending = ""
            if follow:
                text, pending = _split_tail(text)
            lines = _split_lines(text)
            if len(lines) >= tail or not start:
                return lines[-tail:], pending, dec
        window *= 2


def _stream(fh, size: int, dec: codecs.IncrementalDecoder, emit, *, follow: bool, final: bool) -> str:
    """Pass every line of the text of ``fh``'s first ``size`` bytes to ``emit``, a :data:`_CHUNK` read at a time,
    each call's lines the next of those :func:`_split_lines` gives of the whole text; returns the text after its last line
    end where ``follow`` holds it back (:func:`_split_tail`). ``final``: a character cut at the end replaced, else
    kept in ``dec`` for the next read."""
    rest, left = "", size
    while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
        left -= len(chunk)
        text = rest + dec.decode(chunk)
        end = text.rfind("\n") + 1  # up to the last line end
        text, rest = text[:end], text[end:]
        if (frames := rest.rstrip("\r").rfind("\r")) > 0:  # an unended line of frames: from its newest on (_shown)
            rest = rest[frames:]
        if text:
            emit(_split_lines(text))
    if final:
        rest += dec.decode(b"", final=True)
    text, pending = _split_tail(rest) if follow else (rest, "")
    if lines := _split_lines(text):
        emit(lines)
    return pending


def _split_tail(text: str) -> tuple[str, str]:
    """(``text`` up to its last line end, a \\n, and what follows it)."""
    end = text.rfind("\n") + 1
    return text[:end], text[end:]

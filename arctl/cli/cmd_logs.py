"""``arctl logs RUN [--follow]``: the job's stdout/stderr, with the reason of a failure on top."""

from __future__ import annotations

import codecs
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
    nonempty_option,
    output_text,
    print_json,
    printable,
    section,
)
from arctl.cli.launching import launch_errors, styled


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
                    print_json({
                        "run_id": rec.run_id, "state": shown, "recorded_state": rec.state, "job_id": rec.job_id,
                        "run_dir": str(workspace.run_dir(rec.run_id)),
                        "error": error_summary(workspace, rec) if rec.state in (
                            states.FAILED, states.CANCELLED, states.PREEMPTED) else None,
                        "logs": [{"path": str(path.resolve()), "job": rec.job_id if own else log_job(path),
                                  "earlier_attempt": not own,
                                  "lines": _last(path.read_text(encoding="utf-8", errors="replace"), tail)}
                                 for path in files],
                        "earlier_jobs": [str(folder) for folder in earlier],
                    })
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
                # followed by bytes read, not by the length of decoded text: a \r\n or an invalid byte made the
                # offset wrong, and what came next was repeated or lost (from a review); a character split
                # between two reads is decoded whole
                for path in files:
                    data = path.read_bytes()
                    out.header(path, own)
                    # one decoder per file from the first read on: a character cut at its end is whole later
                    text = out.decoder(path).decode(data)
                    if follow:  # a line not ended yet is held back until it is (from a hunt: its end came later,
                        text, out.pending[path] = _split_tail(text)  # under the other file's header)
                    shown = _last(text, tail)
                    out.write("\n".join(shown) + ("\n" if shown else ""))
                    out.offsets[path] = len(data)
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


class _Output:
    """What `arctl logs` writes of the log files: their text made safe for the terminal (:func:`output_text`), each
    file's under its header, again where another file's came between (from a hunt: --follow wrote one file's new
    lines under the other's header), and a followed file's last line only once it has ended."""

    def __init__(self) -> None:
        self.offsets: dict[Path, int] = {}
        self.decoders: dict[Path, codecs.IncrementalDecoder] = {}
        self.pending: dict[Path, str] = {}  # a followed file's text after its last line end
        self.current: Path | None = None  # the file whose header was written last
        self.last = "\n"  # the last character written
        self.coloured = False  # a job's colour was written: reset before arctl's own lines

    def decoder(self, path: Path) -> codecs.IncrementalDecoder:
        return self.decoders.setdefault(path, codecs.getincrementaldecoder("utf-8")(errors="replace"))

    def header(self, path: Path, own: bool) -> None:
        self._close()
        from arctl.launch.control import log_job

        label = "" if own else f"job {log_job(path)} (an earlier attempt's): "
        section(esc(f"{label}{path.name}  ({path.resolve()})"))
        self.current, self.last = path, "\n"

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
            with open(path, "rb") as fh:
                fh.seek(self.offsets.get(path, 0))
                chunk = fh.read()
            if not chunk:
                continue
            self.offsets[path] = self.offsets.get(path, 0) + len(chunk)
            text, self.pending[path] = _split_tail(self.pending.get(path, "") + self.decoder(path).decode(chunk))
            if text:
                if path != self.current:
                    self.header(path, is_current_log(rec, path))
                self.write(text)
        sys.stdout.flush()

    def end(self, rec) -> None:
        """Write the followed files' last lines that never ended (a newline after each)."""
        from arctl.launch.control import is_current_log

        for path, text in self.pending.items():
            if text:
                if path != self.current:
                    self.header(path, is_current_log(rec, path))
                self.write(text + "\n")
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


def _split_tail(text: str) -> tuple[str, str]:
    """(``text`` up to its last line end, \\n or \\r, and what follows it)."""
    end = max(text.rfind("\n"), text.rfind("\r")) + 1
    return text[:end], text[end:]


def _last(text: str, tail: int) -> list[str]:
    """The last ``tail`` lines of ``text`` (0: all)."""
    lines = text.splitlines()
    return lines[-tail:] if tail else lines

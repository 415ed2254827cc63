"""``arctl logs RUN [--follow]``: the job's stdout/stderr, with the reason of a failure on top."""

from __future__ import annotations

import codecs
import sys
import time
from pathlib import Path

import typer

from arctl.cli.common import console, err_console, esc, fail, nonempty_option, print_json, printable, section
from arctl.cli.launching import launch_errors, styled


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def logs(
        run: str = typer.Argument(..., metavar="RUN", help="Run id (or a unique prefix)."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run stops."),
        tail: int = typer.Option(200, "--tail", min=0, help="Lines of each file to show first (0: all)."),
        workdir: str | None = nonempty_option("--workdir", help="Workspace (default $ARCTL_HOME or ./arctl-runs)."),
        as_json: bool = typer.Option(False, "--json", help="Print the run's state, job, error and log files (their "
                                     "last --tail lines) as one JSON document."),
    ) -> None:
        """Print the stdout and stderr of RUN's current job; a failed run's error comes first, in red."""
        if as_json and follow:
            fail("--json prints one document: leave out --follow")
        with launch_errors():
            from arctl.launch import states
            from arctl.launch.control import error_summary, log_files, open_existing, select_one
            from arctl.launch.refresh import refresh

            workspace, reg = open_existing(workdir, reading=True)
            with reg:
                rec = refresh(reg, workspace, [select_one(reg, run)])[0]
                from arctl.launch.refresh import interrupted_launch

                # a dead launch's new run, never submitted: the state `arctl status` shows (the registry says
                # SUBMITTING, a wait that never ends); why is said where its log files would be
                gone = interrupted_launch(rec, workspace.run_dir(rec.run_id), time.time())
                shown = states.INTERRUPTED if gone else rec.state
                if as_json:
                    files = log_files(workspace, rec)
                    print_json({
                        "run_id": rec.run_id, "state": shown, "recorded_state": rec.state, "job_id": rec.job_id,
                        "run_dir": str(workspace.run_dir(rec.run_id)),
                        "error": error_summary(workspace, rec) if rec.state in (
                            states.FAILED, states.CANCELLED, states.PREEMPTED) else None,
                        "logs": [{"path": str(path.resolve()), "lines": _last(path.read_text(encoding="utf-8", errors="replace"), tail)}
                                 for path in files],
                    })
                    return
                console.print(f"{esc(rec.run_id)}  {styled(shown)}  {esc('job ' + (rec.job_id or '-') + f'  ({workspace.run_dir(rec.run_id)})')}")
                if rec.state in (states.FAILED, states.CANCELLED, states.PREEMPTED):
                    why = error_summary(workspace, rec)
                    if why:
                        err_console.print(f"[bold red]{rec.state.lower()}:[/] {esc(printable(why))}")  # Ray's colour codes
                files = log_files(workspace, rec)
                if not files:  # a dead launch's new run has no job at all (from a hunt: "has not started" of it)
                    console.print(f"[dim]no log files: {esc(gone)}[/]" if gone else
                                  "[dim]no log files yet (the job has not started)[/]" if rec.state in states.ACTIVE
                                  else f"[dim]no log files (in {esc(workspace.run_dir(rec.run_id) / 'job')})[/]")
                # followed by bytes read, not by the length of decoded text: a \r\n or an invalid byte made the
                # offset wrong, and what came next was repeated or lost (from a review); a character split
                # between two reads is decoded whole
                offsets: dict[Path, int] = {}
                decoders: dict[Path, codecs.IncrementalDecoder] = {}
                for path in files:
                    data = path.read_bytes()
                    section(esc(f"{path.name}  ({path.resolve()})"))
                    # one decoder per file from the first read on: a character cut at its end is whole later
                    decoder = decoders.setdefault(path, codecs.getincrementaldecoder("utf-8")(errors="replace"))
                    shown = _last(decoder.decode(data), tail)
                    sys.stdout.write("\n".join(shown) + ("\n" if shown else ""))
                    offsets[path] = len(data)
                sys.stdout.flush()
                # a run its dead launch never submitted has no job to follow: the command ends, as status says
                # why (from a hunt: --follow waited for ever on its SUBMITTING row)
                while follow and not gone:
                    time.sleep(1.0)
                    for path in log_files(workspace, rec):
                        with open(path, "rb") as fh:
                            fh.seek(offsets.get(path, 0))
                            chunk = fh.read()
                        if chunk:
                            decoder = decoders.setdefault(path, codecs.getincrementaldecoder("utf-8")(errors="replace"))
                            sys.stdout.write(decoder.decode(chunk))
                            sys.stdout.flush()
                            offsets[path] = offsets.get(path, 0) + len(chunk)
                    rec = refresh(reg, workspace, [reg.get(rec.run_id)])[0]
                    if gone := interrupted_launch(rec, workspace.run_dir(rec.run_id), time.time()):  # killed now
                        console.print(f"-- {esc(rec.run_id)} {styled(states.INTERRUPTED)}: {esc(gone)}")
                        break
                    if rec.state not in states.ACTIVE:
                        console.print(f"-- {esc(rec.run_id)} {styled(rec.state)}")
                        if rec.state == states.FAILED:
                            err_console.print(f"[bold red]failed:[/] {esc(printable(error_summary(workspace, rec) or 'see above'))}")
                        break


def _last(text: str, tail: int) -> list[str]:
    """The last ``tail`` lines of ``text`` (0: all)."""
    lines = text.splitlines()
    return lines[-tail:] if tail else lines

"""Stops held while a block that must not be cut short runs: Ctrl-C, SIGTERM and SIGHUP wait, then act as they
would have. One home for what the launch (starting sbatch: :mod:`arctl.launch.launcher`), the cancel (stopping a
job's processes to kill them: :mod:`arctl.launch.control`) and a report (putting its files in place:
:mod:`arctl.report.style`) each need."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager

HELD_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")  # what :func:`signals_held` holds: a user's or a system's stop


@contextmanager
def signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait while the block runs, and act as they would have when it ends (each once,
    raised again in this thread), also where their action is the default one (SIGTERM and SIGHUP end the process
    then): a block that must not be cut short, such as stopping processes in order to kill them. Their handlers are
    swapped, not the thread's signal mask (the kernel gives a process's signal to any thread that does not block
    it, and Python runs its handler in the main thread). Main thread only (where handlers can be set); a signal
    whose handler is not Python's is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    before = {}
    for name in HELD_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not None:
            before[sig] = signal.signal(sig, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(came):
            signal.raise_signal(sig)


@contextmanager
def stops_ignored():
    """Ignore SIGINT, SIGHUP and SIGTERM while the block runs (the main thread only), then put their handlers
    back: a stop that is already being handled is not cut short by the next one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def add_note(err: BaseException, note: str) -> None:
    """``err.add_note(note)`` (Python 3.11+: shown under its traceback, and in the CLI's "interrupted" line); on
    Python 3.10, which arctl supports and which has no notes, the note goes to stderr before ``err`` is raised
    (``add_note`` there raised AttributeError, which masked a Ctrl-C and the rollback's word)."""
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:
        print(f"note: {note}", file=sys.stderr, flush=True)


def run_to_its_answer(command: list[str], wait_s: float, cwd=None, env=None,
                      into: list[subprocess.CompletedProcess] | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)`` for a SLURM client whose request
    may reach the controller before its answer comes back (sbatch, scancel): in a session of its own, so that a terminal's Ctrl-C, sent to
    the whole foreground group, does not kill it midway; a stop (Ctrl-C, SIGTERM, SIGHUP) while it runs waits for its
    answer, at most ``wait_s`` seconds with further stops ignored, then is raised with ``answered`` set on it: the
    CompletedProcess, or None where the program did not answer in time (it is killed then: whether its request got
    through is not known). ``subprocess.run`` itself kills its child on an interrupt, with the answer. The answer is
    also appended to ``into`` as soon as it is read: a stop that comes after that, before the caller has acted on the
    returned answer, leaves it there for the caller's own handler to read."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:

        def done(proc: subprocess.Popen) -> subprocess.CompletedProcess:
            said = []
            for file in (out, err):
                file.seek(0)
                said.append(file.read().decode(errors="replace"))
            return subprocess.CompletedProcess(command, proc.returncode, *said)

        proc = None
        try:
            with signals_held():  # a stop as it starts waits until the child is ours to wait for (then acts, here)
                proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env,
                                        start_new_session=True)
            proc.wait()
            answer = done(proc)
            if into is not None:
                into.append(answer)
            return answer
        except BaseException as stop:
            if proc is None:
                raise
            with stops_ignored():
                try:
                    proc.wait(timeout=wait_s)
                    stop.answered = done(proc)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    stop.answered = None
            raise

"""Stops held while a block that must not be cut short runs: Ctrl-C, SIGTERM and SIGHUP wait, then act as they
would have. One home for what the launch (starting sbatch: :mod:`arctl.launch.launcher`), the cancel (stopping a
job's processes to kill them: :mod:`arctl.launch.control`) and a report (putting its files in place:
:mod:`arctl.report.style`) each need."""

from __future__ import annotations

import signal
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
    import threading

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

"""The authors' grader's sympy stage with their time bound: a child process, killed past 10 s.

``sympy.simplify`` can run for minutes on an answer a model writes, and only a separate process can
be stopped mid-call (no signal reaches a Ray worker's threads). The authors run the stage in a
``multiprocessing.Pool`` and count a call that takes more than 10 s wrong; :class:`SympyWorker` does
the same with one plain child process (``python -m arctl.backends.verl.sympy_worker``): no re-import of
the caller's main module (a Ray worker's), no fork of a threaded process. Past the timeout the child
is killed and the next call starts a new one. Requests are serialised (the agent loop scores one leaf
at a time).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
from typing import Any

from arctl.algo.deepscaler_grader import SYMPY_TIMEOUT_S, sympy_equal


class SympyWorker:
    """:func:`arctl.algo.deepscaler_grader.sympy_equal` in a child process, bounded in time. Thread-safe."""

    def __init__(self, timeout_s: float = SYMPY_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.started = 0  # children started so far (a timeout replaces one)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.started += 1
        return subprocess.Popen([sys.executable, "-m", "arctl.backends.verl.sympy_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def __call__(self, given: str, gold: str) -> bool:
        """Whether ``given`` equals ``gold`` under the sympy stage; False past :attr:`timeout_s`."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            try:
                proc.stdin.write(json.dumps([given, gold]) + "\n")
                proc.stdin.flush()
                line = _readline(proc, time.monotonic() + self.timeout_s)
            except (OSError, ValueError):
                line = None
            if line is None:  # timed out or died: the authors count it wrong
                self._stop()
                return False
            return line.strip() == "1"

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._stop()


def _readline(proc: subprocess.Popen, deadline: float) -> str | None:
    """The child's next line, or None at ``deadline`` or when it died."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(max(deadline - time.monotonic(), 0)):
                return proc.stdout.readline() or None
    return None


_WORKER: SympyWorker | None = None
_WORKER_LOCK = threading.Lock()


def bounded_sympy_equal(given: str, gold: str) -> bool:
    """The process-wide worker's verdict (started on first use)."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = SympyWorker()
    return _WORKER(given, gold)


def _serve(stdin: Any = sys.stdin, stdout: Any = sys.stdout) -> None:
    """The child's loop: one JSON ``[given, gold]`` per line in, ``1`` or ``0`` per line out."""
    for line in stdin:
        try:
            given, gold = json.loads(line)
            ok = sympy_equal(given, gold)
        except Exception:
            ok = False
        stdout.write("1\n" if ok else "0\n")
        stdout.flush()


if __name__ == "__main__":
    _serve()

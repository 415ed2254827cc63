"""The authors' grader's sympy stage with their time bound: a child process, killed past 10 s.

``sympy.simplify`` can run for minutes on an answer a model writes, and only a separate process can
be stopped mid-call (no signal reaches a Ray worker's threads). The authors run the stage in a
``multiprocessing.Pool`` and count a call that takes more than 10 s wrong; :class:`SympyWorker` does
the same with one plain child process (``python -m arctl.backends.verl.sympy_worker``): no re-import of
the caller's main module (a Ray worker's), no fork of a threaded process. A child imports sympy and
pylatexenc and says ``ready`` before its first request, so the 10 s are the stage's own, not the
child's start. Past the timeout the child is killed and the next call starts a new one; a child
that dies on a request is replaced and the request sent again once. A child that cannot start at all
(:data:`START_TIMEOUT_S`, or no process can be created), or that dies twice on one request, is
:class:`arctl.algo.deepscaler_grader.StageUnavailable`: the step fails with that line, no answer is
scored wrong for it. Requests are serialised (the agent loop grades on one thread of its own,
:func:`arctl.backends.verl.agent_loop.grading_executor`: a stage that runs into the 10 s delays that
worker's later grades, not its generation).
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

from arctl.algo.deepscaler_grader import SYMPY_TIMEOUT_S, StageUnavailable, sympy_equal

START_TIMEOUT_S = 120.0  # a child's start (Python, sympy, pylatexenc) on a loaded node
READY = "ready"


class SympyWorker:
    """:func:`arctl.algo.deepscaler_grader.sympy_equal` in a child process, bounded in time. Thread-safe."""

    def __init__(self, timeout_s: float = SYMPY_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.started = 0  # children started so far (a timeout replaces one)
        # a child that could not start: every later grade says so at once (from a review: each tried again, up
        # to START_TIMEOUT_S apiece, on the one grading thread, so a broken node failed its step slowly)
        self.unavailable: StageUnavailable | None = None
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.started += 1
        return subprocess.Popen([sys.executable, "-m", "arctl.backends.verl.sympy_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def _ready_child(self) -> subprocess.Popen:
        """The running child, or a new one once it said it is ready (StageUnavailable if it never does)."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self.unavailable is not None:  # a new exception each time: one raised again keeps every traceback
            raise StageUnavailable(str(self.unavailable))
        self._stop()
        where = f"({sys.executable} -m arctl.backends.verl.sympy_worker)"
        try:
            self._proc = self._start()
        except OSError as err:  # no fork (process limit, memory), no interpreter
            self.unavailable = StageUnavailable(f"the authors' grader's sympy stage could not start a worker "
                                                f"process {where}: {err}")
            raise self.unavailable from err
        line = _readline(self._proc, time.monotonic() + START_TIMEOUT_S)
        if line is None or line.strip() != READY:
            said = f": {line.strip()}" if line else " (no answer; its stderr is not kept: it would fill a pipe)"
            self._stop()
            self.unavailable = StageUnavailable(f"the authors' grader's sympy stage could not start a worker "
                                                f"process {where}{said}")
            raise self.unavailable
        return self._proc

    def __call__(self, given: str, gold: str) -> bool:
        """Whether ``given`` equals ``gold`` under the sympy stage; False past :attr:`timeout_s` (the child
        is then replaced). A child that dies on the request is replaced and asked again once; dying
        twice is StageUnavailable, not a wrong answer."""
        request = json.dumps([given, gold]) + "\n"
        with self._lock:
            for _ in range(2):
                proc = self._ready_child()
                deadline = time.monotonic() + self.timeout_s
                try:
                    proc.stdin.write(request)
                    proc.stdin.flush()
                    line = _readline(proc, deadline)
                except (OSError, ValueError):  # it died before reading the request
                    line = None
                if line is not None:
                    return line.strip() == "1"
                died = proc.poll() is not None or time.monotonic() < deadline
                self._stop()
                if not died:  # the stage ran out of time: the authors count it wrong
                    return False
            raise StageUnavailable(f"the authors' grader's sympy worker process died twice on one request "
                                   f"({json.dumps([given, gold])[:200]})")

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
    """The child's loop: ``ready`` once sympy and pylatexenc are imported, then one JSON ``[given, gold]``
    per line in, ``1`` or ``0`` per line out."""
    try:
        import pylatexenc.latex2text  # noqa: F401
        import sympy.parsing.sympy_parser  # noqa: F401
    except ImportError as err:  # the parent raises StageUnavailable with this line
        stdout.write(f"cannot import {err.name}: pip install sympy pylatexenc\n")
        stdout.flush()
        return
    stdout.write(READY + "\n")
    stdout.flush()
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

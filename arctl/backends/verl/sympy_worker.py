"""The authors' grader's sympy stage with their time bound: a child process, killed past 10 s (and, for
``verl.grader=math-verify``, math-verify's comparison the same way: :func:`bounded_math_verify`).

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
SYMPY, MATH_VERIFY = "sympy", "math-verify"  # what a child computes: the deepscaler grader's stage 2, or math-verify
WHAT = {SYMPY: "the authors' grader's sympy stage", MATH_VERIFY: "the math-verify grader"}


_MV_THREAD = None


def _math_verify(given: str, gold: str) -> bool:
    """``verl.grader=math-verify``'s comparison as the agent loop's grading thread made it (a thread of the
    child: math-verify's no-signal mode, with its bounds on the input, so a resumed run grades as it did),
    now bounded in time by the parent, which kills the child past :data:`SYMPY_TIMEOUT_S` (from an audit:
    on that thread it had no time bound at all, and ``\\sin(x)^{9}\\cos(y)^{9}(x+y)^{99}`` against ``1``
    ran past 40 s, stalling every later grade of the worker)."""
    from concurrent.futures import ThreadPoolExecutor

    from arctl.algo.verify import answers_equivalent

    global _MV_THREAD
    if _MV_THREAD is None:
        _MV_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arctl-math-verify")
    return _MV_THREAD.submit(answers_equivalent, given, gold).result()


STAGES = {SYMPY: sympy_equal, MATH_VERIFY: _math_verify}


class SympyWorker:
    """:func:`arctl.algo.deepscaler_grader.sympy_equal` in a child process, bounded in time. Thread-safe."""

    def __init__(self, timeout_s: float = SYMPY_TIMEOUT_S, stage: str = SYMPY) -> None:
        self.timeout_s = timeout_s
        self.stage = stage  # one of STAGES: what the child computes
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
        return subprocess.Popen([sys.executable, "-m", "arctl.backends.verl.sympy_worker", self.stage], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def _ready_child(self) -> subprocess.Popen:
        """The running child, or a new one once it said it is ready (StageUnavailable if it never does)."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self.unavailable is not None:  # a new exception each time: one raised again keeps every traceback
            raise StageUnavailable(str(self.unavailable))
        self._stop()
        where = f"({sys.executable} -m arctl.backends.verl.sympy_worker)"
        what = WHAT[self.stage]
        try:
            self._proc = self._start()
        except OSError as err:  # no fork (process limit, memory), no interpreter
            self.unavailable = StageUnavailable(f"{what} could not start a worker process {where}: {err}")
            raise self.unavailable from err
        line = _readline(self._proc, time.monotonic() + START_TIMEOUT_S)
        if line is None or line.strip() != READY:
            said = f": {line.strip()}" if line else " (no answer; its stderr is not kept: it would fill a pipe)"
            self._stop()
            self.unavailable = StageUnavailable(f"{what} could not start a worker process {where}{said}")
            raise self.unavailable
        return self._proc

    def __call__(self, given: str, gold: str) -> bool:
        """Whether ``given`` equals ``gold`` under the sympy stage; False past :attr:`timeout_s` (the child
        is then replaced). A child that dies on the request is replaced and asked again once; dying
        twice is StageUnavailable, not a wrong answer."""
        request = json.dumps([self.stage, given, gold]) + "\n"
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
            raise StageUnavailable(f"{WHAT[self.stage]}'s worker process died twice on one request "
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


_WORKERS: dict[str, SympyWorker] = {}
_WORKER_LOCK = threading.Lock()


def _worker(stage: str) -> SympyWorker:
    """The process-wide worker of ``stage`` (started on first use)."""
    with _WORKER_LOCK:
        if stage not in _WORKERS:
            _WORKERS[stage] = SympyWorker(stage=stage)
        return _WORKERS[stage]


def bounded_sympy_equal(given: str, gold: str) -> bool:
    """The deepscaler grader's sympy stage, in the process-wide child, bounded at 10 s."""
    return _worker(SYMPY)(given, gold)


def bounded_math_verify(given: str, gold: str) -> bool:
    """math-verify's comparison (:func:`arctl.algo.verify.answers_equivalent`), in the process-wide child,
    bounded at 10 s (past it: wrong, as the deepscaler stage counts it)."""
    return _worker(MATH_VERIFY)(given, gold)


def _serve(stdin: Any = sys.stdin, stdout: Any = sys.stdout, stage: str = SYMPY) -> None:
    """The child's loop: ``ready`` once sympy and pylatexenc are imported, then one JSON ``[given, gold]``
    per line in (``[stage, given, gold]``: :data:`STAGES`), ``1`` or ``0`` per line out."""
    try:  # before "ready": the time bound is the comparison's, not the imports'
        import pylatexenc.latex2text  # noqa: F401
        import sympy.parsing.sympy_parser  # noqa: F401

        if stage == MATH_VERIFY:
            import math_verify  # noqa: F401
    except ImportError as err:  # the parent raises StageUnavailable with this line
        stdout.write(f"cannot import {err.name}: pip install sympy pylatexenc"
                     f"{' math-verify' if stage == MATH_VERIFY else ''}\n")
        stdout.flush()
        return
    stdout.write(READY + "\n")
    stdout.flush()
    for line in stdin:
        try:
            stage, given, gold = json.loads(line)
            ok = STAGES[stage](given, gold)
        except Exception:
            ok = False
        stdout.write("1\n" if ok else "0\n")
        stdout.flush()


if __name__ == "__main__":
    _serve(stage=sys.argv[1] if len(sys.argv) > 1 else SYMPY)

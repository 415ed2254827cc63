"""The authors' grader's sympy stage in a child process, cut at its time bound (arctl.backends.verl.sympy_worker)."""

from __future__ import annotations

import sys
import time

from arctl.algo.deepscaler_grader import sympy_equal
from arctl.backends.verl import sympy_worker
from arctl.backends.verl.sympy_worker import SympyWorker

PAIRS = [("2\\sqrt{2}", "\\sqrt{8}"), ("\\frac{2}{4}", "\\frac{1}{2}"), ("x+y+z", "z+y+x"), ("7 3/4", "\\frac{31}{4}"),
         ("Odd", "\\text{odd}"), ("2^{10}", "1024"), ("\\pi/2", "\\frac{\\pi}{2}"), ("a", "b")]


def test_the_child_gives_the_in_process_verdicts_with_one_child():
    worker = SympyWorker()
    try:
        got = [worker(a, b) for a, b in PAIRS]
        assert got == [sympy_equal(a, b) for a, b in PAIRS]
        assert any(got) and not all(got)
        assert worker.started == 1
    finally:
        worker.close()


class _Sleeper(SympyWorker):
    """A child that never answers its first request (a simplify that hangs), then answers."""

    def _start(self):
        import subprocess

        self.started += 1
        code = ("import sys, time\n"
                "first = True\n"
                "for line in sys.stdin:\n"
                "    if first and 'hang' in line:\n"
                "        time.sleep(60)\n"
                "    first = False\n"
                "    sys.stdout.write('1\\n'); sys.stdout.flush()\n")
        return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, bufsize=1)


def test_past_the_time_bound_it_is_wrong_and_the_child_is_replaced():
    worker = _Sleeper(timeout_s=1.0)
    try:
        t0 = time.monotonic()
        assert worker("hang", "x") is False  # the authors count a timeout wrong
        assert 1.0 <= time.monotonic() - t0 < 10
        hung = worker.started
        assert worker("fine", "x") is True and worker.started == hung + 1  # a new child answers
    finally:
        worker.close()


def test_a_child_that_died_is_restarted():
    worker = SympyWorker()
    try:
        assert worker("1/2", "0.5") is True
        worker._proc.kill()
        worker._proc.wait()
        assert worker("1/2", "0.5") is True and worker.started == 2
    finally:
        worker.close()


def test_the_module_worker_is_shared_and_started_once():
    sympy_worker._WORKER = None
    assert sympy_worker.bounded_sympy_equal("2\\sqrt{2}", "\\sqrt{8}") is True
    first = sympy_worker._WORKER
    assert sympy_worker.bounded_sympy_equal("a", "b") is False and sympy_worker._WORKER is first
    assert first.started == 1
    first.close()

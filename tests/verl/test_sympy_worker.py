"""The authors' grader's sympy stage in a child process, cut at its time bound (arctl.backends.verl.sympy_worker)."""

from __future__ import annotations

import sys
import time

import pytest

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


class _Scripted(SympyWorker):
    """A child running ``code`` (a stand-in for the real one, to time its parts)."""

    def __init__(self, code: str, timeout_s: float):
        super().__init__(timeout_s)
        self.code = code

    def _start(self):
        import subprocess

        self.started += 1
        return subprocess.Popen([sys.executable, "-c", self.code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, bufsize=1)


# ready at once; never answers its first request if it says "hang" (a simplify that hangs), then answers 1
HANGS_ONCE = ("import sys, time\n"
              "print('ready', flush=True)\n"
              "first = True\n"
              "for line in sys.stdin:\n"
              "    if first and 'hang' in line:\n"
              "        time.sleep(60)\n"
              "    first = False\n"
              "    sys.stdout.write('1\\n'); sys.stdout.flush()\n")


def _Sleeper(timeout_s):
    return _Scripted(HANGS_ONCE, timeout_s)


def test_past_the_time_bound_it_is_wrong_and_the_child_is_replaced():
    worker = _Sleeper(timeout_s=3.0)  # seconds a loaded machine still answers "1" in
    try:
        t0 = time.monotonic()
        assert worker("hang", "x") is False  # the authors count a timeout wrong
        assert 3.0 <= time.monotonic() - t0 < 30
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
    sympy_worker._WORKERS.pop(sympy_worker.SYMPY, None)
    assert sympy_worker.bounded_sympy_equal("2\\sqrt{2}", "\\sqrt{8}") is True
    first = sympy_worker._WORKERS[sympy_worker.SYMPY]
    assert sympy_worker.bounded_sympy_equal("a", "b") is False and sympy_worker._WORKERS[sympy_worker.SYMPY] is first
    assert first.started == 1
    first.close()


def test_math_verify_runs_in_its_own_child_bounded_in_time():
    """From an audit: ``verl.grader=math-verify`` graded on the agent loop's thread, where math-verify has no
    alarm; an answer such as sin(x)^9 cos(y)^9 (x+y)^99 against 1 ran past 40 s and stalled every later grade
    of the worker. It runs in a child's main thread now (math-verify's own alarm works there, and the parent
    kills a child past the bound): the same verdicts as on a thread of this process (the no-signal mode a resumed
    run graded with), and that answer wrong in time."""
    from arctl.algo.verify import answers_equivalent

    worker = SympyWorker(timeout_s=4.0, stage=sympy_worker.MATH_VERIFY)
    try:
        pairs = [("\\frac{1}{2}", "0.5"), ("x+1", "1+x"), ("3", "4")]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:  # the agent loop's grading thread
            here = [pool.submit(answers_equivalent, a, b).result() for a, b in pairs]
        assert [worker(a, b) for a, b in pairs] == here == [True, True, False]
        long_sum = "+".join(["x"] * 120)  # past the no-signal mode's bounds: wrong there, as before (a review)
        assert worker(long_sum, "120x") is False
        t0 = time.monotonic()
        assert worker("\\sin(x)^{9}\\cos(y)^{9}(x+y)^{99}", "1") is False
        assert time.monotonic() - t0 < 12
        assert worker("2", "2.0") is True  # the worker still answers
    finally:
        worker.close()


def test_the_time_bound_starts_after_the_child_is_ready():
    """A child that takes 6 s to import (a loaded node) still has the whole bound (3 s) for its answer."""
    code = "import sys, time\ntime.sleep(6)\nprint('ready', flush=True)\nfor line in sys.stdin:\n    print(1, flush=True)\n"
    worker = _Scripted(code, timeout_s=3.0)
    try:
        assert worker("a", "b") is True and worker.started == 1
    finally:
        worker.close()


def test_a_child_that_cannot_start_fails_the_step_in_one_line_and_scores_nothing(tokenizer):
    """No sympy on the machine: not a wrong answer for every leaf, an error naming what to install."""
    import pytest

    from arctl.algo.deepscaler_grader import StageUnavailable
    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.verl.reward import leaf_reward

    code = "print('cannot import sympy: pip install sympy pylatexenc', flush=True)\n"
    broken = _Scripted(code, timeout_s=1.0)
    with pytest.raises(StageUnavailable, match="could not start a worker process.*cannot import sympy"):
        broken("a", "b")
    assert broken._proc is None

    ins = InsertedTokens.from_tokenizer(tokenizer)
    enc = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    saved = sympy_worker._WORKERS.get(sympy_worker.SYMPY)
    sympy_worker._WORKERS[sympy_worker.SYMPY] = broken
    try:
        with pytest.raises(StageUnavailable):  # stage 1 says no, stage 2 cannot run: the step fails
            leaf_reward(enc("t"), ins.truncated, enc("\\boxed{2}"), "3", tokenizer, ins.think_end, None,
                        grader="deepscaler")
        right = leaf_reward(enc("t"), ins.truncated, enc("\\boxed{3}"), "3", tokenizer, ins.think_end, None,
                            grader="deepscaler")
        assert right == 1.0  # stage 1 decides without the child
    finally:
        if saved is None:
            sympy_worker._WORKERS.pop(sympy_worker.SYMPY, None)
        else:
            sympy_worker._WORKERS[sympy_worker.SYMPY] = saved


def test_a_child_that_cannot_be_created_is_an_error_not_a_wrong_answer():
    """fork refused (a process limit on a node), or no interpreter: StageUnavailable, never a 0."""
    import pytest

    from arctl.algo.deepscaler_grader import StageUnavailable
    from arctl.algo.verify import grade

    class NoFork(SympyWorker):
        def _start(self):
            self.started += 1
            raise BlockingIOError(11, "Resource temporarily unavailable")

    worker = NoFork()
    with pytest.raises(StageUnavailable, match="could not start a worker process.*Resource temporarily"):
        grade("\n\n**Final Answer**\n\\boxed{2\\sqrt{2}}", "\\sqrt{8}", "deepscaler", worker)
    # later grades say so at once, without trying again (from a review: each tried, up to START_TIMEOUT_S apiece)
    raised = []
    for _ in range(3):
        with pytest.raises(StageUnavailable, match="Resource temporarily") as err:
            worker("a", "b")
        raised.append(err.value)
    assert worker.started == 1
    assert len({id(e) for e in raised}) == 3  # a new one each time: one raised again grew its traceback per grade


# ready, then exits on the first request it reads (a crash in the stage); a new child does the same
# unless the marker file exists, which the first child creates: so "dies once" or "dies always"
DIES = ("import os, sys\n"
        "print('ready', flush=True)\n"
        "marker = sys.argv[1]\n"
        "for line in sys.stdin:\n"
        "    if marker == 'always' or not os.path.exists(marker):\n"
        "        if marker != 'always':\n"
        "            open(marker, 'w').close()\n"
        "        os._exit(3)\n"
        "    print(1, flush=True)\n")


class _Dies(_Scripted):
    def __init__(self, marker: str):
        super().__init__(DIES, timeout_s=60.0)
        self.marker = marker

    def _start(self):
        import subprocess

        self.started += 1
        return subprocess.Popen([sys.executable, "-c", self.code, self.marker], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, bufsize=1)


def test_a_child_that_dies_on_a_request_is_replaced_and_asked_again_once(tmp_path):
    worker = _Dies(str(tmp_path / "died-once"))
    try:
        t0 = time.monotonic()
        assert worker("a", "b") is True and worker.started == 2  # no wait for the 60 s bound either
        assert time.monotonic() - t0 < 45
    finally:
        worker.close()


def test_a_child_that_dies_on_every_request_is_an_error_not_a_wrong_answer():
    import pytest

    from arctl.algo.deepscaler_grader import StageUnavailable

    worker = _Dies("always")
    with pytest.raises(StageUnavailable, match="died twice on one request"):
        worker("a", "b")
    assert worker.started == 2 and worker._proc is None


@pytest.mark.slow  # starts a local Ray
def test_the_child_starts_and_answers_inside_a_ray_actors_event_loop(monkeypatch):
    """Where the verl backend grades: an async method of a Ray actor (the agent-loop worker). A child that
    could not start there would fail every step on a cluster at the first wrong answer stage 1 cannot
    settle; here it answers, from the actor's own process, twice with one child, and a third time from the
    agent loop's grading thread (``leaf_scorer``)."""
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a local Ray must not write ~/.ray/auth_token
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    @ray.remote(num_cpus=0)
    class Grader:
        async def grade(self, given, gold):
            import os
            import threading

            from arctl.backends.verl import sympy_worker as sw

            ok = sw.bounded_sympy_equal(given, gold)
            return ok, os.getpid(), sw._WORKERS[sw.SYMPY].started, sw._WORKERS[sw.SYMPY]._proc.pid, threading.current_thread().name

        async def score_leaf(self, gold):  # as the agent loop scores: decoded here, graded on its thread
            import threading

            from arctl.backends.verl import sympy_worker as sw
            from arctl.backends.verl.agent_loop import leaf_scorer

            class Decodes:
                def decode(self, ids, skip_special_tokens=False):
                    return "\n\n**Final Answer**\n\\boxed{2\\sqrt{2}}"

            reward = await leaf_scorer(Decodes(), 1, 2, gold, "deepscaler")([5, 6], [1], [3])
            return reward, sw._WORKERS[sw.SYMPY].started, sorted(t.name for t in threading.enumerate() if "arctl-grade" in t.name)

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        actor = Grader.options(lifetime="detached").remote()
        first = ray.get(actor.grade.remote("2\\sqrt{2}", "\\sqrt{8}"), timeout=300)
        second = ray.get(actor.grade.remote("\\frac{2}{4}", "\\frac{1}{2}"), timeout=300)
        leaf = ray.get(actor.score_leaf.remote("\\sqrt{8}"), timeout=300)
    finally:
        ray.shutdown()
    import os

    assert first[0] is True and second[0] is False  # the authors' verdicts: equal; an unreduced fraction
    assert first[1] != os.getpid() and first[3] not in (first[1], os.getpid())  # the actor's own child
    assert second[2] == 1 and second[3] == first[3]  # one child served both
    assert leaf == (1.0, 1, ["arctl-grade_0"])  # a leaf graded on the grading thread, by the same child

"""What a leaf's reward costs under each grader (``verl.grader``), measured side by side in one run.

    python benchmarks/bench_grader.py [--leaves 2000] [--seed 0] [--tree 16]

Part 1, the graders. Leaves: a summary ``**Final Answer**\\n\\boxed{given}`` against a
gold answer, both drawn from MATH-style answers (integers, fractions, roots, tuples, intervals,
units, percentages, text), most of them wrong as in training. Graders: math-verify, the authors'
(deepscaler) with its sympy stage in this process, and the authors' as the verl backend runs it (the
sympy stage in the child process, :mod:`arctl.backends.verl.sympy_worker`). Prints ms per leaf, the
share scored right, and the machine's load.

Part 2, the agent loop's event loop while it grades (the authors' grader, sympy in the child): a
heartbeat coroutine sleeps 1 ms at a time beside the grading of the same leaves in trees of
``--tree`` leaves (4 budgets x 4 summaries at paper scale), graded either on the event loop's thread
(arctl before 2026-11-29 15:00) or on the grading thread (:func:`arctl.backends.verl.agent_loop.grading_executor`).
Prints the wall time, the heartbeat's longest gap (how long the loop could not start a request) and
its ticks per second. Numbers in docs/benchmarks.md ("Graders").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

from _args import positive_int  # benchmarks/ (the script's folder is on sys.path)

from arctl.algo.verify import DEEPSCALER, MATH_VERIFY, grade
from arctl.backends.verl.agent_loop import grading_executor
from arctl.backends.verl.sympy_worker import bounded_sympy_equal

ANSWERS = [
    "10", "-5", "1000", "1,000", "0.5", "\\frac{1}{2}", "\\dfrac{3}{4}", "3/4", "\\frac{2}{4}", "\\sqrt{2}",
    "2\\sqrt{3}", "\\sqrt{12}", "\\frac{\\sqrt{3}}{2}", "\\pi", "2\\pi", "\\frac{\\pi}{2}", "(1,2)", "[1, 2)",
    "(-\\infty, 3]", "\\text{(A)}", "A", "\\text{Monday}", "10\\%", "45^\\circ", "x=2", "y = 2x + 1", "2x+1",
    "3\\text{ cm}", "\\$5", "7 3/4", "-\\frac{1}{3}", "x^2+1", "2^{10}", "1024", "\\{1,2\\}", "1, 2", "\\pm 2",
    "e^{2}", "\\infty", "\\frac{7}{2}", "3\\frac{1}{2}", "12.5", "0.125", "\\frac{1}{8}", "\\text{odd}",
]


def leaves(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [("\n\n**Final Answer**\n\\boxed{" + rng.choice(ANSWERS) + "}", rng.choice(ANSWERS)) for _ in range(n)]


async def loop_while_grading(work: list[tuple[str, str]], tree: int, threaded: bool) -> tuple[float, float, float]:
    """(wall s, the heartbeat's longest gap in ms, its ticks per second) while ``work`` is graded."""
    gaps: list[float] = []
    done = False

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    for i in range(0, len(work), tree):
        leaves_ = work[i : i + tree]
        if threaded:
            await asyncio.gather(*[loop.run_in_executor(grading_executor(), grade, text, gold, DEEPSCALER,
                                                        bounded_sympy_equal) for text, gold in leaves_])
        else:
            for text, gold in leaves_:
                grade(text, gold, DEEPSCALER, bounded_sympy_equal)
            await asyncio.sleep(0)
    wall = time.perf_counter() - t0
    done = True
    await beat
    return wall, max(gaps) * 1e3, len(gaps) / wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", type=positive_int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tree", type=positive_int, default=16, help="leaves graded together (one tree)")
    args = parser.parse_args(argv)
    work = leaves(args.leaves, args.seed)
    print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {len(work)} leaves")
    setups = [("math-verify", MATH_VERIFY, None), ("deepscaler, sympy in process", DEEPSCALER, None),
              ("deepscaler, sympy in the child (the verl backend)", DEEPSCALER, bounded_sympy_equal)]
    for name, grader, stage in setups:
        grade(*work[0], grader, stage)  # imports, the child's start
        t0 = time.perf_counter()
        right = sum(grade(text, gold, grader, stage) for text, gold in work)
        ms = (time.perf_counter() - t0) / len(work) * 1e3
        print(f"{name:52s} {ms:7.2f} ms/leaf   right {right / len(work):.3f}")
    for threaded in (False, True, False, True):
        wall, gap, ticks = asyncio.run(loop_while_grading(work, args.tree, threaded))
        where = "grading thread" if threaded else "event loop   "
        print(f"graded on the {where}: {wall:6.2f} s for {len(work)} leaves; heartbeat: longest gap "
              f"{gap:7.1f} ms, {ticks:6.0f} ticks/s")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

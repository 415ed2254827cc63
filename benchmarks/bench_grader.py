"""What a leaf's reward costs under each grader (``verl.grader``), measured side by side in one run.

    python benchmarks/bench_grader.py [--leaves 2000] [--seed 0]

The agent loop scores every summary leaf in its own event loop, so the grader's time per leaf is
time its worker does not generate. Leaves: a summary ``**Final Answer**\\n\\boxed{given}`` against a
gold answer, both drawn from MATH-style answers (integers, fractions, roots, tuples, intervals,
units, percentages, text), most of them wrong as in training. Graders: math-verify, the authors'
(deepscaler) with its sympy stage in this process, and the authors' as the verl backend runs it (the
sympy stage in the child process, :mod:`arctl.backends.verl.sympy_worker`). Prints ms per leaf, the
share scored right, and the machine's load. Numbers in docs/benchmarks.md ("Graders").
"""

from __future__ import annotations

import argparse
import os
import random
import time

from arctl.algo.verify import DEEPSCALER, MATH_VERIFY, grade
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Cost of building the tree attention mask: interval-built BlockMask (arctl default) vs eager
``create_block_mask`` (materialises [L, L]) vs the dense [L, L] mask, for one tree of the paper's
shape (8000 thinking tokens, 4 budgets x 4 summaries x 128 tokens), CPU.

Run: python benchmarks/bench_tree_mask.py [--lengths 2000 8000]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from arctl.algo.tree import SummaryBranch, dense_tree_mask, pack_tree, tree_block_mask, tree_mask_mod


def paper_tree(think_len: int, budgets: int = 4, summaries: int = 4, summary_len: int = 128):
    cuts = [think_len * (j + 1) // budgets for j in range(budgets)]
    branches = [SummaryBranch(c, [1] * 8, [2] * (summary_len - 8)) for c in cuts for _ in range(summaries)]
    return pack_tree([3] * 128, [4] * think_len, branches, pad_to_multiple=128)


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2000, 8000, 16000])
    args = parser.parse_args()
    torch.set_num_threads(1)
    from torch.nn.attention.flex_attention import create_block_mask

    # one call first, untimed: the first create_block_mask pays its one-time setup, which the dense and interval
    # builds (best of 3) do not carry (from a review); each length is then one call (seconds at 16k on a CPU)
    small = paper_tree(256)
    create_block_mask(tree_mask_mod(small.cut, small.branch_start), None, None, small.length, small.length, "cpu")
    print(f"load average {os.getloadavg()[0]:.1f}; one torch thread")
    print(f"{'thinking':>8} {'L':>6} {'dense MiB':>9} {'dense s':>8} {'intervals s':>11} {'create_block_mask s':>19}")
    for think_len in args.lengths:
        tree = paper_tree(think_len)
        n = tree.length
        cut, start = tree.cut, tree.branch_start
        mod = tree_mask_mod(cut, start)
        t_dense = best_of(lambda c=cut, s=start: dense_tree_mask(c, s))
        t_int = best_of(lambda c=cut, s=start: tree_block_mask(c, s, "cpu"))
        t_cbm = best_of(lambda m=mod, n=n: create_block_mask(m, None, None, n, n, "cpu"), repeat=1)
        print(f"{think_len:>8} {n:>6} {n * n / 2**20:>9.1f} {t_dense:>8.3f} {t_int:>11.4f} {t_cbm:>19.3f}")


if __name__ == "__main__":
    main()

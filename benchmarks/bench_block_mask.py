"""Extra peak memory of the verl backend's tree attention mask for the paper's longest tree, CPU.

The tree: 128 prompt + 8,000 thinking tokens + 4 budgets x 4 summaries x 128 tokens = 10,176
tokens (``data.max_response_length`` of the paper's 1.5B/8k runs). Each variant runs in a fresh
Python process; "extra peak" is the rise of the process's peak RSS (``ru_maxrss``) while building
the mask, after the 1-D tree encoding exists:

- ``blockmask``: :func:`arctl.backends.verl.tree_forward.tree_attention_mask` with
  ``flex_attention`` (the GPU path: FlexAttention BlockMask from interval overlaps);
- ``dense_bool``: the same function for ``sdpa`` (boolean [1, 1, L, L]);
- ``dense_float``: an additive float32 [L, L] mask (what an eager attention would need).

Run: python benchmarks/bench_block_mask.py [--think 8000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from _args import positive_int  # benchmarks/ (the script's folder is on sys.path)

CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
from arctl.algo.tree import SummaryBranch, pack_tree
from arctl.backends.verl.tree_forward import tree_attention_mask
think, variant = int(sys.argv[1]), sys.argv[2]
cuts = [think * (j + 1) // 4 for j in range(4)]
branches = [SummaryBranch(c, [1] * 8, [2] * 120) for c in cuts for _ in range(4)]
tree = pack_tree([3] * 128, [4] * think, branches)
cut, start = tree.cut[None], tree.branch_start[None]
# warm-up on a small tree so one-off allocations (kernels, caches) are not counted
small = pack_tree([3] * 8, [4] * 300, [SummaryBranch(100, [1], [2] * 10)])
tree_attention_mask(small.cut[None], small.branch_start[None], "flex_attention")
tree_attention_mask(small.cut[None], small.branch_start[None], "sdpa")
kb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
before = kb()
t0 = time.perf_counter()
if variant == "blockmask":
    mask = tree_attention_mask(cut, start, "flex_attention")
elif variant == "dense_bool":
    mask = tree_attention_mask(cut, start, "sdpa")
else:
    mask = torch.zeros(tree.length, tree.length, dtype=torch.float32)
    mask.masked_fill_(~tree_attention_mask(cut, start, "sdpa")[0, 0], float("-inf"))
elapsed = time.perf_counter() - t0
print(json.dumps({"L": tree.length, "extra_mib": (kb() - before) / 1024, "seconds": elapsed}))
"""


def run(think: int, variant: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(think), variant], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--think", type=positive_int, default=8000)
    parser.add_argument("--repeat", type=positive_int, default=3)
    args = parser.parse_args(argv)
    print(f"{'variant':<12} {'L':>6} {'extra peak MiB (min..max)':>26} {'build s (min)':>13}  {'[L,L] bytes/elt':>15}")
    for variant, bytes_per in (("blockmask", "-"), ("dense_bool", "1"), ("dense_float", "4")):
        rows = [run(args.think, variant) for _ in range(args.repeat)]
        mib = [r["extra_mib"] for r in rows]
        print(f"{variant:<12} {rows[0]['L']:>6} {min(mib):>12.1f} .. {max(mib):<10.1f} {min(r['seconds'] for r in rows):>13.3f}  {bytes_per:>15}")


if __name__ == "__main__":
    main()

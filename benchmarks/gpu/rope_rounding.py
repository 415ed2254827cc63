"""What part f's first GPU run compared, on a CPU: a model cast to bf16 and back (the suite's reference until
2026-12-04) against the same saved weights loaded as verl's actor loads them (``from_pretrained`` in fp32).

The parameters are equal bit for bit; the rotary embedding's ``inv_freq`` is not: no checkpoint holds it, the
bf16 cast rounded it, and the fp32 load computes it afresh. Both models run in fp32 on one paper-shaped tree
(dense mask); the script prints the log-prob differences by position (docs/gpu.md, "First GPU run").

    python benchmarks/gpu/rope_rounding.py [--layers 28] [--think 2000] [--json OUT]

At the paper's width (hidden 1536, 12 heads, 2 KV heads, intermediate 8960) with 28 layers and a 32,768-word
vocabulary (the paper's 151,936 changes only the output layer's cost), 2,000 thinking tokens: ~100 s on two
cores, 14 GB peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import torch


def load_suite():
    spec = importlib.util.spec_from_file_location("gpu_suite", Path(__file__).with_name("suite.py"))
    suite = importlib.util.module_from_spec(spec)
    sys.modules["gpu_suite"] = suite
    spec.loader.exec_module(suite)
    return suite


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--think", type=int, default=2000, help="thinking tokens (cuts at each quarter)")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--bucket", type=int, default=500, help="positions per row of the profile")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    suite = load_suite()
    spec = {**suite.QWEN2_1_5B, "num_hidden_layers": args.layers, "vocab_size": args.vocab}
    q = args.think // 4
    shape = dict(prompt=128, think=args.think, cuts=(q, 2 * q, 3 * q, 4 * q), summaries=2, summary=64, inserted=8)
    t0 = time.perf_counter()
    model = suite.make_model(spec, "cpu", torch.bfloat16, "sdpa", tie=False)  # as part f saves it
    with tempfile.TemporaryDirectory(prefix="arctl-rope-") as d:
        suite.save_model_dir(model, d)
        # the suite's reference until 2026-12-04: the model cast back to fp32 from its bf16 cast, which had rounded
        # the rotary buffers too (make_model now rebuilds them in fp32 after the cast; here they are rounded again)
        cast_back = model.to(dtype=torch.float32).eval()
        with torch.no_grad():
            for buf in cast_back.model.rotary_emb.buffers():
                buf.copy_(buf.to(torch.bfloat16).to(buf.dtype))
        del model
        gc.collect()
        loaded = suite.load_reference(d, "cpu", "sdpa").eval()  # as verl's actor loads it (and the reference now)
    out = {"layers": args.layers, "think": args.think, "vocab": args.vocab,
           "parameters_equal": all(torch.equal(a, b) for a, b in zip(cast_back.parameters(), loaded.parameters())),
           "inv_freq_max_abs_diff": {"cast back": suite.rope_buffers_diff(cast_back),
                                     "loaded": suite.rope_buffers_diff(loaded)}}
    tree = suite.make_tree(shape, args.vocab)
    with torch.no_grad():
        a, _ = suite.tree_logp(cast_back, [tree], "cpu", "dense")
        b, _ = suite.tree_logp(loaded, [tree], "cpu", "dense")
    p = tree.prompt_len
    positions = suite.stack_trees([tree])["position_ids"][0, p:][tree.loss_mask[p:]]
    suite.F_POSITION_BUCKET = args.bucket
    out["logp_diff"] = suite.logp_diff_stats(b - a, positions)
    out["logp_sd_over_tokens"] = float(a.std())
    out["seconds"] = time.perf_counter() - t0
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return out


if __name__ == "__main__":
    main()

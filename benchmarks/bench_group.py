"""Does one batched call of G tiny models cost less than G calls? The premise of training seeds in
one process (issue 29 item 1), measured before building it. Run by hand; numbers in
docs/benchmarks.md ("Several runs in one batched model").

    python benchmarks/bench_group.py [--tokens 1,64] [--groups 1,2,4,8] [--repeats 5]

The tiny scale's model (``main-ar-uniform`` resolved at ``--scale tiny``), G copies with their own
weights, on 64 rows (a training step's 8 prompts x 8 samples) of T tokens each: the G models called
one after the other, against ``torch.func.vmap`` of one functional call over their stacked weights
(``stack_module_state``). T = 1 is a decoding step's forward (per-call overhead); T = 64 a training
forward (arithmetic). Forward alone and forward + backward; one torch thread; best of ``--repeats``.
"""

from __future__ import annotations

import argparse

import torch
from _args import int_list, positive_int  # benchmarks/ (the script's folder is on sys.path)
from bench_tree_mask import best_of  # benchmarks/ (the script's folder is on sys.path)
from torch.func import functional_call, stack_module_state, vmap

from arctl.backends.tiny.model import build_model, model_config

ROWS = 64
VOCAB = 416


def best(fn, repeats: int) -> float:
    """Best of ``repeats`` after one warm-up call (vmap's first call traces)."""
    fn()
    return best_of(fn, repeats)


def measure(cfg, g: int, tokens: int, repeats: int) -> tuple[float, float, float, float]:
    """(forward: G calls s, one vmap call s, forward+backward: G calls s, one vmap call s) of G models
    with their own weights on ROWS rows of ``tokens`` tokens each."""
    models = [build_model(cfg, seed) for seed in range(g)]
    ids = torch.randint(2, VOCAB, (g, ROWS, tokens), generator=torch.Generator().manual_seed(0))
    params, buffers = stack_module_state(models)

    def one(p, b, x):
        return functional_call(models[0], (p, b), (x,), {"use_cache": False}).logits

    def calls():
        with torch.no_grad():
            for m, x in zip(models, ids):
                m(x, use_cache=False)

    def batched():
        with torch.no_grad():
            vmap(one)(params, buffers, ids)

    def calls_bwd():
        for m, x in zip(models, ids):
            m(x, use_cache=False).logits.logsumexp(-1).mean().backward()

    def batched_bwd():
        p = {k: v.detach().requires_grad_() for k, v in params.items()}
        vmap(one)(p, buffers, ids).logsumexp(-1).mean().backward()

    half = max(1, repeats // 2)
    return best(calls, repeats), best(batched, repeats), best(calls_bwd, half), best(batched_bwd, half)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int_list, default="1,64", help="tokens per row, comma-separated")
    parser.add_argument("--groups", type=int_list, default="1,2,4,8", help="group sizes G, comma-separated")
    parser.add_argument("--repeats", type=positive_int, default=5)
    args = parser.parse_args(argv)
    from arctl.compose import resolve_experiment

    torch.set_num_threads(1)
    model_section = resolve_experiment("main-ar-uniform", scale="tiny")[0].config["model"]
    cfg = model_config(model_section, VOCAB, 0, 1)
    cfg._attn_implementation = "eager"  # vmap has no batching rule for every SDPA kernel on CPU
    print("| tokens per row | G | forward: G calls s | one vmap call s | ratio | fwd+bwd: G calls s | one vmap call s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for tokens in args.tokens:
        for g in args.groups:
            f_calls, f_vmap, b_calls, b_vmap = measure(cfg, g, tokens, args.repeats)
            print(f"| {tokens} | {g} | {f_calls:.3f} | {f_vmap:.3f} | {f_calls / f_vmap:.2f}x | {b_calls:.3f} | "
                  f"{b_vmap:.3f} | {b_calls / b_vmap:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

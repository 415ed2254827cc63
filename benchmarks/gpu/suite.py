"""GPU check suite of the verl path: one command, six parts, numbers to ``--out``.

    python benchmarks/gpu/suite.py --out DIR                      # CUDA, the paper's shape
    python benchmarks/gpu/suite.py --out DIR --shape small --device cpu   # what CI runs

a. equivalence: a randomly initialised Qwen2 (paper shape: Qwen2-1.5B from a config, no download)
   on a tree packed by ``arctl.algo.tree`` (prompt 128, thinking 8,000, cuts 2k/4k/6k/8k, 4
   summaries x 128 per cut: L = 10,176, not a multiple of 128): per-token log-probs and the gradient
   of sum(A * logp) with the tree mask equal those of the 17 sequences it packs (trunk + 16
   branches), in fp32 (tight) and bf16 (a stated tolerance). The tree mask is the FlexAttention
   BlockMask on CUDA; on CPU FlexAttention has no backward, so the gradient uses the dense mask and
   the BlockMask is checked on the forward.
b. speed and memory of forward + backward with gradient checkpointing: the tree with the
   FlexAttention BlockMask (CUDA) and with a dense SDPA mask vs the duplicated rows; times, ratios,
   peak ``max_memory_allocated``.
c. recompilations: 10 micro-batches of 1-3 trees of different lengths (paper: thinking 1,000-8,000,
   padded L 3,176-10,176) through FlexAttention, each run twice in a row as verl runs them: an
   eval-mode forward without grad (the old-log-prob pass), then a train-mode forward + backward (the
   update). Per run, from an emptied dynamo cache: compilations, recompilations (with the guard that
   failed), graph breaks and hits of dynamo's recompile limit (after one, flex_attention runs
   eagerly), read from ``torch._dynamo.utils``' compilation metrics and counters; NaN from padding. Fails on a graph
   break, a limit hit, a compile failure or a NaN; the recompilation counts are reported. CPU:
   FlexAttention has no backward, so the train run is a train-mode forward without grad, and the
   trees of a micro-batch run one by one (torch's CPU inductor does not compile the batched
   FlexAttention forward with a dynamic batch: 'cur_kvSplitSize8 was not declared').
d. verl's own code: the FSDP engine's ``prepare_model_inputs`` patched by arctl's plugin builds the
   tree inputs (their log-probs equal part a's), and verl's ``ppo_loss`` with the registered arctl
   policy loss equals ``arctl.algo.tree_loss.policy_loss`` on them. Needs verl importable (on the
   device: carry the wheels of docs/gpu.md and stub ray / transfer_queue / uvicorn / fastapi). An
   import error FAILS the part like any other error (named in results.json); to leave part d out on
   purpose, name the other parts: ``--parts abcef`` (reported as skipped, "not requested").
e. actor memory with full-vocabulary logits: a Qwen2-1.5B-shaped model with untied embeddings (as
   DeepSeek-R1-Distill-Qwen-1.5B: 1.78e9 parameters, vocabulary 151,936), bf16, per-token log-probs
   of a micro-batch of N = 8,192 / 16,384 / 32,768 tokens (rows of 8,192), in the old-log-prob pass
   (eval, no grad) and in the update (train, forward + backward, gradient checkpointing), each
   (i) full, as verl's padded path computes them (the [B, L, V] logits, the [N, V] copy of the valid
   rows, log_softmax row by row: ``logprobs_from_logits_v2``, verl's path without flash-attn) and
   (ii) chunked (output layer + log_softmax over 1,024 tokens at a time; in the update each chunk is
   recomputed in backward). Peak ``torch.cuda.max_memory_allocated`` (CPU: the bytes of tensors
   live during the pass, counted by a TorchDispatchMode, + the weights; not an allocator peak), plus
   what a single-GPU actor holds besides (no offload, FSDP mixed precision: fp32 master weights and
   AdamW's two fp32 moments, 12 B/param; the update also fp32 gradients, 16 B/param), against
   80 GB and 40 GB cards (``FITS_GIB``). An out-of-memory is a result (does not fit), not a failure.
f. one real verl FSDP actor step, in this process: a random-weight Qwen2 saved as a local model
   directory (paper: Qwen2-1.5B-shaped, untied embeddings as R1-Distill, saved bf16 as R1-Distill
   ships; small: TINY), verl's own ``ActorRolloutRefWorker(role="actor")`` built from verl's composed
   ppo_trainer config with arctl's actor keys (``actor_overrides``), ``init_model`` (verl initialises
   torch.distributed, world size 1: nccl on CUDA, gloo on CPU through arctl's cpu platform, which the
   suite selects with VERL_PLATFORM=cpu for ``--device cpu``; the FSDP engine FSDPEngineWithLMHead:
   FSDP1 + bf16 mixed precision on CUDA as verl's defaults, FSDP2 + fp32 on CPU), then on one packed
   tree as verl's v1 trainer hands it over (``tree_batch``, with arctl's tree-mask encoding; the
   FlexAttention BlockMask on CUDA, the dense mask on CPU): ``compute_log_prob`` (the old-log-prob
   pass) and ``update_actor`` (forward, the registered ``arctl_drgrpo`` loss through verl's
   ``ppo_loss``, backward, grad clip, AdamW step). Reports loss, grad norm, the parameters that
   changed, peak ``max_memory_allocated`` per phase (CUDA), seconds; checks (``f_checks``) against
   the suite's own tree forward of the saved weights (fp32) and ``arctl.algo.tree_loss``: every
   forward of verl's engine got the suite's tree mask, verl's loss = arctl's loss of verl's log-probs,
   verl's log-probs = the tree's, verl's grad norm = the reference's, the step moved the parameters
   against the reference gradient. Fails on NaN, an
   unchanged parameter vector, a check off its tolerance or an exception (named in results.json).

Parts run in the order a, d, f, e, b, c (the checks and the memory table first, the open-ended
compile counting last) whatever the order of ``--parts``. ``--budget-s`` (default 540: a device
call is at most 600 s, the rest is for starting and installing wheels) is counted from the suite's
start: a part whose estimate (``ESTIMATE_S``, seconds) exceeds what is left is skipped with that
reason; c and e stop between micro-batches when the next would not fit; at the budget's end a
SIGALRM stops the running part (status "stopped", its finished rows kept). Progress lines go to
stdout as parts and micro-batches start and finish.

Writes ``results.json`` and ``results.md`` (one table per part) to ``--out`` after every part and
every micro-batch of c and e and every phase of f, so a call killed at its time limit still returns
what finished.
Exit code 0 only when every part that ran is ok and the run is complete (``results["complete"]``: no part
skipped for the budget, none stopped early); 1 otherwise (a part left out with ``--parts`` is listed as
skipped and does not count against completeness). The paper shape on a CPU is refused (exit 1 at once,
``results.json`` says why) unless ``--device cpu`` is given: without a visible GPU the budget would go to a
1.5B model on the CPU. ``--device cuda`` (or ``cuda:N``) where torch sees no such CUDA device is refused
the same way, at any shape.
Needs only torch + transformers for a, b, c, e; d and f need verl (docs/gpu.md).
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # the budget counts from here

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _folder in (ROOT, HERE.parent):  # arctl, and benchmarks/_args.py (also when loaded with importlib by a test)
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
from _args import positive_int  # noqa: E402


def _stub_imports():
    spec = importlib.util.spec_from_file_location("gpu_stub_imports", HERE / "stub_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_options(argv: list[str] | None) -> argparse.ArgumentParser:
    """``--hide``, ``--as-device``, ``--stub``: they act before torch is imported (a package hidden
    later could already sit in sys.modules)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--stub", default="", help="comma-separated packages served as stand-ins for parts d and f "
                        "(on the device: ray,transfer_queue,uvicorn,fastapi; benchmarks/gpu/stub_imports.py)")
    parser.add_argument("--hide", default="", help="comma-separated installed packages made absent (import "
                        "and metadata), as where their wheel was not carried; e.g. --hide verl")
    parser.add_argument("--as-device", action="store_true", help="hide every installed package the device "
                        "image lacks, except the wheels docs/gpu.md carries (stub_imports.CARRIED), and arctl's "
                        "install metadata (not installed there): parts d and f rehearsed with the device's packages")
    return parser


def _apply_import_options(argv: list[str] | None) -> None:
    args, _ = _import_options(argv).parse_known_args(argv)
    if not (args.stub or args.hide or args.as_device):
        return
    stubs = _stub_imports()
    hidden = [n for n in args.hide.split(",") if n]
    if args.as_device:
        hidden += stubs.absent_on_device()
    if hidden or args.as_device:
        stubs.hide(hidden, metadata_only=stubs.NOT_INSTALLED if args.as_device else ())
    if args.stub:
        stubs.install(tuple(n for n in args.stub.split(",") if n))


if __name__ == "__main__":
    _apply_import_options(sys.argv[1:])

import torch  # noqa: E402

from arctl.algo.tree import SummaryBranch, dense_tree_mask, pack_tree, stack_trees, tree_block_mask  # noqa: E402

QWEN2_1_5B = dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                  intermediate_size=8960, vocab_size=151936)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=512)
SHAPES = {
    "paper": dict(model=QWEN2_1_5B, prompt=128, think=8000, cuts=(2000, 4000, 6000, 8000), summaries=4,
                  summary=128, inserted=8, batch_lengths=(6000, 8000, 3000),
                  # part c: thinking tokens of the trees of each micro-batch
                  batches=((8000,), (8000, 6000), (6000, 8000, 3000), (3000,), (2000, 5000), (8000, 8000, 8000),
                           (4000,), (7000, 1000), (5000, 2000, 6000), (1000,)),
                  # part e: Qwen2-1.5B with untied embeddings; N tokens in rows of `row`; chunk tokens
                  memory=dict(model=QWEN2_1_5B, tokens=(8192, 16384, 32768), row=8192, chunk=1024)),
    "small": dict(model=TINY, prompt=16, think=120, cuts=(30, 60, 90, 120), summaries=4, summary=12, inserted=3,
                  batch_lengths=(80, 120, 50),
                  batches=((120,), (120, 90), (90, 120, 45), (45,), (30, 75), (120, 120, 120), (60,), (105, 15),
                           (75, 30, 90), (15,)),
                  # vocabulary / hidden = 128 (paper: 99), so the logits dominate as they do at paper scale
                  memory=dict(model=dict(TINY, vocab_size=8192), tokens=(256, 512, 1024), row=256, chunk=64)),
}
# tolerances (max |logp diff|, gradient relative error): fp32 tight, bf16 stated
TOL = {"float32": dict(logp=2e-4, grad=2e-4), "bfloat16": dict(logp=0.25, grad=0.05)}
LM_HEAD_CHUNK = 1024  # tokens per lm_head chunk (the 151,936-word vocabulary would need GBs at once)
ORDER = "adfebc"  # run order: checks and the memory table first, the open-ended compile counting last
# Seconds a part needs to give its numbers, for --budget-s. Paper: measured on one H200 (2026-12-04,
# docs/gpu.md: a 98.8, d 46.0 with verl's import, f 75-85 alone with verl's import, e 34.5, b 29.8, c 38.0),
# rounded up. c and e need this much for their first micro-batch and use what is left for the others.
ESTIMATE_S = {"paper": dict(a=110, d=55, f=110, e=40, b=35, c=45), "small": dict(a=30, d=15, f=30, e=5, b=15, c=5)}
# single-GPU view of part e: bytes per parameter a single-GPU actor holds besides the bf16 compute weights
# (FSDP mixed precision, no offload): fp32 master weights 4 + AdamW exp_avg 4 + exp_avg_sq 4; the update
# also fp32 gradients 4 (its bf16 gradients are in the measured peak)
STATE_BYTES = {"old-log-prob": 12, "update": 16}
# "fits" thresholds in GiB: what torch reports as the card's memory (H100 80GB ~79.2 GiB, A100 40GB
# ~39.5 GiB) less 3 GiB for the CUDA context, NCCL buffers and allocator fragmentation, which
# max_memory_allocated does not count
FITS_GIB = {"80 GB": 76.0, "40 GB": 36.5}
GIB = 2**30


class BudgetExceeded(BaseException):
    """--budget-s ran out while a part was running (raised by SIGALRM; a BaseException so that no
    ``except Exception`` of a part takes it for a failure)."""


# ------------------------------------------------------------------------------ building blocks
def make_model(spec: dict, device: str, dtype: torch.dtype, attn: str = "sdpa", tie: bool = True):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(**spec, max_position_embeddings=32768, tie_word_embeddings=tie, attn_implementation=attn)
    with torch.device(device):  # initialised where it runs (a 1.5B model: seconds on a GPU, not on the CPU)
        model = Qwen2ForCausalLM(cfg)
    model = model.to(device=device, dtype=dtype)
    # the rotary embedding's buffers fresh in fp32, as a checkpoint load computes them and FSDP's mixed precision
    # keeps them: the cast above rounds them to ``dtype`` (no checkpoint holds them; rope_buffers_diff)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=model.config, device=device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()  # checkpointing is active in train mode; the model has no dropout
    return model


def make_tree(shape: dict, vocab: int, think: int | None = None, seed: int = 0):
    """One packed tree: prompt, thinking, ``summaries`` branches per cut, random advantages."""
    g = torch.Generator().manual_seed(seed)
    think = think or shape["think"]
    cuts = [min(c, think) for c in shape["cuts"]]
    rand = lambda n: torch.randint(3, vocab, (n,), generator=g).tolist()  # noqa: E731
    branches = [SummaryBranch(c, rand(shape["inserted"]), rand(shape["summary"] - shape["inserted"]),
                              float(torch.randn(1, generator=g))) for c in cuts for _ in range(shape["summaries"])]
    return pack_tree(rand(shape["prompt"]), rand(think), branches, torch.randn(think, generator=g))


def sequences(tree) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The 1 + m*A sequences a tree packs: (packed indices in order, trained mask over them)."""
    out = [(tree.trunk_indices(), tree.loss_mask[tree.trunk_indices()].clone())]
    out[0][1][: tree.prompt_len] = False
    for i, span in enumerate(tree.branches):
        idx = tree.branch_indices(i)
        trained = torch.zeros(len(idx), dtype=torch.bool)
        trained[len(idx) - (span.end - span.summary_start):] = True
        out.append((idx, trained))
    return out


def token_logp(model, input_ids, position_ids, mask, predecessor, trained) -> torch.Tensor:
    """log p of every trained token [N] (rows, cols of ``trained``), read at its predecessor's
    output; the output layer runs in chunks and only where a trained token is predicted."""
    hidden = model.model(input_ids=input_ids, position_ids=position_ids, attention_mask=mask).last_hidden_state
    rows, cols = trained.nonzero(as_tuple=True)
    src = predecessor[rows, cols]
    out = []
    for k in range(0, len(rows), LM_HEAD_CHUNK):
        r, s, c = rows[k:k + LM_HEAD_CHUNK], src[k:k + LM_HEAD_CHUNK], cols[k:k + LM_HEAD_CHUNK]
        logits = model.lm_head(hidden[r, s]).float()
        out.append(torch.log_softmax(logits, -1).gather(-1, input_ids[r, c][:, None])[:, 0])
    return torch.cat(out) if out else hidden.new_zeros(0)


def stacked_on(trees, device: str) -> dict[str, torch.Tensor]:
    """:func:`arctl.algo.tree.stack_trees` of ``trees``, every tensor on ``device``."""
    return {k: v.to(device) for k, v in stack_trees(trees).items()}


def tree_inputs(trees, device: str, mask_kind: str):
    """Stacked trees and their attention mask: ``flex`` BlockMask, ``dense`` boolean [B,1,L,L]."""
    s = stacked_on(trees, device)
    if mask_kind == "flex":
        mask = tree_block_mask(s["cut"], s["branch_start"], device=device)
    else:
        mask = dense_tree_mask(s["cut"], s["branch_start"])[:, None]
    return s, mask


def tree_logp(model, trees, device: str, mask_kind: str):
    s, mask = tree_inputs(trees, device, mask_kind)
    logp = token_logp(model, s["input_ids"], s["position_ids"], mask, s["predecessor"], s["loss_mask"])
    adv = s["advantages"][s["loss_mask"]].to(logp.dtype)
    return logp, adv


def duplicated_logp(model, tree, device: str):
    """The same trained tokens, each sequence run on its own (batch 1: the memory of one sequence)."""
    logps, advs = [], []
    for idx, trained in sequences(tree):
        ids = tree.input_ids[idx][None].to(device)
        pos = torch.arange(len(idx), device=device)[None]
        pred = (torch.arange(len(idx), device=device) - 1).clamp_min(0)[None]
        logps.append(token_logp(model, ids, pos, None, pred, trained[None].to(device)))
        advs.append(tree.advantages[idx][trained].to(device))
    return logps, advs


def grad_vector(model) -> torch.Tensor:
    return torch.cat([p.grad.detach().float().flatten() for p in model.parameters() if p.grad is not None])


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def free_memory(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


class Context:
    """What a part gets besides the shape: the device, ``rec`` (its entry of results.json, which it
    may fill as it goes), ``save()`` (writes results.json and results.md now) and ``left()`` (seconds
    of --budget-s left)."""

    def __init__(self, shape: dict, shape_name: str, device: str, repeats: int, rec: dict, save, left,
                 f_mask: str | None = None, f_overrides: tuple[str, ...] = ()):
        self.shape, self.shape_name, self.device, self.repeats = shape, shape_name, device, repeats
        self.rec, self.save, self.left = rec, save, left
        self.f_mask, self.f_overrides = f_mask, tuple(f_overrides)  # part f's variant (--f-mask, --f-override)

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def log(message: str) -> None:
    print(f"[{time.perf_counter() - T_START:6.1f} s] {message}", flush=True)


# ------------------------------------------------------------------------------ parts
def part_a(ctx: Context) -> dict:
    """Tree (BlockMask on CUDA, dense mask on CPU) vs the 17 duplicated sequences."""
    shape, device, cuda = ctx.shape, ctx.device, ctx.cuda
    out = {"checks": []}
    tree = make_tree(shape, shape["model"]["vocab_size"])
    out["tree"] = {"length": tree.length, "multiple_of_128": tree.length % 128 == 0, "branches": len(tree.branches)}
    truth = {}  # the fp32 duplicated rows' log-probs and gradient: what a bf16 computation is judged against
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype).split(".")[-1]
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        grad_mask = "flex" if cuda else "dense"
        model = make_model(shape["model"], device, dtype, "flex_attention" if grad_mask == "flex" else "sdpa")
        logp_t, adv_t = tree_logp(model, [tree], device, grad_mask)
        (adv_t * logp_t).sum().backward()
        g_tree = grad_vector(model)
        model.zero_grad(set_to_none=True)
        model.set_attn_implementation("sdpa")
        dup_logps, dup_advs = [], []
        for lp, adv in zip(*duplicated_logp(model, tree, device)):
            (adv.to(lp.dtype) * lp).sum().backward()
            dup_logps.append(lp.detach())
            dup_advs.append(adv)
        g_dup = grad_vector(model)
        # the same tokens in the same order: trunk (thinking), then each branch's summary
        ref = torch.cat(dup_logps)
        order = torch.cat([torch.arange(tree.prompt_len, tree.trunk_len)] +
                          [torch.arange(b.summary_start, b.end) for b in tree.branches])
        pos = torch.full((tree.length,), -1, dtype=torch.long)
        pos[tree.loss_mask.nonzero()[:, 0]] = torch.arange(int(tree.loss_mask.sum()))
        got = logp_t.detach()[pos[order].to(device)]
        diff = (got - ref).abs()
        rel = float((g_tree - g_dup).norm() / g_dup.norm().clamp_min(1e-30))
        tol = TOL[name]
        check = {"dtype": name, "mask": grad_mask, "tokens": int(ref.numel()),
                 "logp_max_abs_diff": float(diff.max()), "logp_mean_abs_diff": float(diff.mean()),
                 "grad_rel_err": rel, "grad_cosine": float(torch.nn.functional.cosine_similarity(g_tree, g_dup, dim=0)),
                 "tolerance": tol, "ok": bool(float(diff.max()) <= tol["logp"] and rel <= tol["grad"])}
        if dtype == torch.float32:
            truth = {"logp": ref.double(), "grad": g_dup}  # kept through the bf16 pass (``del g_dup`` drops the name)
        else:  # bf16 rounds both: the tree must be as close to the fp32 truth as the duplicated rows are
            check.update(bf16_against_fp32(got, ref, g_tree, g_dup, truth))
            check["ok"] = check["ok_vs_fp32"]
        if not cuda:  # the BlockMask on the forward (no FlexAttention backward on CPU)
            model.set_attn_implementation("flex_attention")
            with torch.no_grad():
                flex, _ = tree_logp(model, [tree], device, "flex")
            check["flex_forward_max_abs_diff"] = float((flex[pos[order]] - ref).abs().max())
            check["ok"] = check["ok"] and check["flex_forward_max_abs_diff"] <= tol["logp"]
        out["checks"].append(check)
        del model, g_tree, g_dup, logp_t, adv_t, dup_logps
        free_memory(device)
        # on disk now: a call killed during the next dtype keeps this one's numbers
        ctx.rec.update(tree=out["tree"], checks=out["checks"])
        ctx.save()
        log(f"part a: {name} done (ok {check['ok']})")
    del truth
    out["ok"] = all(c["ok"] for c in out["checks"])
    return out


A_BF16_RATIO = 1.5  # part a, bf16: the tree's error against the fp32 truth may be at most this times the duplicated rows'


def bf16_against_fp32(tree_logp, dup_logp, g_tree, g_dup, truth: dict) -> dict:
    """Part a's bf16 verdict (since 2026-12-04): the tree's log-probs [N] and gradient against the fp32 duplicated
    rows' (``truth``) are at most ``A_BF16_RATIO`` times as far off as the bf16 duplicated rows' own. Two bf16
    computations of one gradient differ by their rounding, which an a-priori absolute tolerance does not bound
    (the first GPU run: 0.0506 against 0.05, cosine 0.9987); a wrong tree (a mask, a position) is off by far more
    than the rounding of the rows it replaces."""
    t_logp, t_grad = truth["logp"], truth["grad"]
    norm = t_grad.norm().clamp_min(1e-30)
    err = {"tree_logp_max_err": float((tree_logp.double() - t_logp).abs().max()),
           "dup_logp_max_err": float((dup_logp.double() - t_logp).abs().max()),
           "tree_grad_rel_err": float((g_tree.float() - t_grad).norm() / norm),
           "dup_grad_rel_err": float((g_dup.float() - t_grad).norm() / norm)}
    ok = (err["tree_logp_max_err"] <= A_BF16_RATIO * err["dup_logp_max_err"]
          and err["tree_grad_rel_err"] <= A_BF16_RATIO * err["dup_grad_rel_err"])
    return {"vs_fp32": err, "ratio_allowed": A_BF16_RATIO, "ok_vs_fp32": bool(ok)}


def _timed(fn, device: str, repeats: int) -> tuple[float, float]:
    """(best seconds of ``repeats`` after one warm-up, peak MiB allocated during the timed calls)."""
    fn()
    sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else float("nan")
    return best, peak


def part_b(ctx: Context) -> dict:
    """fwd+bwd with gradient checkpointing: flex tree (CUDA), dense-mask tree, duplicated rows."""
    shape, device, cuda = ctx.shape, ctx.device, ctx.cuda
    dtype = torch.bfloat16 if cuda else torch.float32
    tree = make_tree(shape, shape["model"]["vocab_size"])
    model = make_model(shape["model"], device, dtype, "sdpa")
    rows = {}

    def run_tree(kind):
        def go():
            model.zero_grad(set_to_none=True)
            logp, adv = tree_logp(model, [tree], device, kind)
            (adv * logp).sum().backward()
        return go

    def run_dup():
        model.zero_grad(set_to_none=True)
        for lp, adv in zip(*duplicated_logp(model, tree, device)):
            (adv.to(lp.dtype) * lp).sum().backward()

    variants = [("duplicated rows", "sdpa", run_dup), ("tree, dense SDPA mask", "sdpa", run_tree("dense"))]
    if cuda:
        variants.insert(0, ("tree, FlexAttention BlockMask", "flex_attention", run_tree("flex")))
    for name, attn, fn in variants:
        model.set_attn_implementation(attn)
        try:
            seconds, peak = _timed(fn, device, ctx.repeats)
            rows[name] = {"seconds": seconds, "peak_mib": peak}
        except torch.OutOfMemoryError as err:
            rows[name] = {"error": f"out of memory: {str(err).splitlines()[0]}"}
        model.zero_grad(set_to_none=True)
        free_memory(device)
        ctx.rec["rows"] = rows  # on disk now: a call killed during the next variant keeps this one's row
        ctx.save()
        log(f"part b: {name} done")
    base = rows.get("duplicated rows", {}).get("seconds")
    for row in rows.values():
        if base and "seconds" in row:
            row["speedup_vs_duplicated"] = base / row["seconds"]
    return {"dtype": str(dtype).split(".")[-1], "tree_length": tree.length, "rows": rows,
            "note": None if cuda else "cpu: FlexAttention has no backward on CPU; flex timed on CUDA only",
            "ok": all("seconds" in r for r in rows.values())}


def count_compiles(fn) -> dict:
    """Run ``fn()`` and count what dynamo did meanwhile, from ``torch._dynamo.utils``: compilations
    (compilation metrics without a failure), recompilations (those with a ``recompile_reason``: a
    cached graph's guard failed), hits of the recompile limit (the frame then runs eagerly), other
    failed compilations, and graph breaks (``counters['graph_break']``)."""
    import torch._dynamo.utils as dyn

    dyn.clear_compilation_metrics()
    breaks0 = sum(int(v) for v in dyn.counters["graph_break"].values())
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    metrics = list(dyn.get_compilation_metrics())
    breaks = sum(int(v) for v in dyn.counters["graph_break"].values()) - breaks0
    reasons = [str(m.recompile_reason) for m in metrics if getattr(m, "recompile_reason", None)]
    failures = [f"{getattr(m, 'fail_type', '')}: {(str(getattr(m, 'fail_reason', '') or '').splitlines() or [''])[0]}"
                for m in metrics if getattr(m, "fail_type", None)]
    limit = [f for f in failures if "recompile limit" in f.lower() or "cache_size_limit" in f.lower()]
    return {"seconds": seconds, "compiles": sum(1 for m in metrics if not getattr(m, "fail_type", None)),
            "recompiles": len(reasons), "graph_breaks": breaks, "recompile_limit_hits": len(limit),
            "compile_failures": len(failures) - len(limit),
            "frames": sorted({str(getattr(m, "co_name", None)) for m in metrics}),
            "recompile_reasons": [r[:300] for r in reasons], "failures": [f[:300] for f in failures]}


def part_c(ctx: Context) -> dict:
    """10 micro-batches of 1-3 trees through FlexAttention, each an eval forward without grad then a
    train forward + backward: dynamo compilations, recompilations, graph breaks, limit hits, NaN."""
    shape, device, cuda, rec = ctx.shape, ctx.device, ctx.cuda, ctx.rec
    dtype = torch.bfloat16 if cuda else torch.float32
    vocab = shape["model"]["vocab_size"]
    batches = shape["batches"]
    import torch._dynamo as dynamo

    dynamo.reset()  # count from an empty cache: parts a and b compiled flex_attention already
    model = make_model(shape["model"], device, dtype, "flex_attention")
    rec.update(rows=[], backward=cuda, shapes_planned=len(batches),
               note=None if cuda else ("cpu: forward only (no FlexAttention backward on CPU: the train run is a "
                                       "train-mode forward without grad); the trees of a micro-batch run one by one "
                                       "(torch's CPU inductor fails to compile the batched FlexAttention forward "
                                       "with a dynamic batch: 'cur_kvSplitSize8 was not declared')"))
    nan = []

    def eval_pass(trees):  # verl's old-log-prob pass: eval mode, no grad
        model.eval()
        with torch.no_grad():
            groups = [trees] if cuda else [[t] for t in trees]
            logp = torch.cat([tree_logp(model, group, device, "flex")[0] for group in groups])
        nan.append(bool(torch.isnan(logp).any()))

    def train_pass(trees):  # the update: train mode (gradient checkpointing), forward + backward
        model.train()
        if cuda:
            model.zero_grad(set_to_none=True)
            logp, adv = tree_logp(model, trees, device, "flex")
            (adv * logp).sum().backward()
            nan.append(bool(torch.isnan(grad_vector(model)).any()))
        else:
            with torch.no_grad():
                logp = torch.cat([tree_logp(model, [t], device, "flex")[0] for t in trees])
        nan.append(bool(torch.isnan(logp).any()))

    slowest = 0.0
    for i, thinks in enumerate(batches):
        if i and ctx.left() < slowest:
            rec["stopped_early"] = (f"budget: {ctx.left():.0f} s left, the slowest micro-batch so far took "
                                    f"{slowest:.0f} s; {i} of {len(batches)} run")
            log(f"part c: {rec['stopped_early']}")
            break
        trees = [make_tree(shape, vocab, think=n, seed=100 * i + j) for j, n in enumerate(thinks)]
        row = {"trees": len(trees), "thinking": list(thinks), "padded_length": max(t.length for t in trees)}
        try:
            row["eval"] = count_compiles(lambda: eval_pass(trees))  # noqa: B023 - called at once
            row["train"] = count_compiles(lambda: train_pass(trees))  # noqa: B023
        except BudgetExceeded:
            rec["stopped_early"] = f"budget: --budget-s ran out in micro-batch {i + 1}; {i} of {len(batches)} run"
            log(f"part c: {rec['stopped_early']}")
            break
        rec["rows"].append(row)
        seconds = row["eval"]["seconds"] + row["train"]["seconds"]
        slowest = max(slowest, seconds)
        log(f"part c: micro-batch {i + 1}/{len(batches)} ({len(trees)} trees, L {row['padded_length']}): recompiles "
            f"eval {row['eval']['recompiles']}, train {row['train']['recompiles']} ({seconds:.1f} s)")
        ctx.save()
    runs = [r[k] for r in rec["rows"] for k in ("eval", "train")]
    total = lambda key, rows=runs: sum(r[key] for r in rows)  # noqa: E731
    rec.update(nan=any(nan), shapes_run=len(rec["rows"]), compiles=total("compiles"), recompiles=total("recompiles"),
               recompiles_eval=total("recompiles", [r["eval"] for r in rec["rows"]]),
               recompiles_train=total("recompiles", [r["train"] for r in rec["rows"]]),
               recompiles_after_shape_3=total("recompiles", runs[6:]),
               graph_breaks=total("graph_breaks"), recompile_limit_hits=total("recompile_limit_hits"),
               compile_failures=total("compile_failures"))
    rec["ok"] = (bool(runs) and not rec["nan"] and rec["graph_breaks"] == 0 and rec["recompile_limit_hits"] == 0
                 and rec["compile_failures"] == 0)
    return rec


@contextmanager
def verl_importable(part: str):
    """Parts d and f import verl inside this: arctl's verl plugin first (its import hooks register
    the tree patch, the policy losses, the CPU platform and engines as verl's modules load; on the
    device arctl is not installed, so no ``verl.plugins`` entry point loads it), then the part's own
    imports. An import error FAILS the part like any other error (named in results.json), never a skip."""
    try:
        import arctl.backends.verl.plugin  # noqa: F401
        yield
    except Exception as err:
        raise RuntimeError(f"verl's code is not importable here: {type(err).__name__}: {err} (carry the wheels "
                           f"docs/gpu.md lists; leave part {part} out on purpose with --parts "
                           f"{''.join(k for k in 'abcdef' if k != part)})") from err


def nested(xs, device: str | None = None) -> torch.Tensor:
    """A jagged nested tensor of the rows ``xs`` (verl's no-padding layout)."""
    return torch.nested.as_nested_tensor([x.to(device) if device else x for x in xs], layout=torch.jagged)


def part_d(ctx: Context) -> dict:
    """verl's patched prepare_model_inputs and its ppo_loss with the arctl policy loss."""
    shape, device, cuda = ctx.shape, ctx.device, ctx.cuda
    with verl_importable("d"):
        import verl.trainer.ppo.core_algos  # noqa: F401 - the policy-loss registry the plugin fills
        import verl.workers.engine.fsdp.transformer_impl as ti
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu
        from verl.workers.config.actor import FSDPActorConfig, PolicyLossConfig
        from verl.workers.utils.losses import ppo_loss

        from arctl.algo.settings import Loss, Objective, Thinking
        from arctl.algo.tree_loss import policy_loss
    attn = "flex_attention" if cuda else "sdpa"
    model = make_model(shape["model"], device, torch.float32, attn)
    trees = [make_tree(shape, shape["model"]["vocab_size"], think=n, seed=s) for s, n in
             enumerate(shape["batch_lengths"][:2])]
    mb = TensorDict({"input_ids": nested([t.input_ids for t in trees], device),
                     "position_ids": nested([t.position_ids for t in trees], device),
                     "tree_cut": nested([t.cut for t in trees], device),
                     "tree_branch_start": nested([t.branch_start for t in trees], device),
                     "temperature": torch.ones(len(trees), device=device)}, batch_size=len(trees))
    tu.assign_non_tensor(mb, use_remove_padding=False)

    class Engine:  # the attributes prepare_model_inputs reads on the padded path
        pad_to_length = False
        module = model

    patched = bool(getattr(ti.FSDPEngineWithLMHead.prepare_model_inputs, "_arctl_tree_patched", False))
    inputs, _ = ti.FSDPEngineWithLMHead.prepare_model_inputs(Engine(), mb)
    mask_type = type(inputs["attention_mask"]).__name__
    with torch.no_grad():
        logits = model(**inputs).logits.float()
        ref = [tree_logp(model, [t], device, "flex" if cuda else "dense")[0] for t in trees]
    diffs, logps, olds, advs = [], [], [], []
    g = torch.Generator().manual_seed(1)
    for b, tree in enumerate(trees):
        lp = torch.log_softmax(logits[b, : tree.length - 1], -1).gather(-1, tree.input_ids[1:, None].to(device))[:, 0]
        trained = tree.loss_mask[1:].to(device)
        diffs.append(float((lp[trained] - ref[b]).abs().max()))
        logps.append(lp[trained].double())
        olds.append((lp[trained] + 0.3 * torch.randn(int(trained.sum()), generator=g).to(device)).double())
        advs.append(tree.advantages[tree.loss_mask].to(device).double())
    del logits
    # verl's ppo_loss on response-shaped tensors: one "response" per tree (its trained tokens)
    n_trees, norm_len = len(trees), 10176
    actor = FSDPActorConfig(strategy="fsdp", ppo_mini_batch_size=n_trees, ppo_micro_batch_size_per_gpu=1,
                            use_dynamic_bsz=False, rollout_n=1, loss_agg_mode="token-sum",
                            loss_scale_factor=n_trees * norm_len, policy_loss=PolicyLossConfig(loss_mode="arctl_drgrpo"))
    one = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    # verl reads the log-prob of response token i at position prompt_len + i - 1 of the full sequence
    full = [torch.cat([lp, torch.zeros(1, dtype=torch.float64, device=device)]) for lp in logps]  # prompt of 1 token
    data = TensorDict({"prompts": one([torch.zeros(1, dtype=torch.long, device=device) for _ in logps]),
                       "responses": one([torch.zeros(len(lp), dtype=torch.long, device=device) for lp in logps]),
                       "response_mask": one([torch.ones(len(lp), dtype=torch.long, device=device) for lp in logps]),
                       "old_log_probs": one(olds), "advantages": one(advs)}, batch_size=n_trees)
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=sum(len(lp) for lp in logps), global_batch_size=n_trees)
    verl_loss, _ = ppo_loss(actor, {"log_probs": one(full)}, data)
    objective = Objective(Thinking(budgets=(1,)), loss=Loss(loss_norm_len=norm_len))
    ours = sum(policy_loss(lp, old, adv, torch.ones_like(lp, dtype=torch.bool), n_trees, objective)
               for lp, old, adv in zip(logps, olds, advs))
    loss_diff = abs(float(verl_loss) - float(ours))
    return {"patched": patched, "mask": mask_type, "logp_max_abs_diff": max(diffs), "verl_loss": float(verl_loss),
            "arctl_loss": float(ours), "loss_abs_diff": loss_diff,
            "ok": patched and max(diffs) <= TOL["float32"]["logp"] and loss_diff <= 1e-9}


# part f: one real verl FSDP actor step, single process -------------------------------------------
VERL_CONFIG_MODULE = "verl.trainer.config"  # verl's Hydra configs: ppo_trainer.yaml, as `python -m verl.trainer.main_ppo`
F_OLD_LOGP_NOISE = 0.1  # std of the noise added to the old log-probs: the ratio is not 1, the clip acts on some tokens
F_LOSS = dict(clip_ratio=0.2, clip_ratio_high=0.28, lr=1e-6, weight_decay=0.01, grad_clip=1.0)  # arctl's optim keys
# update sign agreement (see part_f): tight in fp32; bf16 a-priori (nothing has run on a GPU yet)
F_SIGN_AGREEMENT = {"float32": 0.999, "bfloat16": 0.9}
F_SIGN_SCALE = 1e-3  # elements whose reference gradient is above this fraction of the tensor's largest
SINGLE_PROCESS_ENV = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def single_process_env():
    """The environment verl's Worker reads (Ray sets it for a worker): rank 0 of 1, a local rendezvous.
    Restored afterwards."""
    env = dict(SINGLE_PROCESS_ENV, MASTER_PORT=str(free_port()))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def save_model_dir(model, directory: str) -> int:
    """``model`` as a local Hugging Face model directory (config, safetensors, a small tokenizer: verl's
    HFModelConfig loads one from the model path); returns its size in bytes."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(directory)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(directory)
    return sum(f.stat().st_size for f in Path(directory).iterdir() if f.is_file())


def actor_overrides(model_dir: str, attn: str, cuda: bool, norm_len: int) -> list[str]:
    """verl's actor config for part f: the keys arctl's ``verl_overrides`` sets for the actor (padded rows,
    the tree attention implementation, gradient checkpointing, the paper runs' batching: verl settings'
    defaults, one row per micro-batch and no dynamic batch size (from a review: part f ran verl's token-budget
    path, which the paper runs do not), the ``arctl_drgrpo`` loss with token-sum over the Dr. GRPO constant,
    arctl's optimizer keys) for one tree per mini-batch; on CPU, those of ``verl.device=cpu`` (FSDP2, no
    torch.compile) and fp32 mixed precision (a tight comparison). On CUDA verl's defaults stay: FSDP1, bf16."""
    from arctl.backends.verl.settings import VerlConfig

    paper = VerlConfig()
    a = "actor_rollout_ref"
    ov = [f"{a}.model.path={model_dir}", f"{a}.model.use_remove_padding=false",
          f"{a}.model.enable_gradient_checkpointing=true", f"+{a}.model.override_config.attn_implementation={attn}",
          f"{a}.actor.ppo_mini_batch_size=1", f"{a}.actor.ppo_micro_batch_size_per_gpu={paper.micro_batch_size_per_gpu}",
          f"{a}.actor.use_dynamic_bsz={str(paper.use_dynamic_bsz).lower()}",
          f"{a}.actor.ppo_max_token_len_per_gpu={paper.max_token_len_per_gpu}",
          f"{a}.rollout.log_prob_micro_batch_size_per_gpu={paper.micro_batch_size_per_gpu}", f"{a}.rollout.n=1",
          f"{a}.actor.policy_loss.loss_mode=arctl_drgrpo", f"{a}.actor.loss_agg_mode=token-sum",
          f"{a}.actor.loss_scale_factor={norm_len}", f"{a}.actor.clip_ratio={F_LOSS['clip_ratio']}",
          f"{a}.actor.clip_ratio_low={F_LOSS['clip_ratio']}", f"{a}.actor.clip_ratio_high={F_LOSS['clip_ratio_high']}",
          f"{a}.actor.entropy_coeff=0", f"{a}.actor.use_kl_loss=false", f"{a}.actor.optim.lr={F_LOSS['lr']}",
          f"{a}.actor.optim.weight_decay={F_LOSS['weight_decay']}", f"{a}.actor.optim.clip_grad={F_LOSS['grad_clip']}"]
    if not cuda:
        ov += [f"{a}.actor.strategy=fsdp2", f"{a}.actor.use_torch_compile=false",
               f"{a}.actor.fsdp_config.use_torch_compile=false", "trainer.device=cpu"]
        ov += [f"+{a}.actor.fsdp_config.mixed_precision.{k}=fp32" for k in ("param_dtype", "reduce_dtype", "buffer_dtype")]
    return ov


def compose_verl(overrides: list[str]):
    """verl's ppo_trainer config with ``overrides`` (Hydra's compose API, as verl's main composes it)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=VERL_CONFIG_MODULE, version_base=None):
            return compose(config_name="ppo_trainer", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def tree_batch(tree, **extra):
    """One packed tree as verl's v1 trainer hands it to the actor worker (rows of TransferQueue, no
    padding): prompts, responses, response_mask = loss_mask (1 on thinking and summary tokens, 0 on
    the inserted ones), input_ids, the tree position ids and arctl's tree-mask encoding (tree_cut,
    tree_branch_start: what ArctlPPOTrainer._put_tree_tensors writes); ``extra`` tensors (jagged)."""
    from tensordict import TensorDict

    p = tree.prompt_len
    mask = tree.loss_mask[p:].long()
    rows = {"prompts": tree.input_ids[:p], "responses": tree.input_ids[p:], "response_mask": mask, "loss_mask": mask,
            "input_ids": tree.input_ids, "position_ids": tree.position_ids, "tree_cut": tree.cut,
            "tree_branch_start": tree.branch_start, **extra}
    return TensorDict({k: nested([v]) for k, v in rows.items()}, batch_size=1)


def param_snapshot(engine) -> dict[str, torch.Tensor]:
    """The actor's full parameters by Hugging Face name, fp32 on the host, read through the engine's
    own ``get_per_tensor_param`` (what verl sends to the rollout: FSDP1 and FSDP2 alike)."""
    params, _ = engine.get_per_tensor_param()
    return {name: t.detach().to("cpu", torch.float32, copy=True) for name, t in params}


BLOCK_MASK_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
                     "full_q_num_blocks", "full_q_indices")


def load_reference(model_dir: str, device: str, attn: str):
    """The saved model directory loaded as verl's actor loads it (``from_pretrained`` in fp32, which computes
    the rotary frequencies afresh), on ``device``, gradient checkpointing on, in train mode (as make_model)."""
    from transformers import Qwen2ForCausalLM

    model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn).to(device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    return model


def rope_buffers_diff(model, buffers: dict[str, torch.Tensor] | None = None) -> float:
    """Max |difference| between the rotary embedding's buffers (``inv_freq``, ``original_inv_freq``: no
    checkpoint holds them) of ``model`` (or ``buffers``, by name) and those of a fresh rotary embedding built
    from ``model``'s config in fp32: 0.0 unless a dtype cast rounded them."""
    rotary = model.model.rotary_emb
    fresh = dict(type(rotary)(config=model.config).named_buffers())
    got = buffers if buffers is not None else {f"model.rotary_emb.{n}": b for n, b in rotary.named_buffers()}
    # a buffer ``got`` lacks (verl's model may hold ``inv_freq`` only) is not compared; NaN when none is
    diffs = [float((mine.detach().cpu().double() - b.double()).abs().max()) for n, b in fresh.items()
             if (mine := got.get(f"model.rotary_emb.{n}")) is not None]
    return max(diffs) if diffs else float("nan")


CONFIG_NOT_COMPARED = ("_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype",
                       "_attn_implementation", "attn_implementation", "_attn_implementation_autoset", "use_cache")


def loaded_vs_saved(engine, model, params: dict[str, torch.Tensor]) -> dict:
    """What verl's engine built from the saved model directory against the model the suite saved: its
    parameters (``params``, :func:`param_snapshot` before any update) element for element, its rotary
    embedding's buffers (``inv_freq``: no checkpoint holds them) against fresh fp32 ones
    (:func:`rope_buffers_diff`), and its config, key for key."""
    saved = {n: t.detach().to("cpu", torch.float32) for n, t in model.named_parameters()}
    differing = {n: float((params[n] - saved[n]).abs().max()) for n in saved if n in params
                 and (params[n].shape != saved[n].shape or not torch.equal(params[n], saved[n]))}
    strip = lambda n: n.replace("_fsdp_wrapped_module.", "").replace("_checkpoint_wrapped_module.", "")  # noqa: E731
    built = {strip(n): b.detach().to("cpu", torch.float32) for n, b in engine.module.named_buffers()}
    rope = {n: b for n, b in built.items() if n.startswith("model.rotary_emb.")}
    buffers = {"rotary embedding vs fresh fp32": rope_buffers_diff(model, rope) if rope else None}
    inner = getattr(engine.module, "module", engine.module)
    mine, theirs = model.config.to_dict(), getattr(inner, "config", None)
    theirs = theirs.to_dict() if theirs is not None else {}
    config = {k: [mine.get(k), theirs.get(k)] for k in sorted(set(mine) | set(theirs))
              if k not in CONFIG_NOT_COMPARED and mine.get(k) != theirs.get(k)}
    return {"parameters": len(saved), "parameters_missing": sorted(set(saved) - set(params)),
            "parameters_differing": differing, "buffers_max_abs_diff": buffers, "config_differing": config}


def same_tree_mask(got, expected) -> bool:
    """Whether the attention mask verl's forward got is the suite's tree mask: the dense boolean
    [B, 1, L, L] mask element for element, or a BlockMask with the same sequence lengths and block
    tables (FlexAttention)."""
    if isinstance(expected, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.equal(
            got.bool().cpu(), expected.bool().cpu())
    if type(got).__name__ != "BlockMask" or tuple(got.seq_lengths) != tuple(expected.seq_lengths):
        return False
    for field in BLOCK_MASK_FIELDS:
        x, y = getattr(got, field, None), getattr(expected, field, None)
        if (x is None) != (y is None) or (x is not None and not torch.equal(x.cpu(), y.cpu())):
            return False
    return True


def peak_rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # Linux: KiB


F_POSITION_BUCKET = 2048  # positions per row of part f's log-prob difference profile


def watch_model_inputs(root, attn: str) -> dict:
    """Record what verl's first forward (the old-log-prob pass; the update's mask is checked by
    :func:`same_tree_mask` only) hands the decoder stack (input ids, position ids, attention mask:
    a forward pre-hook on the inner ``*Model`` module) and what type of mask reaches each call of the
    attention function ``attn`` (transformers' ``ALL_ATTENTION_FUNCTIONS``). ``seen["stop"]()`` removes
    both and returns the report (without the tensors, which stay in ``seen`` for
    :func:`replay_model_inputs`)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as functions

    seen: dict = {"attention_masks": {}, "forwards": 0}
    inner = [m for m in root.modules() if type(m).__name__.endswith("Model") and hasattr(m, "layers")]

    def pre_hook(module, args, kwargs):
        seen["forwards"] += 1
        if "input_ids" not in seen:
            ids = kwargs.get("input_ids", args[0] if args else None)
            seen.update(input_ids=ids.detach().clone() if ids is not None else None,
                        position_ids=(kwargs.get("position_ids").detach().clone()
                                      if kwargs.get("position_ids") is not None else None),
                        attention_mask=kwargs.get("attention_mask"), kwargs=sorted(kwargs))

    handles = [m.register_forward_pre_hook(pre_hook, with_kwargs=True) for m in inner[:1]]
    # transformers' AttentionInterface keeps per-instance overrides in ``_local_mapping`` (5.9 and 5.17 alike):
    # an override set here is removed again by ``del``, which touches only that mapping
    had = attn in functions._local_mapping
    previous = functions._local_mapping.get(attn)
    original = functions[attn]

    def counting(module, query, key, value, attention_mask, *args, **kwargs):
        kind = type(attention_mask).__name__
        seen["attention_masks"][kind] = seen["attention_masks"].get(kind, 0) + 1
        seen.setdefault("query_shape", list(query.shape))
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    functions[attn] = counting

    def stop() -> dict:
        for h in handles:
            h.remove()
        if had:
            functions[attn] = previous
        else:
            del functions[attn]
        mask = seen.get("attention_mask")
        return {"inner_module": type(inner[0]).__name__ if inner else None, "forwards": seen["forwards"],
                "kwargs": seen.get("kwargs"), "mask_type": type(mask).__name__,
                "input_ids_shape": list(seen["input_ids"].shape) if seen.get("input_ids") is not None else None,
                "position_ids_shape": list(seen["position_ids"].shape) if seen.get("position_ids") is not None else None,
                "attention_calls_by_mask_type": dict(seen["attention_masks"]), "query_shape": seen.get("query_shape")}

    seen["stop"] = stop
    return seen


def replay_model_inputs(model, seen: dict | None, trees, device: str, dtype) -> torch.Tensor | None:
    """The reference model's trained-token log-probs on the inputs verl's forward handed the model
    (``seen`` from :func:`watch_model_inputs`), under ``dtype`` autocast, no grad; and, into
    ``seen["compared"]``, how those inputs differ from the suite's own (ids, positions, the mask element
    for element: a BlockMask's ``mask_mod`` evaluated on every (q, kv) pair). None where none was seen."""
    if not seen or seen.get("input_ids") is None:
        return None
    s = stacked_on(trees, device)  # the suite's own inputs; their mask is compared below
    ids, pos, got = seen["input_ids"].to(device), seen.get("position_ids"), seen.get("attention_mask")
    cmp = {"input_ids_equal": bool(ids.shape == s["input_ids"].shape and torch.equal(ids, s["input_ids"]))}
    if pos is not None:
        pos = pos.to(device)
        same = pos.shape == s["position_ids"].shape
        cmp["position_ids_equal"] = bool(same and torch.equal(pos, s["position_ids"]))
        cmp["position_ids_differing"] = int((pos != s["position_ids"]).sum()) if same else None
    expected = dense_tree_mask(s["cut"], s["branch_start"])[0]
    length = expected.shape[-1]
    if type(got).__name__ == "BlockMask":
        q = torch.arange(length, device=device)
        dense = got.mask_mod(0, 0, q[:, None], q[None, :]).to(device)
        cmp["mask_mod_elements_differing"] = int((dense != expected.to(device)).sum())
        cmp["mask_seq_lengths"] = list(got.seq_lengths)
    elif isinstance(got, torch.Tensor):
        g = got.bool().reshape(-1, *got.shape[-2:])[0]
        cmp["mask_elements_differing"] = int((g != expected.to(g.device)).sum()) if g.shape == expected.shape else None
    seen["compared"] = cmp
    if not cmp["input_ids_equal"]:
        return None
    with torch.no_grad(), torch.autocast(device_type=device.split(":")[0], dtype=dtype, enabled=dtype is not None):
        return token_logp(model, ids, pos if pos is not None else s["position_ids"], got, s["predecessor"],
                          s["loss_mask"]).double().cpu()


def logp_diff_stats(diff: torch.Tensor, positions: torch.Tensor) -> dict:
    """Max, mean, 99th percentile of |diff| [N] over trained tokens, the position of the largest, and the
    max and mean per bucket of ``F_POSITION_BUCKET`` positions (``positions`` [N]: each token's position id):
    an error that grows with the position points at the rotary embedding, not at bf16's rounding."""
    a = diff.abs().double()
    buckets = {}
    for lo in range(0, int(positions.max()) + 1, F_POSITION_BUCKET):
        sel = (positions >= lo) & (positions < lo + F_POSITION_BUCKET)
        if sel.any():
            buckets[f"{lo}-{lo + F_POSITION_BUCKET - 1}"] = {"n": int(sel.sum()), "max": float(a[sel].max()),
                                                             "mean": float(a[sel].mean())}
    i = int(a.argmax())
    return {"max": float(a[i]), "mean": float(a.mean()), "p99": float(a.quantile(0.99)), "argmax_position": int(positions[i]),
            "by_position": buckets}


def f_checks(r: dict) -> list[dict]:
    """Part f's verdict from its numbers ``r`` (``compute_dtype`` float32 or bfloat16): no NaN; every
    forward of verl's engine got the suite's tree mask (exact: bf16's log-prob tolerance alone would not
    see a missing mask on a random model); the parameters changed; verl's loss is arctl's loss of verl's own log-probs; verl's log-probs (old-log-
    prob pass and update) are the tree's (the suite's own forward, part a's tolerance for the dtype);
    verl's gradient norm is that of arctl's loss on the reference (part a's gradient tolerance); the
    AdamW step moved every parameter with a clear reference gradient against it (first Adam step:
    -lr * sign(g))."""
    tol = TOL[r["compute_dtype"]]
    p = r["params"]
    finite = all(math.isfinite(x) for x in (r["loss"], r["arctl_loss"], r["grad_norm"], r["grad_norm_reference"],
                                             *r["logp_max_abs_diff"].values()))
    m = r["tree_mask"]
    checks = [
        ("no NaN or inf (loss, grad norm, log-probs, parameters)", finite and not r["nan"], "none", finite and not r["nan"]),
        ("verl's forwards got the tree mask (old-log-prob pass, update)", f"{m['matching']} of {m['forwards']}",
         "every one, >= 2", m["forwards"] >= 2 and m["matching"] == m["forwards"]),
        ("parameters changed (elements)", p["changed"], "> 0", p["changed"] > 0),
        # the suite's own reference, checked: a bf16 cast rounds the rotary frequencies, which verl's fp32 load does not
        ("the reference's rotary frequencies vs fresh fp32 ones: max abs diff", r["reference_rope_max_abs_diff"], 0.0,
         r["reference_rope_max_abs_diff"] == 0.0),
        ("verl loss vs arctl loss of verl's log-probs: abs diff", r["loss_abs_diff"], 1e-6 * max(1.0, abs(r["arctl_loss"])),
         r["loss_abs_diff"] <= 1e-6 * max(1.0, abs(r["arctl_loss"]))),
    ]
    for name, diff in r["logp_max_abs_diff"].items():
        checks.append((f"verl log-probs vs the tree's ({name}): max abs diff", diff, tol["logp"], diff <= tol["logp"]))
    checks.append(("grad norm vs the reference: relative diff", r["grad_norm_rel_diff"], tol["grad"],
                   r["grad_norm_rel_diff"] <= tol["grad"]))
    need = F_SIGN_AGREEMENT[r["compute_dtype"]]
    checks.append(("update against the reference gradient (sign agreement)", p["sign_agreement"], f">= {need}",
                   p["sign_checked"] > 0 and p["sign_agreement"] >= need))
    return [{"check": c, "value": v, "tolerance": t, "ok": bool(ok)} for c, v, t, ok in checks]


def part_f(ctx: Context) -> dict:
    """One real single-process verl FSDP actor step on one packed tree: verl's ActorRolloutRefWorker
    (role actor) builds its FSDP engine from a saved random-weight model directory, runs the old-log-prob
    pass and the update (forward, arctl_drgrpo loss, backward, AdamW step) with arctl's tree mask; the
    numbers are checked against the suite's own tree forward and arctl.algo.tree_loss."""
    shape, device, cuda, rec = ctx.shape, ctx.device, ctx.cuda, ctx.rec
    with verl_importable("f"):
        import torch.distributed as dist
        import verl.workers.engine.fsdp.transformer_impl as ti
        from verl.plugin.platform.platform_manager import get_platform
        from verl.utils import tensordict_utils as tu
        from verl.workers.engine_workers import ActorRolloutRefWorker
        from verl.workers.utils.padding import response_from_nested

        from arctl.algo.settings import Loss, Objective, Thinking
        from arctl.algo.tree_loss import policy_loss
    platform_name = get_platform().device_name
    if platform_name != ("cuda" if cuda else "cpu"):
        raise RuntimeError(f"verl's platform is {platform_name!r}, part f on {device} needs "
                           f"{'cuda' if cuda else 'cpu'!r} (the suite sets VERL_PLATFORM=cpu for --device cpu before "
                           "verl is imported)")
    spec = shape["model"]
    # no FlexAttention backward on a CPU; --f-mask dense on CUDA runs verl's SDPA with the dense tree mask
    layout = ctx.f_mask or ("flex" if cuda else "dense")
    if layout == "flex" and not cuda:
        raise RuntimeError("part f with --f-mask flex needs CUDA (FlexAttention has no backward on a CPU)")
    attn = "flex_attention" if layout == "flex" else "sdpa"
    compute = "bfloat16" if cuda else "float32"
    tree = make_tree(shape, spec["vocab_size"])
    p = tree.prompt_len
    assert not tree.loss_mask[:p].any()  # trained tokens are response tokens, in the same order
    trained = tree.loss_mask[p:]
    norm_len = tree.length  # the Dr. GRPO constant of one tree: C = 1 x norm_len
    objective = Objective(Thinking(budgets=(1,)), loss=Loss(clip_ratio=F_LOSS["clip_ratio"],
                                                            clip_ratio_high=F_LOSS["clip_ratio_high"],
                                                            loss_norm_len=norm_len))
    seconds, peak = {}, {}
    rec.update(tree={"length": tree.length, "prompt": p, "response": tree.length - p, "trained_tokens": int(trained.sum()),
                     "branches": len(tree.branches)}, compute_dtype=compute, mask=layout, seconds=seconds,
               peak_gib=peak if cuda else None,
               peak_method=("torch.cuda.max_memory_allocated, reset before each phase" if cuda else
                            "cpu: not measured per phase (max_memory_allocated is CUDA only); peak_rss_gib is the "
                            "process's peak resident set so far (getrusage), earlier parts included"))

    def phase(name: str):
        rec["phase"] = name
        ctx.save()
        log(f"part f: {name}")
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        return time.perf_counter()

    def done(name: str, t0: float) -> None:
        if cuda:
            torch.cuda.synchronize()
            peak[name] = torch.cuda.max_memory_allocated() / GIB
        seconds[name] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="arctl-suite-f-") as model_dir:
        t0 = phase("model directory")
        # saved as R1-Distill ships (bf16), on a CPU too: verl loads it in fp32 (its actor's weights are these
        # values exactly) and so does the reference, from the directory (see "the reference" below)
        model = make_model(spec, device, torch.bfloat16, attn, tie=False)
        size = save_model_dir(model, model_dir)
        model.to("cpu")
        free_memory(device)
        done("model directory", t0)
        params_n = sum(x.numel() for x in model.parameters())
        rec["model"] = {**spec, "tie_word_embeddings": False, "parameters": params_n,
                        "saved_dtype": str(next(model.parameters()).dtype).split(".")[-1], "directory_mib": size / 2**20}
        overrides = actor_overrides(model_dir, attn, cuda, norm_len) + list(ctx.f_overrides)
        rec["overrides"] = overrides
        if ctx.f_mask or ctx.f_overrides:
            rec["variant"] = {"mask": layout, "overrides": list(ctx.f_overrides)}
        cfg = compose_verl(overrides)
        worker = engine = None
        seen: dict = {}  # watch_model_inputs' record, once the engine exists
        recorded, masks = {}, []
        try:
            with single_process_env():
                t0 = phase("engine init")
                worker = ActorRolloutRefWorker(config=cfg.actor_rollout_ref, role="actor")  # as Ray would build it
                worker.init_model()  # process group (verl's own init), FSDP engine, optimizer, loss fn
                done("engine init", t0)
                engine = worker.actor.engine
                expected_mask = tree_inputs([tree], device, layout)[1]
                prepare = engine.prepare_model_inputs  # arctl's patched method, bound

                def checking_inputs(micro_batch):  # what verl's forward_step hands the model, compared as it goes
                    model_inputs, output_args = prepare(micro_batch=micro_batch)
                    masks.append(same_tree_mask(model_inputs.get("attention_mask"), expected_mask))
                    return model_inputs, output_args

                engine.prepare_model_inputs = checking_inputs
                seen = watch_model_inputs(engine.module, attn)  # what reaches the model and its attention
                rec["engine"] = {
                    "worker": "ActorRolloutRefWorker(role='actor')", "engine": type(engine).__name__,
                    "module": type(engine.module).__name__, "strategy": engine.engine_config.strategy,
                    "platform": platform_name, "backend": str(dist.get_backend()), "world_size": dist.get_world_size(),
                    "param_dtype": str(engine._autocast_dtype).split(".")[-1], "attn_implementation": attn,
                    "tree_patch": bool(getattr(ti.FSDPEngineWithLMHead.prepare_model_inputs, "_arctl_tree_patched", False)),
                    "optimizer": type(engine.optimizer).__name__}

                # verl's old-log-prob pass (eval, no grad), as the trainer asks for it; old log-probs as it stores them
                t0 = phase("old-log-prob pass")
                data = tree_batch(tree)
                tu.assign_non_tensor(data, calculate_entropy=True, compute_loss=False, temperature=1.0)
                out = worker.compute_log_prob(data)
                done("old-log-prob pass", t0)
                verl_old = response_from_nested(out["log_probs"], data["response_mask"]).values().float().cpu()
                g = torch.Generator().manual_seed(1)
                old = verl_old + F_OLD_LOGP_NOISE * torch.randn(verl_old.shape, generator=g)
                adv = tree.advantages[p:].float()

                t0 = phase("parameters before")
                before = param_snapshot(engine)
                try:  # a diagnostic: its failure is recorded, the update and the checks go on
                    rec["as_loaded"] = loaded_vs_saved(engine, model, before)
                except Exception as err:  # noqa: BLE001
                    rec["as_loaded"] = {"error": f"{type(err).__name__}: {err}"}
                    log(f"part f: as_loaded diagnostic failed ({rec['as_loaded']['error']}); going on")
                done("parameters before", t0)
                data = tree_batch(tree, old_log_probs=old, advantages=adv)
                tu.assign_non_tensor(data, calculate_entropy=False, distillation_use_topk=False, distillation_only=False,
                                     global_batch_size=1, mini_batch_size=1, epochs=1, seed=42,
                                     dataloader_kwargs={"shuffle": False}, temperature=1.0)
                loss_fn = worker.actor.loss_fn  # partial(ppo_loss, config=actor config), as init_model built it

                def recording_loss(model_output, data, dp_group=None):
                    loss, metrics = loss_fn(model_output=model_output, data=data, dp_group=dp_group)
                    recorded["log_probs"] = model_output["log_probs"].detach().float().cpu()
                    recorded["dtype"] = str(model_output["log_probs"].dtype).split(".")[-1]
                    recorded["response_mask"] = data["response_mask"].cpu()
                    return loss, metrics

                worker.set_loss_fn(recording_loss)
                t0 = phase("update")
                metrics = tu.get(worker.update_actor(data), "metrics")
                done("update", t0)
                t0 = phase("parameters after")
                after = param_snapshot(engine)
                done("parameters after", t0)
        finally:
            seen_report = seen.pop("stop")() if "stop" in seen else None
            # the bound ``prepare`` (and ``checking_inputs``, which holds it) keep the engine, its FSDP module and
            # optimizer state alive: dropped here, or the reference phases' peak counts them
            prepare = checking_inputs = None
            del worker, engine
            if dist.is_initialized():
                dist.destroy_process_group()
            free_memory(device)
        rec["peak_rss_gib"] = peak_rss_gib()
        rec["inputs_seen"] = seen_report  # saved before the reference phases, which may run out of memory or time
        first = lambda key: float(metrics[key][0] if isinstance(metrics[key], list) else metrics[key])  # noqa: E731
        rec["verl_metrics"] = {k: first(k) for k in ("loss", "grad_norm", "lr", "actor/pg_clipfrac", "actor/ppo_kl",
                                                     "perf/max_memory_allocated_gb") if k in metrics}

        # the reference: the suite's own tree forward of the saved model directory loaded as verl's actor loads it
        # (fp32), arctl's loss, its gradient. Not ``model`` cast back to fp32: its bf16 cast rounded the rotary
        # embedding's inv_freq (a buffer no checkpoint holds; verl's load computes it afresh in fp32), and the
        # first GPU run (2026-12-04) compared verl with that rounded reference: log-probs 0.30 apart (a review)
        t0 = phase("reference")
        model = None
        free_memory(device)
        ref = load_reference(model_dir, device, attn)
        rec["reference_rope_max_abs_diff"] = rope_buffers_diff(ref)  # 0.0: the exact frequencies
        ref.zero_grad(set_to_none=True)
        ref_logp, _ = tree_logp(ref, [tree], device, layout)
        old_t = old[trained].double().to(device)
        adv_t = adv[trained].double().to(device)
        every = torch.ones_like(old_t, dtype=torch.bool)
        ref_loss = policy_loss(ref_logp.double(), old_t, adv_t, every, 1, objective)
        ref_loss.backward()
        ref_loss = float(ref_loss.detach())
        grads = {n: x.grad for n, x in ref.named_parameters() if x.grad is not None}
        ref_norm = float(torch.sqrt(sum((x.double() ** 2).sum() for x in grads.values())))
        ref_logp = ref_logp.detach().double().cpu()
        done("reference", t0)
        low_logp = low_grads = None
        if compute != "float32":
            # the same reference in verl's precision: bf16 parameters (exact: the weights were saved bf16),
            # fp32 buffers, bf16 autocast, as verl's FSDP mixed precision computes. It tells what bf16 alone
            # does to log-probs and gradient signs on this model and tree, beside verl vs the fp32 reference.
            t0 = phase("reference, verl's precision")
            ref.zero_grad(set_to_none=True)  # the fp32 gradients stay in ``grads``
            for x in ref.parameters():
                x.data = x.data.to(getattr(torch, compute))
            with torch.autocast(device_type=device.split(":")[0], dtype=getattr(torch, compute)):
                low_logp, _ = tree_logp(ref, [tree], device, layout)
            low_loss = policy_loss(low_logp.double(), old_t, adv_t, every, 1, objective)
            low_loss.backward()
            low_grads = {n: x.grad for n, x in ref.named_parameters() if x.grad is not None}
            low_logp = low_logp.detach().double().cpu()
            done("reference, verl's precision", t0)
        rec["peak_rss_gib_after_reference"] = peak_rss_gib()  # the reference is loaded from the directory (host memory)
        replay_logp = replay_model_inputs(ref, seen, [tree], device,
                                          None if compute == "float32" else getattr(torch, compute))
        rec["inputs_compared"] = seen.get("compared")

    update_logp = response_from_nested(recorded["log_probs"], recorded["response_mask"]).values()[trained].double()
    arctl_loss = float(policy_loss(update_logp, old_t.cpu(), adv_t.cpu(), every.cpu(), 1, objective))
    changed = total = agree = checked = 0
    max_update, nan = 0.0, False
    low_sign = dict(update_agree=0, reference_agree=0, dot=0.0, low_sq=0.0)  # against the reference in verl's precision
    with torch.no_grad():
        for name, b in before.items():
            a = after[name]
            nan = nan or not bool(torch.isfinite(a).all())
            d = a - b
            changed += int((d != 0).sum())
            total += d.numel()
            max_update = max(max_update, float(d.abs().max()))
            grad = grads.get(name)
            if grad is not None:
                grad = grad.float()
                clear = grad.abs() > F_SIGN_SCALE * grad.abs().max()
                d = d.to(grad.device)
                agree += int((torch.sign(d[clear]) == -torch.sign(grad[clear])).sum())
                checked += int(clear.sum())
                low = low_grads.get(name) if low_grads is not None else None
                if low is not None:  # on the fp32 reference's clear elements, as the check above
                    low = low.float()
                    low_sign["update_agree"] += int((torch.sign(d[clear]) == -torch.sign(low[clear])).sum())
                    low_sign["reference_agree"] += int((torch.sign(low[clear]) == torch.sign(grad[clear])).sum())
                    low_sign["dot"] += float((low.double() * grad.double()).sum())
                    low_sign["low_sq"] += float((low.double() ** 2).sum())
    del before, after, grads, low_grads, ref
    free_memory(device)
    nan = nan or bool(torch.isnan(verl_old).any() or torch.isnan(update_logp).any())
    loss, grad_norm = rec["verl_metrics"]["loss"], rec["verl_metrics"]["grad_norm"]
    verl_old_t = verl_old[trained].double()
    rec.update(
        loss=loss, arctl_loss=arctl_loss, loss_abs_diff=abs(loss - arctl_loss), reference_loss=ref_loss,
        loss_vs_reference_rel=abs(loss - ref_loss) / max(abs(ref_loss), 1e-12),
        grad_norm=grad_norm, grad_norm_reference=ref_norm,
        grad_norm_rel_diff=abs(grad_norm - ref_norm) / max(ref_norm, 1e-30),
        logp_max_abs_diff={"old-log-prob pass": float((verl_old_t - ref_logp).abs().max()),
                           "update": float((update_logp - ref_logp).abs().max())},
        params={"total": total, "changed": changed, "changed_fraction": changed / max(total, 1),
                "max_abs_update": max_update, "lr": F_LOSS["lr"], "sign_checked": checked,
                "sign_agreement": agree / max(checked, 1)},
        nan=nan, old_logp_noise=F_OLD_LOGP_NOISE, verl_logp_dtype=recorded["dtype"],
        tree_mask={"forwards": len(masks), "matching": sum(masks)})
    positions = stack_trees([tree])["position_ids"][0, p:][trained]
    diffs = {"verl update vs fp32 reference": update_logp - ref_logp, "verl old-log-prob vs fp32 reference": verl_old_t - ref_logp}
    if replay_logp is not None:
        base = low_logp if low_logp is not None else ref_logp
        diffs.update({f"{compute} reference on verl's model inputs vs on the suite's": replay_logp - base,
                      f"verl update vs {compute} reference on verl's model inputs": update_logp - replay_logp})
    if low_logp is not None:
        diffs.update({f"{compute} reference vs fp32 reference": low_logp - ref_logp,
                      f"verl update vs {compute} reference": update_logp - low_logp})
        low_norm = math.sqrt(low_sign["low_sq"])
        rec["precision_reference"] = {
            "dtype": compute, "grad_norm": low_norm, "grad_norm_rel_diff_vs_fp32": abs(low_norm - ref_norm) / max(ref_norm, 1e-30),
            "grad_cosine_vs_fp32": low_sign["dot"] / max(low_norm * ref_norm, 1e-30),
            "grad_sign_agreement_vs_fp32": low_sign["reference_agree"] / max(checked, 1),
            "verl_grad_norm_rel_diff": abs(grad_norm - low_norm) / max(low_norm, 1e-30),
            "update_sign_agreement": low_sign["update_agree"] / max(checked, 1)}
    rec["logp_diff"] = {name: logp_diff_stats(d, positions) for name, d in diffs.items()}
    if cuda:
        rec["device_total_gib"] = torch.cuda.get_device_properties(device).total_memory / GIB
    rec["checks"] = f_checks(rec)
    rec["ok"] = all(c["ok"] for c in rec["checks"])
    if not rec["ok"]:
        rec["error"] = "checks off: " + "; ".join(f"{c['check']} = {c['value']}" for c in rec["checks"] if not c["ok"])
    rec.pop("phase", None)
    return rec


class TensorBytes:
    """CPU stand-in for ``max_memory_allocated``: the peak of the bytes of tensor storages created
    while it is active and still alive (a TorchDispatchMode sees every op's outputs; a weakref on
    each new storage sees it freed). Storages that exist before are not new bytes: pass them to
    :meth:`exclude` (the weights: every linear returns a view of its weight, ``t()``, which would
    otherwise count it again)."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker.note(out)
                return out

        self.mode, self.live, self.peak, self._seen = Mode(), 0, 0, {}

    def note(self, out) -> None:
        import weakref

        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            n, key = storage.nbytes(), storage.data_ptr()
            if not n or key in self._seen:
                continue
            self.live += n
            self.peak = max(self.peak, self.live)
            self._seen[key] = weakref.finalize(storage, self._free, key, n)

    def _free(self, key, n) -> None:
        self.live -= n
        self._seen.pop(key, None)

    def exclude(self, tensors) -> None:
        """Storages that existed before counting started (the weights)."""
        for t in tensors:
            self._seen[t.untyped_storage().data_ptr()] = None

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


def verl_rowwise_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """verl 0.9.1 ``logprobs_from_logits_v2`` for bf16 logits [N, V] (its path without flash-attn's
    cross-entropy): log_softmax row by row, the label's entry kept."""
    return torch.stack([torch.log_softmax(row, -1).gather(-1, y[None])[0] for row, y in zip(logits, labels)])


def logprobs_full(model, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """As verl's padded (no remove-padding) path: the model's [B, L, V] logits, the valid rows
    concatenated into [N, V] (``torch.cat`` of the unbound rows: a copy), log_softmax row by row."""
    logits = model(input_ids=ids).logits
    flat = torch.cat(list(logits.unbind()))
    return verl_rowwise_logprobs(flat, labels)


def logprobs_chunked(model, ids: torch.Tensor, labels: torch.Tensor, chunk: int) -> torch.Tensor:
    """The same log-probs without the full logits: the output layer and a float32 log_softmax over
    ``chunk`` tokens at a time; with grad, each chunk is recomputed in backward (checkpointed)."""
    hidden = model.model(input_ids=ids).last_hidden_state.flatten(0, 1)

    def one(h, y):
        return torch.log_softmax(model.lm_head(h).float(), -1).gather(-1, y[:, None])[:, 0]

    out = []
    for k in range(0, hidden.shape[0], chunk):
        h, y = hidden[k:k + chunk], labels[k:k + chunk]
        out.append(torch.utils.checkpoint.checkpoint(one, h, y, use_reentrant=False) if torch.is_grad_enabled()
                   else one(h, y))
    return torch.cat(out)


def logprob_pass(model, pass_: str, variant: str, ids, labels, adv, chunk: int) -> None:
    """One measured pass: ``old-log-prob`` (eval mode, no grad) or ``update`` (train mode with
    gradient checkpointing, forward + backward of the mean of A * logp); ``full`` or ``chunked``."""
    def compute():
        return logprobs_full(model, ids, labels) if variant == "full" else logprobs_chunked(model, ids, labels, chunk)

    if pass_ == "old-log-prob":
        model.eval()
        with torch.no_grad():
            compute()
    else:
        model.train()
        (compute().float() * adv).sum().div(len(adv)).backward()


def part_e(ctx: Context) -> dict:
    """Peak memory of per-token log-probs of N tokens, full logits vs chunked, old-log-prob pass and
    update, for a Qwen2-1.5B-shaped model with untied embeddings; + optimizer-side bytes; fits."""
    device, cuda, mem, rec = ctx.device, ctx.cuda, ctx.shape["memory"], ctx.rec
    model = make_model(mem["model"], device, torch.bfloat16, "sdpa", tie=False)
    params = sum(p.numel() for p in model.parameters())
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    vocab = mem["model"]["vocab_size"]
    rec.update(model={**mem["model"], "tie_word_embeddings": False, "parameters": params, "dtype": "bfloat16",
                      "weights_gib": weights / GIB},
               chunk=mem["chunk"], state_bytes_per_param=STATE_BYTES, fits_gib=FITS_GIB,
               method=("torch.cuda.max_memory_allocated after reset_peak_memory_stats, the weights included" if cuda
                       else "cpu: bytes of tensors live during the pass, counted by a TorchDispatchMode, + the "
                            "weights; not an allocator peak (max_memory_allocated is CUDA only)"),
               rows=[])
    if cuda:
        rec["device_total_gib"] = torch.cuda.get_device_properties(device).total_memory / GIB
    g = torch.Generator().manual_seed(0)
    plan = [(n, p, v) for n in mem["tokens"] for p in ("old-log-prob", "update") for v in ("full", "chunked")]
    slowest = 0.0
    for i, (n, pass_, variant) in enumerate(plan):
        if i and ctx.left() < slowest:
            rec["stopped_early"] = (f"budget: {ctx.left():.0f} s left, the slowest measurement so far took "
                                    f"{slowest:.0f} s; {i} of {len(plan)} run")
            log(f"part e: {rec['stopped_early']}")
            break
        length = min(mem["row"], n)
        ids = torch.randint(3, vocab, (n // length, length), generator=g).to(device)
        labels = ids.roll(-1, dims=1).flatten()
        adv = torch.randn(labels.numel(), generator=g).to(device)
        row = {"pass": pass_, "variant": variant, "tokens": int(ids.numel()), "rows": int(ids.shape[0]),
               "row_length": length, "logits_gib": ids.numel() * vocab * 2 / GIB}
        model.zero_grad(set_to_none=True)
        free_memory(device)
        t0 = time.perf_counter()
        try:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                logprob_pass(model, pass_, variant, ids, labels, adv, mem["chunk"])
                torch.cuda.synchronize()
                row["peak_gib"] = torch.cuda.max_memory_allocated() / GIB
                row["reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
            else:
                with TensorBytes() as tally:
                    tally.exclude(model.parameters())  # counted once, as `weights`
                    logprob_pass(model, pass_, variant, ids, labels, adv, mem["chunk"])
                row["peak_gib"] = (weights + tally.peak) / GIB
        except torch.OutOfMemoryError as err:
            row["error"] = f"out of memory: {str(err).splitlines()[0][:200]}"
            row["peak_gib"] = None
        except BudgetExceeded:
            rec["stopped_early"] = f"budget: --budget-s ran out in measurement {i + 1} of {len(plan)}"
            log(f"part e: {rec['stopped_early']}")
            break
        finally:
            model.zero_grad(set_to_none=True)
            free_memory(device)
        row["seconds"] = time.perf_counter() - t0
        slowest = max(slowest, row["seconds"])
        row["states_gib"] = params * STATE_BYTES[pass_] / GIB
        if row["peak_gib"] is not None:
            row["single_gpu_gib"] = row["peak_gib"] + row["states_gib"]
            row["fits"] = {card: row["single_gpu_gib"] <= limit for card, limit in FITS_GIB.items()}
            # the full variant holds the [N, V] logits at once: a peak below weights + logits is a broken measurement
            row["sane"] = variant == "chunked" or row["peak_gib"] >= weights / GIB + row["logits_gib"]
        else:
            row["fits"] = {card: False for card in FITS_GIB}  # it did not fit the measuring card on its own
            row["sane"] = True
        rec["rows"].append(row)
        log(f"part e: {pass_}, {variant}, N {row['tokens']}: "
            + (f"peak {row['peak_gib']:.3f} GiB, single-GPU {row['single_gpu_gib']:.3f} GiB"
               if row["peak_gib"] is not None else row["error"]) + f" ({row['seconds']:.1f} s)")
        ctx.save()
    rec["ok"] = bool(rec["rows"]) and all(r["sane"] for r in rec["rows"])
    return rec


# ------------------------------------------------------------------------------ report
TITLES = {"a": "a. equivalence (tree vs duplicated sequences)", "b": "b. forward + backward, gradient checkpointing",
          "c": "c. recompilations: micro-batches of 1-3 trees through FlexAttention, eval then train",
          "d": "d. verl's patched prepare_model_inputs and ppo_loss",
          "e": "e. actor memory with full-vocabulary logits (per-token log-probs of N tokens)",
          "f": "f. one verl FSDP actor step (single process) on a packed tree"}


def _fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _md_a(a: dict) -> list[str]:
    lines = [f"tree length {a['tree']['length']} (multiple of 128: {a['tree']['multiple_of_128']})", "",
             "| dtype | mask | tokens | max abs logp diff | mean abs | grad rel err | grad cosine | ok |",
             "|---|---|---|---|---|---|---|---|"]
    for c in a["checks"]:
        lines.append(f"| {c['dtype']} | {c['mask']} | {c['tokens']} | {c['logp_max_abs_diff']:.2e} | "
                     f"{c['logp_mean_abs_diff']:.2e} | {c['grad_rel_err']:.2e} | {c['grad_cosine']:.6f} | {c['ok']} |")
    for c in a["checks"]:
        if "vs_fp32" in c:
            v = c["vs_fp32"]
            lines += ["", f"{c['dtype']} judged against the fp32 duplicated rows (ok when the tree is at most "
                      f"{c['ratio_allowed']}x as far off as the {c['dtype']} duplicated rows): log-probs max "
                      f"{v['tree_logp_max_err']:.3g} (tree) vs {v['dup_logp_max_err']:.3g} (rows), gradient relative "
                      f"{v['tree_grad_rel_err']:.3g} vs {v['dup_grad_rel_err']:.3g}: {c['ok_vs_fp32']}"]
    return lines


def _md_b(b: dict) -> list[str]:
    lines = [f"{b['dtype']}, L = {b['tree_length']}", "", "| variant | seconds | peak MiB | speed-up vs duplicated |",
             "|---|---|---|---|"]
    for name, r in b["rows"].items():
        if "seconds" in r:
            lines.append(f"| {name} | {r['seconds']:.3f} | {r['peak_mib']:.0f} | {r.get('speedup_vs_duplicated', 1):.2f}x |")
        else:
            lines.append(f"| {name} | {r['error']} | | |")
    return lines + ([f"\n{b['note']}"] if b.get("note") else [])


def _md_c(c: dict) -> list[str]:
    lines = ["Each micro-batch runs an eval-mode forward without grad (verl's old-log-prob pass), then a "
             f"train-mode forward{' + backward' if c.get('backward') else ''} (the update). Counts from "
             "torch._dynamo.utils: compilations, recompilations (a cached graph's guard failed; the first "
             "reason shown), graph breaks, recompile-limit hits (flex_attention runs eagerly after one).", "",
             "| # | trees | thinking tokens | padded L | pass | seconds | compiles | recompiles | graph breaks | "
             "limit hits | first recompile reason |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(c.get("rows", []), 1):
        for k in ("eval", "train"):
            x = r[k]
            reason = (x["recompile_reasons"] or x["failures"] or [""])[0].replace("|", "/").replace("\n", " ")[:120]
            lines.append(f"| {i} | {r['trees']} | {', '.join(map(str, r['thinking']))} | {r['padded_length']} | {k} | "
                         f"{x['seconds']:.1f} | {x['compiles']} | {x['recompiles']} | {x['graph_breaks']} | "
                         f"{x['recompile_limit_hits']} | {reason} |")
    if "recompiles" in c:
        lines += ["", f"{c['shapes_run']} of {c['shapes_planned']} micro-batches: {c['compiles']} compilations, "
                  f"{c['recompiles']} recompilations (eval {c['recompiles_eval']}, train {c['recompiles_train']}; "
                  f"{c['recompiles_after_shape_3']} after micro-batch 3), {c['graph_breaks']} graph breaks, "
                  f"{c['recompile_limit_hits']} recompile-limit hits, {c['compile_failures']} failed compilations, "
                  f"NaN: {c['nan']}"]
    if c.get("stopped_early"):
        lines += ["", f"stopped early: {c['stopped_early']}"]
    return lines + (["", c["note"]] if c.get("note") else [])


def _md_d(d: dict) -> list[str]:
    return [f"patched {d['patched']}, mask {d['mask']}, max abs logp diff {d['logp_max_abs_diff']:.2e}, "
            f"verl loss {d['verl_loss']:.12f} vs arctl {d['arctl_loss']:.12f} (diff {d['loss_abs_diff']:.1e})"]


def _md_e(e: dict) -> list[str]:
    m = e["model"]
    cards = list(e["fits_gib"])
    lines = [f"Model: Qwen2, hidden {m['hidden_size']}, {m['num_hidden_layers']} layers, vocabulary {m['vocab_size']:,}, "
             f"untied embeddings, {m['parameters']:,} parameters, bf16 weights {m['weights_gib']:.3f} GiB. "
             f"N tokens in rows of at most {max((r['row_length'] for r in e['rows']), default=0):,}.", "",
             "- pass: *old-log-prob* = eval mode, no grad (verl's compute_log_prob); *update* = train mode, "
             "gradient checkpointing, forward + backward.",
             "- log-probs: *full* = verl's padded path (the model's [B, L, V] logits, their [N, V] copy, "
             f"log_softmax row by row); *chunked* = output layer + float32 log_softmax over {e['chunk']:,} tokens at a "
             "time (recomputed in backward).",
             "- logits GiB: the size of one [N, V] bf16 logits tensor (N x V x 2 bytes), computed.",
             f"- peak GiB: {e['method']}.",
             f"- + states GiB: what a single-GPU actor (no offload, FSDP mixed precision) holds besides: "
             f"{e['state_bytes_per_param']['old-log-prob']} B/param in the old-log-prob pass (fp32 master weights + "
             f"AdamW's two fp32 moments), {e['state_bytes_per_param']['update']} B/param in the update (+ fp32 "
             "gradients). With FSDP over k GPUs these shrink k-fold; the peak does not.",
             "- fits: single-GPU total <= " + ", ".join(f"{v} GiB for a {k} card" for k, v in e["fits_gib"].items())
             + " (the card's memory as torch reports it less 3 GiB for the CUDA context, NCCL and fragmentation). "
             "Out of memory on the measuring card: does not fit.", "",
             "| pass | log-probs | N tokens (rows x length) | logits GiB | peak GiB | + states GiB | single-GPU GiB | "
             + " | ".join(f"fits {c}" for c in cards) + " | seconds |",
             "|---|---|---|---|---|---|---|" + "---|" * len(cards) + "---|"]
    for r in e["rows"]:
        peak = _fmt(r["peak_gib"], ".3f") if r["peak_gib"] is not None else r.get("error", "-")[:60]
        lines.append(f"| {r['pass']} | {r['variant']} | {r['tokens']:,} ({r['rows']} x {r['row_length']:,}) | "
                     f"{r['logits_gib']:.3f} | {peak} | {r['states_gib']:.3f} | {_fmt(r.get('single_gpu_gib'), '.3f')} | "
                     + " | ".join("yes" if r["fits"][c] else "no" for c in cards) + f" | {r['seconds']:.1f} |")
    if e.get("device_total_gib"):
        lines += ["", f"measuring card: {e['device_total_gib']:.1f} GiB"]
    if e.get("stopped_early"):
        lines += ["", f"stopped early: {e['stopped_early']}"]
    return lines


def _md_f(f: dict) -> list[str]:
    m, e, t = f["model"], f["engine"], f["tree"]
    peak = f.get("peak_gib")
    lines = [f"Model: Qwen2, hidden {m['hidden_size']}, {m['num_hidden_layers']} layers, vocabulary {m['vocab_size']:,}, "
             f"untied embeddings, {m['parameters']:,} parameters, saved {m['saved_dtype']} ({m['directory_mib']:.1f} MiB). "
             f"One packed tree: L = {t['length']:,} (prompt {t['prompt']}, {t['branches']} branches), "
             f"{t['trained_tokens']:,} trained tokens.", "",
             f"verl: {e['worker']} -> {e['engine']} ({e['strategy']}, {e['module']}), platform {e['platform']}, "
             f"process group {e['backend']} x {e['world_size']}, compute {e['param_dtype']}, {e['attn_implementation']} "
             f"with the {f['mask']} tree mask (arctl patch: {e['tree_patch']}), {e['optimizer']}, log-probs in "
             f"{f['verl_logp_dtype']}. Old log-probs: verl's "
             f"old-log-prob pass + N(0, {f['old_logp_noise']}^2).", "",
             f"loss {f['loss']:.9f} (arctl on verl's log-probs {f['arctl_loss']:.9f}; on the reference "
             f"{f['reference_loss']:.9f}), grad norm {f['grad_norm']:.6f} (reference {f['grad_norm_reference']:.6f}), "
             f"parameters changed {f['params']['changed']:,} of {f['params']['total']:,} "
             f"(max |update| {f['params']['max_abs_update']:.2e}, lr {f['params']['lr']:g})", "",
             "| check | value | tolerance | ok |", "|---|---|---|---|"]
    for c in f["checks"]:
        value = c["value"] if isinstance(c["value"], (bool, int, str)) else f"{c['value']:.3e}"
        tol = c["tolerance"] if isinstance(c["tolerance"], str) else f"{c['tolerance']:.1e}"
        lines.append(f"| {c['check']} | {value} | {tol} | {c['ok']} |")
    lines += ["", "| phase | seconds | peak GiB |", "|---|---|---|"]
    for name, sec in f["seconds"].items():
        lines.append(f"| {name} | {sec:.1f} | {_fmt(peak.get(name) if peak else None, '.3f')} |")
    lines += ["", f"peak: {f['peak_method']}" + (f"; peak RSS {f['peak_rss_gib']:.2f} GiB" if f.get("peak_rss_gib") else "")]
    if f.get("logp_diff"):
        lines += ["", "log-prob differences over trained tokens (|diff|; by position: max / mean per "
                  f"{F_POSITION_BUCKET} positions)", "", "| compared | max | mean | p99 | at position | by position |",
                  "|---|---|---|---|---|---|"]
        for name, d in f["logp_diff"].items():
            profile = "; ".join(f"{k}: {b['max']:.2g} / {b['mean']:.2g}" for k, b in d["by_position"].items())
            lines.append(f"| {name} | {d['max']:.3g} | {d['mean']:.3g} | {d['p99']:.3g} | {d['argmax_position']} | {profile} |")
    if f.get("as_loaded"):
        q = f["as_loaded"]
        lines += ["", f"verl's model as loaded vs the saved one: {len(q['parameters_differing'])} of {q['parameters']} "
                  f"parameter tensors differ {json.dumps(q['parameters_differing'])[:400]}, missing {q['parameters_missing'][:5]}; "
                  f"buffers max abs diff {json.dumps(q['buffers_max_abs_diff'])[:400]}; config keys differing "
                  f"{json.dumps(q['config_differing'], default=str)[:600]}"]
    if variant := f.get("variant"):
        lines += ["", f"variant: {json.dumps(variant)}"]
    if f.get("inputs_seen") or f.get("inputs_compared"):
        lines += ["", f"what verl's forwards handed the model: {json.dumps(f.get('inputs_seen'))}; against the suite's "
                  f"inputs: {json.dumps(f.get('inputs_compared'))}"]
    if f.get("precision_reference"):
        q = f["precision_reference"]
        lines += ["", f"reference in verl's precision ({q['dtype']} parameters, fp32 buffers, autocast): grad norm "
                  f"{q['grad_norm']:.6f} ({q['grad_norm_rel_diff_vs_fp32']:.2e} from fp32's; verl's {q['verl_grad_norm_rel_diff']:.2e} "
                  f"from it), gradient cosine vs fp32 {q['grad_cosine_vs_fp32']:.6f}, gradient sign agreement vs fp32 "
                  f"{q['grad_sign_agreement_vs_fp32']:.4f}, verl's update against its gradient (sign agreement) "
                  f"{q['update_sign_agreement']:.4f} (on the fp32 reference's clear elements)"]
    return lines


def markdown(results: dict) -> str:
    lines = [f"# GPU check suite: {results['shape']} shape on {results['device_name']}", "",
             f"{results['date']}, torch {results['torch']}, transformers {results['transformers']}; "
             f"budget {results['budget_s']:.0f} s, {results['elapsed_s']:.0f} s used", "",
             "| part | status | seconds | estimate | note |", "|---|---|---|---|---|"]
    if results.get("refused"):
        lines[3:3] = [f"**REFUSED**: {results['refused']}", ""]
    for key in ORDER:
        p = results["parts"][key]
        note = p.get("skipped") or p.get("error") or p.get("stopped_early") or ""
        lines.append(f"| {key} | {p['status']} | {_fmt(p.get('seconds_total'), '.1f')} | "
                     f"{_fmt(p.get('estimate_s'), '.0f')} | {str(note).replace('|', '/')[:200]} |")
    lines.append("")
    render = {"a": _md_a, "b": _md_b, "c": _md_c, "d": _md_d, "e": _md_e, "f": _md_f}
    for key in "abcdef":
        p = results["parts"][key]
        lines += [f"## {TITLES[key]}", ""]
        if p["status"] == "skipped":
            lines.append(f"skipped: {p['skipped']}")
        elif p["status"] == "running":
            lines.append("running (the call ended before this part finished)"
                         + (f"; last phase started: {p['phase']}" if p.get("phase") else ""))
        else:
            if p.get("error"):
                lines += [f"**{p['status'].upper()}**: {p['error']}", ""]
            try:
                lines += render[key](p)
            except (KeyError, TypeError):  # a part that failed or stopped before its numbers
                pass
            except Exception as err:  # noqa: BLE001 - a table that cannot be drawn must not cost results.json
                lines.append(f"(table not rendered: {type(err).__name__}: {err})")
        lines.append("")
    lines.append(f"all checks ok: {results['ok']}"
                 + ("" if results.get("complete") else " (not complete: see the parts table)"))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ run
RUNNERS = {"a": part_a, "b": part_b, "c": part_c, "d": part_d, "e": part_e, "f": part_f}


ALARM = {"armed": False, "fired": False}


def _on_alarm(signum, frame):
    if ALARM["armed"]:  # only inside a part: never while the runner records one
        ALARM["fired"] = True
        raise BudgetExceeded()


def summarise(results: dict) -> None:
    parts = results["parts"]
    ran = [p for p in parts.values() if p["status"] in ("ok", "failed", "stopped")]
    results["ok"] = bool(ran) and all(p["status"] == "ok" for p in ran)
    results["errors"] = {k: p["error"] for k, p in parts.items() if p["status"] in ("failed", "stopped")}
    results["skipped"] = {k: p["skipped"] for k, p in parts.items() if p["status"] == "skipped"}
    results["complete"] = all(p["status"] == "ok" and not p.get("stopped_early") for p in parts.values()
                              if p["status"] != "skipped" or "budget" in p["skipped"])
    if results.get("refused"):  # nothing was run, on purpose (main: no CUDA for the paper shape or --device cuda)
        results["ok"] = results["complete"] = False
    results["elapsed_s"] = time.perf_counter() - T_START


def device_name(text: str) -> str:
    """``--device``: cpu, cuda or cuda:N (anything else would fail minutes later inside a part, or at once in
    ``torch.cuda.get_device_name``)."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device: give cpu, cuda or cuda:N")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[_import_options(argv)])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-suite")))
    parser.add_argument("--shape", choices=sorted(SHAPES), default="paper")
    parser.add_argument("--device", type=device_name, default=None, help="cuda, cuda:N or cpu (default: cuda when torch sees a GPU, else cpu; "
                        "the paper shape on a CPU runs only when --device cpu is given)")
    parser.add_argument("--parts", default=ORDER, help="the parts to run (any of abcdef; they run in the order "
                        f"{', '.join(ORDER)}); a part left out is reported as skipped, e.g. --parts abce")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls per measurement (1 or more)")
    parser.add_argument("--f-mask", choices=("flex", "dense"), default=None, help="part f's tree mask (default: "
                        "flex on CUDA, dense on a CPU; dense runs verl's SDPA with the boolean [B, 1, L, L] mask)")
    parser.add_argument("--f-override", action="append", default=[], metavar="KEY=VALUE", help="a verl override "
                        "appended to part f's actor config (repeatable), e.g. actor_rollout_ref.actor.strategy=fsdp2")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds from the suite's start for all "
                        "parts (default 540: one device call is at most 600 s)")
    args = parser.parse_args(argv)
    if not args.parts or set(args.parts) - set(ORDER):
        parser.error(f"--parts takes letters of {ORDER!r}, got {args.parts!r}")
    import transformers

    shape = SHAPES[args.shape]
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # the paper shape on a CPU only when asked for: on a device whose CUDA failed, the default would spend the
    # whole budget on a 1.5B model on the CPU and return nothing of use
    refused = (f"no CUDA device visible to torch {torch.__version__} (torch.cuda.is_available() is False): the "
               f"paper shape is not run on a CPU unless --device cpu is given"
               if args.device is None and device == "cpu" and args.shape == "paper" else None)
    if device.startswith("cuda") and not torch.cuda.is_available():  # asked for by name: refused the same way
        refused = (f"--device {device} but no CUDA device is visible to torch {torch.__version__} "
                   f"(torch.cuda.is_available() is False): give --device cpu to run on the CPU")
    elif device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        refused = (f"--device {device} but torch sees {torch.cuda.device_count()} CUDA device(s), "
                   f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if not device.startswith("cuda"):
        # verl's platform is chosen once, at its first use (parts d and f): on a CPU, arctl's cpu platform
        # (arctl/backends/verl/cpu_platform.py: gloo, the FSDP engines registered for device cpu)
        os.environ["VERL_PLATFORM"] = "cpu"
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    results = {"shape": args.shape, "device": device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "device_name": (torch.cuda.get_device_name(device) if device.startswith("cuda") and not refused
                               else platform.processor() or "cpu"),
               "torch": torch.__version__, "transformers": transformers.__version__, "budget_s": args.budget_s,
               "order": ORDER, "parts": {}}
    for key in ORDER:
        results["parts"][key] = ({"status": "pending", "ok": None} if key in args.parts else
                                 {"status": "skipped", "ok": None, "skipped": f"not requested (--parts {args.parts})"})

    def left() -> float:
        return args.budget_s - (time.perf_counter() - T_START)

    def save() -> None:
        summarise(results)
        for name, text in (("results.json", json.dumps(results, indent=2, default=str)), ("results.md", markdown(results))):
            tmp = out / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, out / name)  # a call killed meanwhile leaves the previous complete file

    alarm = hasattr(signal, "setitimer")
    if alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    stopped = False
    if refused:
        results["refused"] = refused
        for key in ORDER:
            results["parts"][key].update(status="skipped", skipped=f"refused: {refused}")
        save()
        print(f"refused: {refused}", file=sys.stderr, flush=True)
        return 1
    save()
    for key in (k for k in ORDER if k in args.parts):
        rec = results["parts"][key]
        estimate = ESTIMATE_S[args.shape][key]
        rec["estimate_s"] = estimate
        if stopped or estimate > left():
            rec.update(status="skipped", skipped=f"budget: needs ~{estimate} s, {max(left(), 0):.0f} s of "
                       f"--budget-s {args.budget_s:.0f} left")
            log(f"part {key}: skipped ({rec['skipped']})")
            save()
            continue
        rec.update(status="running", started_s=time.perf_counter() - T_START)
        save()
        log(f"part {key}: start (estimate {estimate} s, {left():.0f} s left)")
        t0 = time.perf_counter()
        try:
            if alarm:
                ALARM["armed"] = True
                signal.setitimer(signal.ITIMER_REAL, max(left(), 0.01))
            rec.update(RUNNERS[key](Context(shape, args.shape, device, args.repeats, rec, save, left, args.f_mask, args.f_override)))
            rec["status"] = "ok" if rec["ok"] else ("stopped" if rec.get("stopped_early") else "failed")
            if not rec["ok"]:  # a check off its tolerance: the part's own reason, else a pointer to its table
                rec.setdefault("error", rec.get("stopped_early") or "a check failed (see this part's table)")
        except BudgetExceeded:
            stopped = True
            rec.update(status="stopped", ok=False, error=f"budget: --budget-s {args.budget_s:.0f} ran out "
                       f"{time.perf_counter() - t0:.0f} s into this part")
        except Exception as err:  # noqa: BLE001 - one failing part must not hide the others' numbers
            rec.update(status="failed", ok=False, error=f"{type(err).__name__}: {err}",
                       traceback=traceback.format_exc()[-4000:])
        finally:
            ALARM["armed"] = False
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
        rec["seconds_total"] = time.perf_counter() - t0
        stopped = stopped or left() <= 0
        free_memory(device)
        save()
        log(f"part {key}: {rec['status']} ({rec['seconds_total']:.1f} s)"
            + (f": {rec['error']}" if rec.get("error") else ""))
    save()
    print(markdown(results), flush=True)
    # 0 only when every part that ran passed and none was skipped for the budget or stopped early
    code = 0 if results["ok"] and results["complete"] else 1
    if ALARM["fired"]:  # a part stopped mid-way may have left compile workers or CUDA work behind: do not wait for them
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

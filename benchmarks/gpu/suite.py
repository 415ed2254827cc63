"""GPU check suite of the verl path: one command, four parts, numbers to ``--out``.

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
c. micro-batches of 1-3 trees of different lengths through FlexAttention: the number of dynamo
   recompilations (``TORCH_LOGS=recompiles`` shows them), no eager fallback, no NaN from padding.
d. verl's own code: the FSDP engine's ``prepare_model_inputs`` patched by arctl's plugin builds the
   tree inputs (their log-probs equal part a's), and verl's ``ppo_loss`` with the registered arctl
   policy loss equals ``arctl.algo.tree_loss.policy_loss`` on them. Needs verl importable (on the
   device: carry verl's wheels and stub ray / transfer_queue, docs/gpu.md); skipped otherwise.

Writes ``results.json`` and ``results.md`` (one table per part) to ``--out``. Exit code 1 when a
check fails. Needs only torch + transformers for a-c.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from arctl.algo.tree import SummaryBranch, dense_tree_mask, pack_tree, stack_trees, tree_block_mask  # noqa: E402

QWEN2_1_5B = dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                  intermediate_size=8960, vocab_size=151936)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=512)
SHAPES = {
    "paper": dict(model=QWEN2_1_5B, prompt=128, think=8000, cuts=(2000, 4000, 6000, 8000), summaries=4,
                  summary=128, inserted=8, batch_lengths=(6000, 8000, 3000)),
    "small": dict(model=TINY, prompt=16, think=120, cuts=(30, 60, 90, 120), summaries=4, summary=12, inserted=3,
                  batch_lengths=(80, 120, 50)),
}
# tolerances (max |logp diff|, gradient relative error): fp32 tight, bf16 stated
TOL = {"float32": dict(logp=2e-4, grad=2e-4), "bfloat16": dict(logp=0.25, grad=0.05)}
LM_HEAD_CHUNK = 1024  # tokens per lm_head chunk (the 151,936-word vocabulary would need GBs at once)


# ------------------------------------------------------------------------------ building blocks
def make_model(spec: dict, device: str, dtype: torch.dtype, attn: str = "sdpa"):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(**spec, max_position_embeddings=32768, tie_word_embeddings=True, attn_implementation=attn)
    model = Qwen2ForCausalLM(cfg).to(device=device, dtype=dtype)
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


def tree_inputs(trees, device: str, mask_kind: str):
    """Stacked trees and their attention mask: ``flex`` BlockMask, ``dense`` boolean [B,1,L,L]."""
    s = stack_trees(trees)
    s = {k: v.to(device) for k, v in s.items()}
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


# ------------------------------------------------------------------------------ parts
def part_a(shape: dict, device: str) -> dict:
    """Tree (BlockMask on CUDA, dense mask on CPU) vs the 17 duplicated sequences."""
    cuda = device.startswith("cuda")
    out = {"checks": []}
    tree = make_tree(shape, shape["model"]["vocab_size"])
    out["tree"] = {"length": tree.length, "multiple_of_128": tree.length % 128 == 0, "branches": len(tree.branches)}
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
        if not cuda:  # the BlockMask on the forward (no FlexAttention backward on CPU)
            model.set_attn_implementation("flex_attention")
            with torch.no_grad():
                flex, _ = tree_logp(model, [tree], device, "flex")
            check["flex_forward_max_abs_diff"] = float((flex[pos[order]] - ref).abs().max())
            check["ok"] = check["ok"] and check["flex_forward_max_abs_diff"] <= tol["logp"]
        out["checks"].append(check)
        del model, g_tree, g_dup
        if cuda:
            torch.cuda.empty_cache()
    out["ok"] = all(c["ok"] for c in out["checks"])
    return out


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


def part_b(shape: dict, device: str, repeats: int) -> dict:
    """fwd+bwd with gradient checkpointing: flex tree (CUDA), dense-mask tree, duplicated rows."""
    cuda = device.startswith("cuda")
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
            seconds, peak = _timed(fn, device, repeats)
            rows[name] = {"seconds": seconds, "peak_mib": peak}
        except torch.OutOfMemoryError as err:
            rows[name] = {"error": f"out of memory: {str(err).splitlines()[0]}"}
            torch.cuda.empty_cache()
    base = rows.get("duplicated rows", {}).get("seconds")
    for row in rows.values():
        if base and "seconds" in row:
            row["speedup_vs_duplicated"] = base / row["seconds"]
    return {"dtype": str(dtype).split(".")[-1], "tree_length": tree.length, "rows": rows,
            "note": None if cuda else "cpu: FlexAttention has no backward on CPU; flex timed on CUDA only",
            "ok": all("seconds" in r for r in rows.values())}


def part_c(shape: dict, device: str) -> dict:
    """Micro-batches of 1-3 trees of varying length through FlexAttention: recompiles, eager
    fallbacks, NaN."""
    import torch._dynamo.utils as dyn

    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    model = make_model(shape["model"], device, dtype, "flex_attention")
    lengths = shape["batch_lengths"]
    batches = [[lengths[0]], [lengths[0], lengths[1]], [lengths[2], lengths[1], lengths[0]], [lengths[1]],
               [lengths[2], lengths[0]]]
    before = {k: dict(v) for k, v in dyn.counters.items()}
    seen, nan = [], False
    for i, lens in enumerate(batches):
        trees = [make_tree(shape, shape["model"]["vocab_size"], think=n, seed=10 * i + j) for j, n in enumerate(lens)]
        if cuda:
            model.zero_grad(set_to_none=True)
            logp, adv = tree_logp(model, trees, device, "flex")
            (adv * logp).sum().backward()
            nan = nan or bool(torch.isnan(grad_vector(model)).any())
        else:  # CPU: forward only, and tree by tree (see the note)
            with torch.no_grad():
                logp = torch.cat([tree_logp(model, [t], device, "flex")[0] for t in trees])
        nan = nan or bool(torch.isnan(logp).any())
        seen.append(max(t.length for t in trees))
    after = {k: dict(v) for k, v in dyn.counters.items()}

    def delta(group, key):
        return int(after.get(group, {}).get(key, 0)) - int(before.get(group, {}).get(key, 0))

    recompiles = delta("stats", "unique_graphs")
    graph_breaks = sum(int(v) for v in after.get("graph_break", {}).values()) - sum(
        int(v) for v in before.get("graph_break", {}).values())
    fallbacks = delta("inductor", "fallback") if "inductor" in after else 0
    note = None if cuda else ("cpu: forward only (no FlexAttention backward on CPU), each tree of a micro-batch on "
                              "its own (torch's CPU inductor fails to compile the batched FlexAttention forward: "
                              "'cur_kvSplitSize8 was not declared')")
    return {"micro_batches": [len(b) for b in batches], "padded_lengths": seen, "compiled_graphs": recompiles,
            "graph_breaks": graph_breaks, "eager_fallbacks": fallbacks, "nan": nan, "backward": cuda, "note": note,
            "ok": (not nan) and recompiles <= 3 and fallbacks == 0}


def part_d(shape: dict, device: str) -> dict:
    """verl's patched prepare_model_inputs and its ppo_loss with the arctl policy loss."""
    try:
        import verl.workers.engine.fsdp.transformer_impl as ti
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu
        from verl.workers.config.actor import FSDPActorConfig, PolicyLossConfig
        from verl.workers.utils.losses import ppo_loss

        import arctl.backends.verl.plugin  # noqa: F401 - the engine patch and the policy losses
        from arctl.algo.settings import Loss, Objective, Thinking
        from arctl.algo.tree_loss import policy_loss
    except Exception as err:  # noqa: BLE001 - reported: the device has no verl unless carried
        return {"skipped": f"verl not importable here: {type(err).__name__}: {err}", "ok": True}
    cuda = device.startswith("cuda")
    attn = "flex_attention" if cuda else "sdpa"
    model = make_model(shape["model"], device, torch.float32, attn)
    trees = [make_tree(shape, shape["model"]["vocab_size"], think=n, seed=s) for s, n in
             enumerate(shape["batch_lengths"][:2])]
    nest = lambda xs: torch.nested.as_nested_tensor([x.to(device) for x in xs], layout=torch.jagged)  # noqa: E731
    mb = TensorDict({"input_ids": nest([t.input_ids for t in trees]), "position_ids": nest([t.position_ids for t in trees]),
                     "tree_cut": nest([t.cut for t in trees]), "tree_branch_start": nest([t.branch_start for t in trees]),
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


# ------------------------------------------------------------------------------ report
def markdown(results: dict) -> str:
    results = {**results, "parts": {k: v for k, v in results["parts"].items() if "error" not in v}}
    errors = [f"part {k} failed: {v['error']}" for k, v in results.get("errors", {}).items()]
    lines = [f"# GPU check suite: {results['shape']} shape on {results['device_name']}", "",
             f"{results['date']}, torch {results['torch']}, transformers {results['transformers']}", ""]
    a = results["parts"].get("a")
    if a:
        lines += ["## a. equivalence (tree vs duplicated sequences)", "",
                  f"tree length {a['tree']['length']} (multiple of 128: {a['tree']['multiple_of_128']})", "",
                  "| dtype | mask | tokens | max abs logp diff | mean abs | grad rel err | grad cosine | ok |",
                  "|---|---|---|---|---|---|---|---|"]
        for c in a["checks"]:
            lines.append(f"| {c['dtype']} | {c['mask']} | {c['tokens']} | {c['logp_max_abs_diff']:.2e} | "
                         f"{c['logp_mean_abs_diff']:.2e} | {c['grad_rel_err']:.2e} | {c['grad_cosine']:.6f} | {c['ok']} |")
        lines.append("")
    b = results["parts"].get("b")
    if b:
        lines += [f"## b. forward + backward, gradient checkpointing ({b['dtype']}, L = {b['tree_length']})", "",
                  "| variant | seconds | peak MiB | speed-up vs duplicated |", "|---|---|---|---|"]
        for name, r in b["rows"].items():
            if "seconds" in r:
                lines.append(f"| {name} | {r['seconds']:.3f} | {r['peak_mib']:.0f} | {r.get('speedup_vs_duplicated', 1):.2f}x |")
            else:
                lines.append(f"| {name} | {r['error']} | | |")
        if b.get("note"):
            lines.append(f"\n{b['note']}")
        lines.append("")
    c = results["parts"].get("c")
    if c:
        lines += ["## c. micro-batches of 1-3 trees through FlexAttention", "",
                  f"micro-batch sizes {c['micro_batches']}, padded lengths {c['padded_lengths']}: "
                  f"{c['compiled_graphs']} compiled graphs, {c['graph_breaks']} graph breaks, "
                  f"{c['eager_fallbacks']} eager fallbacks, NaN: {c['nan']} (backward: {c['backward']})", ""]
        if c.get("note"):
            lines += [c["note"], ""]
    d = results["parts"].get("d")
    if d:
        lines += ["## d. verl's patched prepare_model_inputs and ppo_loss", ""]
        lines.append(f"skipped: {d['skipped']}" if "skipped" in d else
                     f"patched {d['patched']}, mask {d['mask']}, max abs logp diff {d['logp_max_abs_diff']:.2e}, "
                     f"verl loss {d['verl_loss']:.12f} vs arctl {d['arctl_loss']:.12f} (diff {d['loss_abs_diff']:.1e})")
        lines.append("")
    lines += errors
    lines.append(f"all checks ok: {results['ok']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-suite")))
    parser.add_argument("--shape", choices=sorted(SHAPES), default="paper")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--parts", default="abcd")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stub", default="", help="comma-separated packages to serve as stand-ins for part d "
                        "(on the device: ray,transfer_queue; benchmarks/gpu/stub_imports.py)")
    args = parser.parse_args(argv)
    if args.stub:
        import importlib.util

        spec = importlib.util.spec_from_file_location("gpu_stub_imports", Path(__file__).with_name("stub_imports.py"))
        stubs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stubs)
        stubs.install(tuple(n for n in args.stub.split(",") if n))
    import transformers

    shape = SHAPES[args.shape]
    device = args.device
    results = {"shape": args.shape, "device": device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu",
               "torch": torch.__version__, "transformers": transformers.__version__, "parts": {}}
    runners = {"a": lambda: part_a(shape, device), "b": lambda: part_b(shape, device, args.repeats),
               "c": lambda: part_c(shape, device), "d": lambda: part_d(shape, device)}
    for part in args.parts:
        t0 = time.perf_counter()
        try:
            results["parts"][part] = runners[part]()
        except Exception as err:  # noqa: BLE001 - one failing part must not hide the others' numbers
            results["parts"][part] = {"error": f"{type(err).__name__}: {err}", "ok": False}
        results["parts"][part]["seconds_total"] = time.perf_counter() - t0
        print(f"part {part}: ok={results['parts'][part]['ok']} ({results['parts'][part]['seconds_total']:.1f} s)",
              flush=True)
    results["ok"] = all(p["ok"] for p in results["parts"].values())
    results["errors"] = {k: v for k, v in results["parts"].items() if "error" in v}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (args.out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The tiny task's mechanism checks on the warm-start model (docs/testbed.md).

    python benchmarks/probe_task.py [--problems 256] [--samples 4] [--json OUT] [OVERRIDES...]

Loads the cached warm-start model of the tiny scale (training it first if the cache lacks it: the
same warm-up every tiny run starts from; overrides such as ``tiny.task.name=running_sum`` select
another task), samples ``--samples`` thinking traces per held-out problem at temperature 1 with the
training shape (``summary.group_size`` summaries at every budget) and prints:

1. **partial progress**: the summaries' accuracy by how far the thinking had got at the cut
   (search: candidates left; running_sum: steps left), beside the reference summary's exact
   expectation, and the accuracy at every budget against chance;
2. **a summary skill at every cut** (search): how often a summary after an unfinished search answers
   the first item not yet tested (the sequential reference does with probability 1 - lazy_summary_prob)
   or any item not yet tested (beside the reference's exact rate), and an item already ruled out;
3. **useful verification vs waste**: accuracy at the largest budget when the thinking may not
   re-check (``chk`` banned) or may not waste (``hmm`` banned), same problems and random stream;
4. **an earlier budget predicts a later one**: corr(V1, R) and the normalised variances per budget
   (``arctl.algo.metrics.eval_diagnostics``, the paper's Fig. 2 quantities);
5. **proportions**: generated summary tokens per tree against thinking tokens (capped), the share
   of traces unfinished at b_{m-1} and b_m, accuracy at b_1 against chance and b_m;
6. **the gradient balance** of AR-uniform at warm start under the authors' conventions: the norm of
   the policy gradient of the summary tokens against the thinking tokens' on one training batch.

Numbers, not verdicts: docs/testbed.md states the checks and records a run.
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from _args import positive_int  # noqa: E402  benchmarks/ (the script's folder is on sys.path)

CHUNK = 8  # problems per rollout: the training batch (8 prompts x G samples), bounded memory


def _config(overrides: list[str]) -> dict:
    from arctl.compose import resolve_experiment

    return resolve_experiment("main-ar-uniform", overrides=overrides, scale="tiny")[0].config


def _banned_sampling(banned: list[int]):
    """rollout.sample with ``banned`` token ids never drawn (a thinking that may not use them)."""
    from arctl.backends.tiny import rollout as ro

    real = ro.sample

    def sample(logits, temperature, generator, *rows):
        logits = logits.clone()
        logits[..., banned] = -math.inf
        return real(logits, temperature, generator, *rows)

    return sample


def _rollout(model, tok, inserted, run, problems, generator, banned=None):
    from arctl.backends.tiny import rollout as ro

    budgets = list(run.eval_budgets)
    real = ro.sample
    if banned:
        ro.sample = _banned_sampling(banned)
    try:
        return ro.rollout(model, tok, inserted, run.task, problems, run.rollout_n, budgets, run.group_size,
                          run.summary_max_tokens, 1.0, generator, run.max_rows, per_budget=True)
    finally:
        ro.sample = real


def _progress_rows(run, problems, out, tok):
    """(candidates or steps left at the cut, found/finished?, the branch's summaries' rewards, picks)."""
    from arctl.backends.tiny import search
    from arctl.backends.tiny import task as running_sum
    from arctl.backends.tiny.tokenizer import decode_words

    g = run.rollout_n
    rows = []
    for b in out.branches:
        p = problems[b.row // g]
        words = decode_words(tok, out.thinking.thinking(b.row)[: b.cut])
        summaries = [decode_words(tok, s) for s in b.summaries]
        if run.task.name == "search":
            state = search.read_state(p, words)
            untested = [lab for lab in search.LABELS[: p.size] if lab not in state.tested]
            picks = [next((search.ANSWER_WORDS[w] for w in reversed(s) if w in search.ANSWER_WORDS), None)
                     for s in summaries]
            rows.append(dict(left=p.size - len(state.tested), done=state.found is not None or b.finished,
                             rewards=list(b.rewards), size=p.size,
                             first_untested=sum(x == (untested[0] if untested else None) for x in picks),
                             untested=sum(x in untested for x in picks),
                             reference_untested=len(picks) * ((1 - run.task.lazy_prob) * bool(untested)
                                                              + run.task.lazy_prob * len(untested) / p.size),
                             ruled_out=sum(x in state.tested and x != state.found for x in picks), n=len(picks)))
        else:
            done = len(p.digits) if b.finished else running_sum.steps_done(p, words)
            rows.append(dict(left=len(p.digits) - done, done=b.finished, rewards=list(b.rewards), size=10,
                             first_untested=0, untested=0, reference_untested=0, ruled_out=0, n=len(b.rewards)))
    return rows


def _gradient_balance(model, config, out, pad_id: int):
    """||grad of the summary tokens' loss|| / ||grad of the thinking tokens' loss|| on one batch."""
    import torch

    from arctl.algo.settings import Objective
    from arctl.algo.tree_loss import tree_advantages
    from arctl.backends.tiny.trainer import objective_trees, pack_trees, question_labels
    from arctl.backends.tiny.update import policy_loss, tree_batch

    objective = Objective.from_config(config)
    trees = objective_trees(out, len(objective.budgets))
    advs = tree_advantages(trees, question_labels(out), objective)
    packed = pack_trees(out, advs)
    batch = tree_batch(packed, pad_id)
    trunk = torch.tensor([t.trunk_len for t in packed])
    cols = torch.arange(batch.input_ids.shape[1])[None, :]
    thinking = batch.loss_mask & (cols < trunk[:, None])
    params = [p for p in model.parameters() if p.requires_grad]
    norms, tokens = {}, {}
    for part, mask in (("thinking", thinking), ("summary", batch.loss_mask & ~thinking)):
        part_batch = type(batch)(**{**batch.__dict__, "loss_mask": mask})
        loss, _, _ = policy_loss(model, part_batch, objective, len(packed))
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        norms[part] = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)))
        tokens[part] = int(mask.sum())
    return {"grad_norm": norms, "trained_tokens": tokens, "summary_over_thinking": norms["summary"] / norms["thinking"]}


def settings(overrides: list[str], samples: int) -> dict:
    """The run config the probe samples with, checked before the warm-up loads or trains: a wrong override
    (SpecError), ``rollout.n`` the objective cannot take, or a bad ``$ARCTL_TINY_WARMUP`` raise ValueError
    here, in one line, instead of a traceback from inside the probe."""
    from arctl.backends.tiny.settings import TinyRun, warmup_source

    config = _config([*overrides, f"rollout.n={samples}"])
    TinyRun.from_config(config)
    warmup_source()
    return config


def probe(config: dict, n_problems: int, samples: int) -> dict:
    import numpy as np
    import torch

    from arctl.algo import metrics
    from arctl.algo.prompts import InsertedTokens
    from arctl.backends.tiny.evaluate import budget_accuracy, eval_problems
    from arctl.backends.tiny.settings import TinyRun
    from arctl.backends.tiny.tokenizer import encode_words
    from arctl.backends.tiny.warmup import warmup_dir, warmup_model

    run = TinyRun.from_config(config)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model, tok, warm = warmup_model(config, warmup_dir(config),
                                    lambda m, t: budget_accuracy(m, t, config, run.warmup_eval_problems))
    inserted = InsertedTokens.from_tokenizer(tok)
    problems = eval_problems(config, n_problems, salt=3)
    budgets = list(run.eval_budgets)

    def sampled(banned=None):
        """Rollouts of every problem in chunks (a rollout holds its chunk's KV caches), one stream."""
        gen = torch.Generator().manual_seed(run.eval_seed)
        return [(problems[i:i + CHUNK], _rollout(model, tok, inserted, run, problems[i:i + CHUNK], gen, banned))
                for i in range(0, len(problems), CHUNK)]

    chunks = sampled()
    scores = torch.cat([out.scores for _, out in chunks])  # [B, G, m]
    lens = torch.cat([out.thinking.think_len for _, out in chunks]).view(len(problems), samples)
    flat = lens.view(-1)
    ended = torch.cat([out.thinking.finished for _, out in chunks])
    acc = dict(zip(budgets, metrics.accuracy_per_budget(scores)))
    chance = float(np.mean([1 / p.size for p in problems])) if run.task.name == "search" else 0.1

    # 1-2. partial progress and the summary's reading of the partial state
    rows = [r for chunk, out in chunks for r in _progress_rows(run, chunk, out, tok)]
    lazy = getattr(run.task, "lazy_prob", 0.0)
    by_left: dict[str, list] = {}
    for r in rows:
        if not r["done"]:
            bucket = f"{min(r['left'] // 4 * 4, 32)}-{min(r['left'] // 4 * 4, 32) + 3}"
            # the reference summary's expectation (every item tested, none found: a guess among all)
            expect = (1 - lazy) / r["left"] + lazy / r["size"] if r["left"] else 1 / r["size"]
            by_left.setdefault(bucket, []).append((np.mean(r["rewards"]), expect))
    progress = {k: {"accuracy": float(np.mean([a for a, _ in v])), "reference": float(np.mean([e for _, e in v])),
                    "cuts": len(v)} for k, v in sorted(by_left.items(), key=lambda kv: int(kv[0].split("-")[0]))}
    open_rows = [r for r in rows if not r["done"]]
    summary_skill = {
        "first_untested": sum(r["first_untested"] for r in open_rows) / max(1, sum(r["n"] for r in open_rows)),
        "ruled_out": sum(r["ruled_out"] for r in open_rows) / max(1, sum(r["n"] for r in open_rows)),
        # any item not yet tested (the random order's reference picks a uniform one)
        "untested": sum(r["untested"] for r in open_rows) / max(1, sum(r["n"] for r in open_rows)),
        "reference_untested": sum(r["reference_untested"] for r in open_rows) / max(1, sum(r["n"] for r in open_rows)),
        "reference_first_untested": (1 - lazy) + lazy / np.mean([r["size"] for r in open_rows]) if open_rows else None,
        "found_or_finished_accuracy": float(np.mean([np.mean(r["rewards"]) for r in rows if r["done"]] or [float("nan")])),
    }

    # 3. verification and waste: the same problems and random stream, a word banned from the thinking
    ablations = {}
    for word in ("chk", "hmm"):
        if word in tok.get_vocab():
            (wid,) = encode_words(tok, [word])
            ab = sampled([wid])
            ab_acc = metrics.accuracy_per_budget(torch.cat([o.scores for _, o in ab]))
            ablations[f"without {word}"] = {
                "accuracy_at_bm": float(ab_acc[-1]),
                "thinking_tokens": float(torch.cat([o.thinking.think_len for _, o in ab]).double().mean())}
    ablations["as sampled"] = {"accuracy_at_bm": float(acc[budgets[-1]]), "thinking_tokens": float(flat.double().mean())}

    # 4. the paper's Fig. 2 quantities
    diag = metrics.eval_diagnostics(scores, lens, budgets, float(config["thinking"]["lam"]))

    # 5. proportions (per tree: the generated summary tokens of the training shape)
    summary_tokens = sum(len(s) for _, out in chunks for b in out.branches for s in b.summaries) / len(flat)
    capped = float(flat.double().mean())
    proportions = {
        "summary_tokens_per_tree": summary_tokens, "thinking_tokens_per_tree": capped,
        "summary_over_thinking": summary_tokens / capped,
        # not ended within b tokens: longer than b, or cut at b without its </think>
        "unfinished_at": {str(b): float(((flat > b) | (~ended & (flat >= b))).double().mean()) for b in budgets[-2:]},
        "finished_share": float(ended.double().mean()),
        "accuracy": {str(b): float(a) for b, a in acc.items()}, "chance": chance,
    }

    # 6. the gradient balance (AR-uniform, the authors' summary weighting)
    balance = _gradient_balance(model, config, chunks[0][1], tok.pad_token_id)  # one training-sized batch
    prompt_len = float(np.mean([len(encode_words(tok, run.task.prompt_words(p))) for p in problems]))
    return {
        "task": run.task.name, "config": config["tiny"]["task"], "budgets": budgets, "problems": n_problems,
        "samples": samples, "warmup": {k: warm.get(k) for k in ("key", "weights_sha256", "accuracy_per_budget",
                                                                 "seconds", "threads")},
        "partial_progress": progress, "summary_skill": summary_skill, "verification": ablations,
        "diagnostics": {"corr": diag.corr, "nvar": diag.nvar}, "proportions": proportions,
        "gradient_balance": balance, "prompt_tokens": prompt_len,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg(),
                    "torch": torch.__version__}, "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the tiny scale, e.g. tiny.task.name=running_sum")
    parser.add_argument("--problems", type=positive_int, default=256)
    parser.add_argument("--samples", type=positive_int, default=4, help="thinking traces per problem (rollout.n)")
    parser.add_argument("--json", default=None, help="write the numbers here too")
    args = parser.parse_args(argv)
    try:
        config = settings(args.overrides, args.samples)
    except ValueError as err:  # arctl.compose.errors.SpecError is one: an override, rollout.n, $ARCTL_TINY_WARMUP
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = probe(config, args.problems, args.samples)
    text = json.dumps(out, indent=1, default=lambda x: None if isinstance(x, float) and x != x else str(x))
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

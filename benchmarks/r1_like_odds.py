"""How often does a step of verl's CPU loop have no advantage at all? The odds behind the R1-shaped
test model's favourite tokens (tests/support/r1_like.py, ``FAVOURITES``). Run by hand; its numbers are
in that module's comment.

    python benchmarks/r1_like_odds.py [--steps 3000] [--favourites '{"</think>": 12.2, "EOS": 12.0}']

The model's next-token distribution hardly depends on the context (the favourites' logits come from a
constant hidden dimension), so a step is simulated by sampling tokens from the distribution the model
gives after the chat prompt: per step 2 questions ("1 + 0", "1 + 1") x ``rollout.n`` 2 thinkings of at
most b_m = 32 tokens (stopping at ``</think>`` or EOS), cut at budgets 16 and 32, 2 summaries per cut
of at most ``summary_cap(32, inserted)`` tokens (stopping at EOS), each scored by the agent loop's own
scorer (:func:`arctl.backends.verl.reward.leaf_reward`: the authors' format rule, math-verify: the grader
its recorded numbers were measured with). A step has no advantage when
every summary pair is tied (the decoupled summaries' GRPO advantages are then zero, and so, as a
rule, are the thinking's). Prints per setting: the favourites' probabilities, the mean reward and the
share of steps with every pair tied.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from _args import json_object, positive_int  # benchmarks/ (the script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
import r1_like  # noqa: E402  (tests/support: the model under study)

from arctl.algo.prompts import InsertedTokens, summary_cap, summary_prompt  # noqa: E402
from arctl.algo.verify import MATH_VERIFY  # noqa: E402
from arctl.backends.verl.reward import leaf_reward  # noqa: E402

BUDGETS, GROUP, SAMPLES, SUMMARY_MAX = (16, 32), 2, 2, 32
QUESTIONS = [("What is 1 + 0?", "1"), ("What is 1 + 1?", "2")]


def next_token_probs(tok, favourites: dict[str, float]) -> np.ndarray:
    """The next-token distribution, after the first question's chat prompt, of the model built with
    ``favourites``."""
    return r1_like.next_token_probs(tok, r1_like.build_model(tok, favourites=favourites), QUESTIONS[0][0]).numpy()


def simulate(tok, probs: np.ndarray, steps: int, seed: int = 0) -> tuple[float, float]:
    """(mean reward, share of steps with every summary pair tied)."""
    rng = np.random.default_rng(seed)
    inserted = InsertedTokens.from_tokenizer(tok)
    eos = tok.eos_token_id
    cumulative = np.cumsum(probs / probs.sum())

    def sample(limit: int, stops: set[int]) -> list[int]:
        out: list[int] = []
        while len(out) < limit:
            out.append(int(min(np.searchsorted(cumulative, rng.random()), len(cumulative) - 1)))
            if out[-1] in stops:
                break
        return out

    rewards, tied = [], 0
    for _ in range(steps):
        pairs = []
        for _question, gold in QUESTIONS:
            for _ in range(SAMPLES):
                thinking = sample(max(BUDGETS), {inserted.think_end, eos})
                for cut in BUDGETS:
                    prompt = summary_prompt([], thinking, cut, inserted)
                    pair = []
                    for _ in range(GROUP):
                        summary = sample(summary_cap(SUMMARY_MAX, prompt.inserted_len), {eos})
                        pair.append(leaf_reward(thinking[:cut], prompt.inserted, summary, gold, tok,
                                                inserted.think_end, eos, grader=MATH_VERIFY))
                    pairs.append(pair)
        rewards += [r for p in pairs for r in p]
        tied += all(p[0] == p[1] for p in pairs)
    return float(np.mean(rewards)), tied / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=positive_int, default=3000)
    parser.add_argument("--favourites", type=json_object, action="append", default=[],
                        help="JSON of logits overriding FAVOURITES (key EOS for the EOS token); repeatable")
    args = parser.parse_args(argv)
    tok = r1_like.build_tokenizer()
    shown = lambda t: "EOS" if t == r1_like.EOS else t  # noqa: E731 - the EOS token's name, as --favourites takes it
    settings = [dict(r1_like.FAVOURITES)]
    for given in args.favourites:
        settings.append({**r1_like.FAVOURITES, **{r1_like.EOS if k == "EOS" else k: v for k, v in given.items()}})
    for favourites in settings:
        probs = next_token_probs(tok, favourites)
        reward, tied = simulate(tok, probs, args.steps)
        print(json.dumps({"logits": {shown(t): v for t, v in favourites.items()},
                          "probabilities": {shown(t): round(float(probs[tok.encode(t, add_special_tokens=False)[0]]), 3)
                                            for t in favourites},
                          "reward": round(reward, 3), "steps_all_pairs_tied": round(tied, 4)}))


if __name__ == "__main__":
    main()

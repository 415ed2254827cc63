"""``trainer.init_from`` on the tiny backend: a new run starts from another run's final weights (its
newest checkpoint), with its own optimizer, RNG streams and step count; a resume of it resumes its
own checkpoint."""

from __future__ import annotations

import json
import threading

import torch
from chains import child_of, stopping_after  # tests/support/chains.py
from micro import MICRO  # tests/support/micro.py

from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny.checkpoint import file_sha256, newest_intact
from arctl.backends.tiny.evaluate import budget_accuracy, evaluate
from arctl.backends.tiny.settings import TinyRun
from arctl.backends.tiny.trainer import INIT_RECORD, train
from arctl.backends.tiny.warmup import warmup_model
from arctl.compose import resolve_experiment
from arctl.track import metrics_schema as ms


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_run_starts_from_the_final_weights_of_the_run_it_names(tmp_path):
    config = resolve_experiment("main-grpo", overrides=MICRO)[0].config
    parent = tmp_path / "runs" / "parent"
    assert train(config, parent, threading.Event()) == "completed"
    final = newest_intact(parent)
    assert final.state["step"] == 3

    child_config = {**config, "arm": "child", "trainer": {**config["trainer"], "init_from": "grpo", "init_run": "parent"},
                    "init_dir": str(parent)}
    child = tmp_path / "runs" / "child"
    assert train(child_config, child, threading.Event()) == "completed"
    init = json.loads((child / INIT_RECORD).read_text())
    assert init["run_id"] == "parent" and init["step"] == 3 and init["sha256"] == file_sha256(final.path)

    # its evaluation at step 0 is the evaluation of the parent's final weights (not of the warm-up)
    model, tok, _ = warmup_model(config, tmp_path / "w",
                                 lambda m, t: budget_accuracy(m, t, config, TinyRun.from_config(config).warmup_eval_problems))
    model.load_state_dict(final.state["model"])
    expected = evaluate(model, tok, InsertedTokens.from_tokenizer(tok), child_config,
                        list(TinyRun.from_config(child_config).eval_budgets))
    step0 = next(r for r in _rows(child) if r[ms.STEP_KEY] == 0)
    assert expected and all(step0[k] == v or (v != v and step0[k] != step0[k]) for k, v in expected.items()), \
        {k: (step0.get(k), v) for k, v in expected.items()}
    # its own steps 1..3, its own checkpoints; the parent's are untouched
    assert [r[ms.STEP_KEY] for r in _rows(child)] == [0, 1, 2, 3]
    assert newest_intact(child).state["step"] == 3 and file_sha256(newest_intact(parent).path) == init["sha256"]
    # a fresh optimizer: after as many updates as the parent, Adam has counted as many (not twice as many)
    def adam_steps(run_dir):
        state = torch.load(newest_intact(run_dir).path, map_location="cpu", weights_only=False)["optimizer"]["state"]
        return {int(s["step"]) for s in state.values()}

    assert adam_steps(child) == adam_steps(parent) and len(adam_steps(parent)) == 1


def test_a_resumed_kl_run_keeps_the_reference_it_started_from_or_says_it_is_gone(tmp_path):
    """From a review: every attempt rebuilt the KL reference from the parent's newest checkpoint of the moment,
    so after the parent was rerun (or its final checkpoint replaced) a resumed child trained against another
    reference without a word. Now the checkpoint init.json names, its sha256 checked: that one, or one line."""
    import pytest

    from arctl.backends.tiny.checkpoint import save_checkpoint

    config = resolve_experiment("main-grpo", overrides=[*MICRO, "optim.kl_coef=0.05"])[0].config
    parent = tmp_path / "runs" / "parent"
    assert train(config, parent, threading.Event()) == "completed"
    child_config = child_of(config, parent)
    child = tmp_path / "runs" / "child"
    with stopping_after(1) as stop:
        assert train(child_config, child, stop) == "preempted"
    # the workspace moved (another host's mount): init.json's path is the old one; the parent is found where it is
    moved = tmp_path / "moved"
    (tmp_path / "runs").rename(moved)
    parent, child = moved / "parent", moved / "child"
    child_config = {**child_config, "init_dir": str(parent)}
    assert train({**child_config, "trainer": {**child_config["trainer"], "total_steps": 2}}, child,
                 threading.Event()) == "completed"
    # the parent's final checkpoint replaced by other weights (a --force rerun of it)
    final = newest_intact(parent)
    model = torch.nn.Module()
    model.state_dict = lambda: {k: v + 1.0 for k, v in final.state["model"].items()}
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    save_checkpoint(parent, 3, model, optimizer, torch.Generator(), None, keep=2)
    with pytest.raises(ValueError, match=r"the checkpoint this run started from .* is gone or changed"):
        train(child_config, child, threading.Event())

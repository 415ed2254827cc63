"""A tiny run that stops learning fails, in one line (from a hunt).

A run whose loss turned NaN skipped every optimizer step from then on (verl's rule: a gradient norm that is
not finite skips the step), trained nothing for the rest of its length, saved checkpoints of its frozen
weights and ended COMPLETED, a good seed to every report. A run whose weights gave NaN logits kept
"generating": the sampler's search of a NaN CDF took the last token of the vocabulary, silently. Now: a
streak of ``arctl.backends.base.DIVERGED_STEPS`` steps that skipped every optimizer step fails the run (no
checkpoint of a step inside the streak), and logits that are not finite fail the step that sampled them."""

from __future__ import annotations

import json
import math
import threading

import pytest
import torch
from micro import MICRO  # noqa: E402 - tests/support/micro.py
from resolved import arm_config  # noqa: E402 - tests/support/resolved.py

from arctl.backends import base
from arctl.backends.tiny import trainer, update
from arctl.backends.tiny.checkpoint import newest_intact
from arctl.backends.tiny.rollout import sample
from arctl.launch.job import failure_line
from arctl.track import metrics_schema as ms
from arctl.track.phase import read_warning


def _config(steps: int) -> dict:
    return arm_config("main-grpo", "grpo", overrides=[*MICRO, f"trainer.total_steps={steps}", "trainer.test_freq=1000",
                                                      "trainer.save_freq=1", "wandb.mode=disabled"])


def _rows(run_dir) -> dict[int, dict]:
    return {r[ms.STEP_KEY]: r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}


def test_a_run_whose_loss_stays_nan_fails_at_the_third_step_that_skipped_every_update(tmp_path, monkeypatch):
    """The policy loss is NaN from step 2 on: steps 2, 3 and 4 skip every optimizer step, and the run fails at
    step 4 in one line that names the streak, the loss and the optimizer settings to change; the newest
    checkpoint is step 1's (the weights of the whole streak); the status warning said the streak as it grew."""
    nan_from, steps = 2, [0]
    ppo_update, policy_loss = trainer.ppo_update, update.tree_policy_loss

    def counted(*args, **kwargs):
        steps[0] += 1
        return ppo_update(*args, **kwargs)

    def nan_loss(*args, **kwargs):
        loss = policy_loss(*args, **kwargs)
        return loss * float("nan") if steps[0] >= nan_from else loss

    monkeypatch.setattr(trainer, "ppo_update", counted)
    monkeypatch.setattr(update, "tree_policy_loss", nan_loss)
    warnings = []
    write_warning = trainer.write_warning
    monkeypatch.setattr(trainer, "write_warning", lambda d, note: (warnings.append(note), write_warning(d, note)))
    config, run_dir = _config(8), tmp_path / "run"
    with pytest.raises(Exception) as failed:  # (before it: it completed, every step from 2 on skipped)
        trainer.train(config, run_dir, threading.Event())
    last = nan_from + base.DIVERGED_STEPS - 1
    line = failure_line(failed.value, run_dir)  # the run's reason in `arctl status` (status.json's error)
    optim = config["optim"]
    assert line.startswith(f"Diverged: steps {nan_from}-{last}: every optimizer step was skipped (")
    assert "train/loss nan" in line and f"the weights unchanged since step {nan_from - 1}" in line
    assert (f"optim.lr ({optim['lr']:g}), optim.weight_decay ({optim['weight_decay']:g}) or optim.grad_clip "
            f"({optim['grad_clip']:g})") in line
    assert len(line) < 500 and "\n" not in str(failed.value)
    assert steps[0] == last  # it stopped there, not at step 8
    assert int(newest_intact(run_dir).state["step"]) == nan_from - 1  # no checkpoint inside the streak
    rows = _rows(run_dir)
    assert sorted(rows) == list(range(last + 1)) and math.isnan(rows[last][ms.TRAIN_LOSS])
    # (2 optimizer steps a step: MICRO's 2 prompts, 1 a mini-batch)
    assert warnings == [f"step {nan_from}: every optimizer step was skipped (2 of 2: the gradient norm was not "
                        f"finite; train/loss nan), the weights unchanged since step {nan_from - 1}",
                        *warnings[1:]] and len(warnings) == base.DIVERGED_STEPS
    assert warnings[1].startswith(f"steps {nan_from}-{nan_from + 1}: every optimizer step was skipped (4 of 4: ")
    assert read_warning(run_dir).startswith(f"steps {nan_from}-{last}: every optimizer step was skipped")


def test_a_streak_shorter_than_the_limit_ends_and_the_run_completes(tmp_path, monkeypatch):
    """Two steps that skipped every update, then steps that train: the run completes, its checkpoints resume
    after the streak, and the warning keeps the streak's span."""
    ppo_update, policy_loss, steps = trainer.ppo_update, update.tree_policy_loss, [0]

    def counted(*args, **kwargs):
        steps[0] += 1
        return ppo_update(*args, **kwargs)

    monkeypatch.setattr(trainer, "ppo_update", counted)
    monkeypatch.setattr(update, "tree_policy_loss",
                        lambda *a, **k: policy_loss(*a, **k) * (float("nan") if steps[0] in (2, 3) else 1.0))
    run_dir = tmp_path / "run"
    assert trainer.train(_config(5), run_dir, threading.Event()) == "completed"
    kept = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*.pt"))
    assert "step_000002.pt" not in kept and "step_000003.pt" not in kept and "step_000005.pt" in kept
    assert read_warning(run_dir).startswith("steps 2-3: every optimizer step was skipped")


def test_weights_that_give_nan_logits_fail_the_next_step_that_samples(tmp_path, nan_after_update):
    """The update of step 1 leaves NaN weights (as a step whose decay flips them, lr x weight_decay >= 1, did):
    step 2's rollout fails in one line, naming the step and what to change, where it sampled the last token."""
    with pytest.raises(Exception) as failed:
        trainer.train(_config(4), tmp_path / "run", threading.Event())
    line = failure_line(failed.value, tmp_path / "run")
    assert line.startswith("Diverged: step 2: the policy's logits are not finite (NaN/inf) in ")
    assert "optim.lr (" in line


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sample_refuses_logits_that_are_not_finite(bad, temperature):
    """A NaN (or +inf) logit: no distribution to sample. The search of a NaN CDF returned the vocabulary's last
    token (NaN logits: [9, 9, 9]; +inf at token 1: token 2)."""
    logits = torch.zeros(3, 10)
    logits[1, 1] = bad
    with pytest.raises(FloatingPointError, match=r"the policy's logits are not finite \(NaN/inf\) in 1 of 3 row"):
        sample(logits, temperature, torch.Generator().manual_seed(0))


def test_sample_of_finite_logits_is_unchanged_and_takes_masked_tokens_never():
    """-inf logits (masked tokens) stay allowed; finite rows draw as before (the inverse CDF of one uniform per
    row, the generator's stream as before: the committed reference numbers check the runs)."""
    logits = torch.randn(64, 10, generator=torch.Generator().manual_seed(1))
    logits[:, 3] = float("-inf")
    g, again = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    drawn = sample(logits, 1.0, g)
    cdf = torch.softmax(logits, -1).cumsum(-1)
    u = torch.rand(64, 1, generator=again) * cdf[:, -1:]
    assert torch.equal(drawn, torch.searchsorted(cdf, u, right=True)[:, 0].clamp_max(9))
    assert (drawn != 3).all() and torch.equal(g.get_state(), again.get_state())


def test_the_skip_warning_says_the_loss_and_a_streak_its_span():
    """A step that skipped some optimizer steps says its loss: "train/loss shows whether the loss diverged" was
    said of a loss of 0.0 (finite; the backward pass overflowed). A step that updated a weight ends a streak."""
    streak = base.SkipStreak("lower optim.lr (10)")
    assert streak.update(4, 1, 2, 0.0) == ("step 4: the gradient norm was not finite in 1 of 2 optimizer step(s): "
                                           "skipped, as verl skips them (train/loss 0 is finite: the gradient "
                                           "overflowed)")
    assert streak.update(5, 0, 2, 0.1) is None and streak.first is None
    for step in range(6, 6 + base.DIVERGED_STEPS - 1):
        assert streak.update(step, 2, 2, float("inf")).endswith("train/loss inf), the weights unchanged since step 5")
        streak.fail()  # not yet
    assert streak.update(20, 1, 2, float("nan")).startswith("step 20: ") and streak.first is None  # reset
    for step in range(21, 21 + base.DIVERGED_STEPS):
        streak.update(step, 1, 1, float("nan"))
    with pytest.raises(base.Diverged, match=rf"^steps 21-{20 + base.DIVERGED_STEPS}: every optimizer step was "
                                            rf"skipped \({base.DIVERGED_STEPS} of {base.DIVERGED_STEPS}: .*the "
                                            r"weights unchanged since step 20: the training diverged — lower "
                                            r"optim.lr \(10\)$"):
        streak.fail()


@pytest.mark.parametrize("temperature", [1e-39, 1e-45])
def test_finite_logits_at_a_temperature_near_zero_take_their_argmax(temperature):
    """From a review: ``rollout.temperature=1e-39`` (in its range) scaled a warm-up's finite logits past a float's
    range, and the run failed at step 1 as "diverged". Such a row is its argmax (temperature 0's token), the random
    stream as before; a row the temperature does not overflow draws as before."""
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(2))
    logits[0] = 0.0  # every token alike: 0/1e-39 is 0, no overflow: drawn as before
    g, again = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    drawn = sample(logits, temperature, g)
    assert torch.equal(drawn[1:], logits[1:].argmax(-1))
    cdf = torch.softmax(logits[:1] / temperature, -1).cumsum(-1)
    assert drawn[0] == torch.searchsorted(cdf, torch.rand(4, 1, generator=again)[:1] * cdf[:, -1:], right=True)[0, 0]
    assert torch.equal(g.get_state(), again.get_state())

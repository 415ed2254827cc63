"""The micro scale of the tiny backend, shared by the tests that run real tiny training (a trainer
in-process, or jobs on the real SLURM), and the micro runs' committed reference numbers
(tests/tiny/test_reproducible.py; benchmarks/ship_warmstart.py reads them too)."""

import json
from pathlib import Path

REFERENCES = Path(__file__).resolve().parents[1] / "tiny" / "reference"  # micro_metrics*.json: one per machine kind


def references() -> dict[str, Path]:
    """kind of machine (arctl.backends.tiny.warmup.machine_kind) -> its committed reference file."""
    return {json.loads(p.read_text())["kind"]: p for p in sorted(REFERENCES.glob("micro_metrics*.json"))}

# micro scale: a 2-layer 32-wide model, a few warm-up steps, 3 RL steps on 2 prompts x 2 samples, at the
# tiny scale's budgets (48..192 thinking tokens): what the committed reference numbers of
# tests/tiny/test_reproducible.py were measured at
MICRO_AT_TINY_BUDGETS = [
    "model.hidden_size=32",
    "model.num_layers=2",
    "model.num_heads=2",
    "model.num_kv_heads=1",
    "model.intermediate_size=64",
    "tiny.task.search.min_items=4",
    "tiny.task.search.max_items=8",
    "tiny.warmup.steps=4",
    "tiny.warmup.batch_size=8",
    "tiny.warmup.max_rounds=1",
    "tiny.warmup.eval_problems=4",
    "tiny.diag_problems=2",
    "data.train_batch_size=2",
    "data.ppo_mini_batch_size=1",
    "rollout.n=2",
    "trainer.total_steps=3",
    "trainer.test_freq=2",
    "trainer.save_freq=2",
    "eval.num_problems=4",
    "eval.grid_size=4",
]

# ... and at a sixth of them: the search task's micro problems (4-8 items) are cut at every budget, and a
# micro run decodes ~4x fewer tokens (5.3 s -> 1.7 s a run). The settings that are parts of the largest
# budget (ThinkPrune's limits, L1's targets, Elastic's t and s, the Dr. GRPO constant) follow it.
MICRO_DIVISOR = 6
MICRO_BUDGETS = "scale.budgets=[8,16,24,32]"  # the tiny scale's [48,96,144,192] / MICRO_DIVISOR
MICRO = [*MICRO_AT_TINY_BUDGETS, MICRO_BUDGETS]


def micro_for(name: str) -> list[str]:
    """MICRO for experiment ``name``: its own tiny-scale budgets / MICRO_DIVISOR (ctx-16k keeps its 8
    budgets, to 64; the others get MICRO's)."""
    from resolved import arm_config  # tests/support/resolved.py

    from arctl.compose.experiment import load_experiment

    arm = next(iter(load_experiment(name).arms))
    budgets = arm_config(name, arm, overrides=MICRO_AT_TINY_BUDGETS)["scale"]["budgets"]
    return [*MICRO_AT_TINY_BUDGETS, f"scale.budgets=[{','.join(str(max(1, b // MICRO_DIVISOR)) for b in budgets)}]"]

"""The micro scale of the tiny backend, shared by the tests that run real tiny training (a trainer
in-process, or jobs on the real SLURM)."""

# micro scale: a 2-layer 32-wide model, a few warm-up steps, 3 RL steps on 2 prompts x 2 samples
MICRO = [
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

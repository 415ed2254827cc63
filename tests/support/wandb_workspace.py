"""Build a small arctl workspace of REAL offline W&B runs (written by the installed wandb through
arctl.track.writer.open_run), with metric values given by closed formulas so tests can compute
every expected number by hand.

Layout: ``<root>/runs/<run_id>/config.yaml`` + ``<root>/runs/<run_id>/wandb/...``. Special cases:
``main-ar-uniform--ar-uniform--s1`` is resumed (two fragments overlapping on steps 8..12, the first
fragment's overlap values are wrong on purpose); ``ablation-vr--grpo-vr--s1`` is truncated in its
second 32 KiB block; ``r1-7b--ar-uniform--s0`` has no config.yaml.
"""

from __future__ import annotations

import os
from pathlib import Path

ARM_BASE = {
    "grpo": 0.30, "ar-base": 0.34, "ar-linear": 0.35, "ar-uniform": 0.36,
    "grpo-dense": 0.33, "grpo-decouple": 0.32, "grpo-vr": 0.31, "r1-distill": 0.20,
}
DS_OFFSET = {"aime24": 0.0, "amc22": 0.2, "math500": 0.4}
TRAIN_BUDGETS = [2000, 4000, 6000, 8000]
GRID = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
LAST_STEP = 20
EVAL_EVERY = 10
TRAIN_DATASETS = ["aime24", "amc22"]
FINAL_DATASETS = ["aime24", "amc22", "math500"]

RUNS = [  # (experiment, arm, seed)
    ("main-grpo", "grpo", 0), ("main-grpo", "grpo", 1),
    ("main-ar-base", "ar-base", 0), ("main-ar-linear", "ar-linear", 0),
    ("main-ar-uniform", "ar-uniform", 0), ("main-ar-uniform", "ar-uniform", 1),
    ("ablation-dense", "grpo", 0), ("ablation-dense", "grpo-dense", 0), ("ablation-dense", "grpo-dense", 1),
    ("ablation-decouple", "grpo", 0), ("ablation-decouple", "grpo-decouple", 0),
    ("ablation-vr", "grpo", 0), ("ablation-vr", "grpo-vr", 0),
    ("r1-7b", "grpo", 0), ("r1-7b", "ar-uniform", 0),
    ("ctx-16k", "grpo", 0), ("ctx-16k", "ar-uniform", 0),
]
RESUMED = ("main-ar-uniform", "ar-uniform", 1)
NO_CONFIG_YAML = ("r1-7b", "ar-uniform", 0)
TRUNCATED = ("ablation-vr", "grpo-vr", 1)
TRUNCATED_STEPS = 400
COV = ("variance-diag", "r1-distill", 0)


def run_id(experiment: str, arm: str, seed: int) -> str:
    return f"{experiment}--{arm}--s{seed}"


def acc(arm: str, seed: int, ds: str, budget: int, step: int) -> float:
    """Accuracy written for eval/{ds}/acc@{budget} at ``step``."""
    return round(ARM_BASE[arm] + DS_OFFSET[ds] + 0.01 * seed + 0.00002 * budget + 0.001 * step, 6)


def anytime_acc(arm, seed, ds, step) -> float:
    return sum(acc(arm, seed, ds, b, step) for b in TRAIN_BUDGETS) / len(TRAIN_BUDGETS)


def grid_anytime_acc(arm, seed, ds, step) -> float:
    """eval/{ds}/grid_anytime_acc of the final evaluation (mean over the 32-budget GRID)."""
    return sum(acc(arm, seed, ds, b, step) for b in GRID) / len(GRID)


def final_acc(arm, seed, ds, step) -> float:
    return acc(arm, seed, ds, max(TRAIN_BUDGETS), step)


def think_len(arm, seed, ds, step) -> float:
    return 4000.0 - 10.0 * step + 100.0 * seed + (0 if ds == "aime24" else 500)


def train_row(arm: str, seed: int, step: int) -> dict:
    row = {f"train/score@{b}": acc(arm, seed, "aime24", b, step) for b in TRAIN_BUDGETS}
    row.update({
        "train/anytime_score": anytime_acc(arm, seed, "aime24", step),
        "train/final_score": final_acc(arm, seed, "aime24", step),
        "train/think_len/mean": think_len(arm, seed, "aime24", step),
        "train/adv_var/brpo": 0.1, "train/adv_var/v1": 0.2, "train/adv_var/v2": 0.3,
        "train/reward/mean": 0.5, "train/loss": 1.0 / (step + 1), "train/entropy": 0.7,
        "perf/step_time_s": 0.01,
    })
    return row


def eval_row(arm: str, seed: int, step: int, datasets, budgets) -> dict:
    row = {}
    for ds in datasets:
        for b in budgets:
            row[f"eval/{ds}/acc@{b}"] = acc(arm, seed, ds, b, step)
        row[f"eval/{ds}/anytime_acc"] = anytime_acc(arm, seed, ds, step)
        if list(budgets) == list(GRID):
            row[f"eval/{ds}/grid_anytime_acc"] = grid_anytime_acc(arm, seed, ds, step)
        row[f"eval/{ds}/final_acc"] = final_acc(arm, seed, ds, step)
        row[f"eval/{ds}/think_len"] = think_len(arm, seed, ds, step)
    return row


def corr(kind: str, budget: int) -> float:
    """eval/aime24/corr_{kind}@{budget} of the variance-diagnostic run."""
    x = budget / 8000
    return round(0.2 + 0.7 * x, 6) if kind == "v1" else round(0.8 - 0.6 * x, 6)


def nvar(kind: str, budget: int) -> float:
    x = budget / 8000
    return {"grpo": 1.0, "brpo": round(1.0 - 0.5 * x, 6), "v1": round(1.2 - 0.6 * x, 6)}[kind]


def _config(experiment, arm, seed, project) -> dict:
    return {
        "experiment": experiment, "arm": arm, "seed": seed, "scale": "tiny", "backend": "tiny",
        "thinking": {"prior": "uniform", "budgets": TRAIN_BUDGETS, "lam": 0.5},
        "eval": {"budgets": TRAIN_BUDGETS, "grid": GRID, "datasets": TRAIN_DATASETS},
        "wandb": {"project": project, "mode": "offline"},
        "run_id": run_id(experiment, arm, seed),
    }


def _write_run(root: Path, experiment, arm, seed, steps, *, bad_from=None, config_yaml=True,
               final=True, extra_rows=None, recorded=None, wandb_config=None):
    import yaml

    from arctl.track.writer import open_run

    rid = run_id(experiment, arm, seed)
    run_dir = root / "runs" / rid
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = _config(experiment, arm, seed, "arctl-test")
    if config_yaml:
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = open_run({**cfg, **(wandb_config or {})}, run_dir)
    if recorded:  # what a job records in its W&B config beside the resolved one (e.g. the tiny warm-up, the machine)
        run.config.update(recorded, allow_val_change=True)
    for step in steps:
        row = {"trainer/global_step": step, **train_row(arm, seed, step)}
        if step % EVAL_EVERY == 0:
            row.update(eval_row(arm, seed, step, TRAIN_DATASETS, TRAIN_BUDGETS))
        if final and step == LAST_STEP:
            row.update(eval_row(arm, seed, step, FINAL_DATASETS, GRID))
        if bad_from is not None and step >= bad_from:
            row = {k: (v + 0.5 if k != "trainer/global_step" else v) for k, v in row.items()}
        run.log(row)
    for extra in extra_rows or []:
        run.log(extra)
    run.finish()
    return run_dir


def build_workspace(root: Path) -> Path:
    """Write every run of :data:`RUNS` (+ the special cases) under ``root``; returns ``root``."""
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    steps = list(range(LAST_STEP + 1))
    for experiment, arm, seed in RUNS:
        if (experiment, arm, seed) == RESUMED:
            _write_run(root, experiment, arm, seed, list(range(0, 13)), bad_from=8, final=False)
            _write_run(root, experiment, arm, seed, list(range(8, LAST_STEP + 1)))
        else:
            _write_run(root, experiment, arm, seed, steps,
                       config_yaml=(experiment, arm, seed) != NO_CONFIG_YAML)
    # a long run, then cut in the middle of its second 32 KiB block
    run_dir = _write_run(root, *TRUNCATED, list(range(TRUNCATED_STEPS)), final=False)
    import wandb

    wandb.teardown()  # finish() can return before wandb-core has closed the file
    (path,) = {p.resolve() for p in run_dir.rglob("run-*.wandb")}
    data = path.read_bytes()
    assert len(data) > 2 * 32768, len(data)
    path.write_bytes(data[: 32768 + 5000])
    # variance diagnostics: one evaluation of correlations and normalised variances per budget
    cov_row = {"trainer/global_step": 0}
    for b in GRID:
        for kind in ("v1", "v2"):
            cov_row[f"eval/aime24/corr_{kind}@{b}"] = corr(kind, b)
        for kind in ("brpo", "grpo", "v1"):
            cov_row[f"eval/aime24/nvar/{kind}@{b}"] = nvar(kind, b)
    # and a later one (the trained model's): the figure shows the first (from a review: the command drew the last)
    later = {k: (v if k == "trainer/global_step" else v / 2) for k, v in cov_row.items()} | {"trainer/global_step": 10}
    _write_run(root, *COV, [], extra_rows=[cov_row, later])
    wandb.teardown()  # stop this process's service: a later child process must not inherit it (WANDB_SERVICE)
    return root


_BUILT: dict[str, Path] = {}


def shared_workspace(tmp_path_factory) -> Path:
    """One workspace per pytest session, whichever test directory asks first."""
    if "ws" not in _BUILT:
        _BUILT["ws"] = build_workspace(tmp_path_factory.mktemp("arctl-ws"))
    return _BUILT["ws"]


def frame_records(payloads: list[bytes], block_len: int = 32768) -> bytes:
    """A .wandb byte string holding ``payloads`` as records: an independent, straightforward
    implementation of the LevelDB log framing (IEEE CRC-32 over type byte + data, like wandb-core)."""
    import struct
    import zlib

    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for payload in payloads:
        rest = payload
        first = True
        while True:
            left = block_len - len(out) % block_len
            if left < 7:
                out += b"\x00" * left
                continue
            room = left - 7
            piece, rest = rest[:room], rest[room:]
            last = not rest
            ctype = 1 if first and last else 2 if first else 4 if last else 3
            crc = zlib.crc32(bytes([ctype]) + piece) & 0xFFFFFFFF
            out += struct.pack("<IHB", crc, len(piece), ctype) + piece
            first = False
            if last:
                break
    return bytes(out)

"""An arm's seeds are runs of one config (from a hunt): ``arctl sweep paper --seeds 0,1`` and then ``--seeds 2
optim.lr=0.0005`` left three runs of GRPO whose figure said "from 9 run(s)" and averaged seed 2 at another learning
rate with the others, and whose claims tested them as three seeds with only a generic warning. A report refuses
them with one line naming the seeds, the key and the ``--where`` that chooses; what legitimately differs between
seeds (the seed, the run's names and ids, launch sections, the run a run starts from, a key added later at its
default, a knob the arm does not read, the machine recorded beside the config) does not count. And the claims'
command for missing seeds carries the overrides the runs read share, so that it trains their config."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.cells import one_run_per_arm_seed, one_run_per_cell
from arctl.report.claims import RunView, one_config_per_arm_seed
from arctl.report.errors import ReportError
from arctl.track.runs import Runs

runner = CliRunner()


def row(seed: int, arm: str = "grpo", **config) -> dict:
    rid = f"main-{arm}_{arm}_s{seed}_{abs(hash(json.dumps(config, sort_keys=True, default=str))) % 10**6:06d}"
    out = {"run_id": rid, "experiment": f"main-{arm}", "arm": arm, "seed": seed, "config.scale.name": "tiny",
           "config.backend": "tiny", "config.seed": seed, "config.thinking.lam": 0.5, "config.optim.lr": 1e-4,
           "config.reward.length_penalty": "none", "config.reward.alpha": 0.2, "config.wandb.name": f"{arm}-s{seed}",
           "config.wandb.id": rid, "config.run_id": rid, "config.trainer.init_run": None, "config.trainer.total_steps": 3,
           "config.cluster.mem_gb": 4.0, "config.machine": "AMD EPYC | AVX512", "recorded": "machine"}
    out.update({f"config.{k.replace('__', '.')}": v for k, v in config.items()})
    return out


def table_of(*rows: dict) -> pd.DataFrame:
    """The runs table as a figure reads it: through one_run_per_cell (keys added later filled)."""
    table = pd.DataFrame.from_records(rows)
    history = pd.DataFrame({"run_id": table["run_id"], "experiment": table["experiment"], "arm": table["arm"],
                            "seed": table["seed"], "step": 0, "metric": "eval/toy/final_acc",
                            "value": np.arange(len(table), dtype=float)})
    return one_run_per_cell(Runs(history=history, runs=table)).runs


def test_an_arms_seeds_of_other_configs_are_one_error_line_for_a_figure():
    table = table_of(row(0), row(1), row(2, optim__lr=5e-4), row(0, "ar-uniform"), row(1, "ar-uniform"))
    with pytest.raises(ReportError) as e:
        one_run_per_arm_seed(table)
    assert str(e.value) == ("arm 'grpo': seeds 0,1 and seed 2 are runs of other configs (optim.lr 0.0001 vs 0.0005): "
                            "a figure or table averages an arm's runs over seeds; choose one config with "
                            "--where optim.lr=VALUE")
    one_run_per_arm_seed(table[table["seed"] < 2])  # one config's seeds: read
    # three configs, a grid key named first and the other keys counted
    three = table_of(row(0), row(1, optim__lr=5e-4, thinking__lam=0.75), row(2, optim__lr=1e-3))
    with pytest.raises(ReportError, match=r"^arm 'grpo': seed 0, seed 1 and seed 2 are runs of other configs "
                                          r"\(thinking.lam 0.5 vs 0.75 vs 0.5 and 1 more key\(s\)\).*--where thinking.lam=VALUE$"):
        one_run_per_arm_seed(three, ["thinking.lam"])


def test_what_legitimately_differs_between_seeds_does_not_count():
    table = table_of(
        row(0, trainer__init_run="main-grpo_grpo-r1_s0_abc", machine="Intel Xeon | AVX2"),  # names its seed
        row(1, trainer__init_run="main-grpo_grpo-r1_s1_def", cluster__mem_gb=8.0),  # where it ran
        row(2, trainer__init_run="main-grpo_grpo-r1_s2_123", reward__alpha=0.1),  # GRPO reads no reward.alpha
        row(3, trainer__init_run="main-grpo_grpo-r1_s3_456", optim__kl_coef=0.0),  # a key added later, at its default
    )
    one_run_per_arm_seed(table)
    with pytest.raises(ReportError, match="optim.kl_coef 0.0 vs 0.1"):  # added later, at another value: a config
        one_run_per_arm_seed(table_of(row(0, optim__kl_coef=0.0), row(1, optim__kl_coef=0.1)))


def _view(seed: int, **config) -> RunView:
    from arctl.report.cells import compute_key, computed_items

    rec = row(seed, **config)
    return RunView(rec["run_id"], "main-grpo", "grpo", seed, {}, {}, 4, 4, {}, compute_key(rec), computed_items(rec))


def test_the_claims_refuse_an_arms_seeds_of_other_configs():
    with pytest.raises(ReportError) as e:
        one_config_per_arm_seed([_view(0), _view(1), _view(2, optim__lr=5e-4)])
    assert str(e.value) == ("arm 'grpo': seeds 0,1 and seed 2 are runs of other configs (optim.lr 0.0001 vs 0.0005): "
                            "the claims read an arm's runs as its seeds; choose one config with --where optim.lr=VALUE")
    one_config_per_arm_seed([_view(0), _view(1, wandb__name="x"), _view(2)])


def test_the_command_for_missing_seeds_carries_the_overrides_the_runs_share():
    from arctl.report.cells import CONFIG_PREFIX, cell_composer
    from arctl.report.claims_render import missing_command_for, shared_overrides

    compose = cell_composer(["paper"])

    def run(seed: int, lr: float) -> tuple[RunView, dict]:
        cell = compose("main-grpo", "grpo", seed, "tiny")
        rec = {"run_id": f"g{seed}", "experiment": "main-grpo", "arm": "grpo", "seed": seed,
               **{CONFIG_PREFIX + k: v for k, v in cell.items()}, CONFIG_PREFIX + "optim.lr": lr}
        return RunView(f"g{seed}", "main-grpo", "grpo", seed, {}, {}, 4, 4, {}), rec

    alike = [run(0, 5e-4), run(1, 5e-4)]
    overrides, uneven = shared_overrides([v for v, _ in alike], pd.DataFrame([r for _, r in alike]), ["paper"], compose)
    assert (overrides, uneven) == (["optim.lr=0.0005"], [])
    command = missing_command_for({"paper": ["main-grpo"]}, "tiny", sharing=["paper"], workdir="/w", overrides=overrides)
    assert command("grpo", [2]) == "arctl sweep paper --scale tiny --seeds 2 optim.lr=0.0005 --workdir /w"
    unlike = [run(0, 5e-4), run(1, compose("main-grpo", "grpo", 1, "tiny")["optim.lr"])]
    assert shared_overrides([v for v, _ in unlike], pd.DataFrame([r for _, r in unlike]), ["paper"], compose) == \
        ([], ["optim.lr"])
    quoted = missing_command_for({"paper": ["main-grpo"]}, "tiny", sharing=["paper"], overrides=["scale.budgets=[8,16]"])
    assert quoted("grpo", [2]) == "arctl sweep paper --scale tiny --seeds 2 'scale.budgets=[8,16]'"


def _write(ws, run, value: float) -> str:
    """A real offline W&B run of the resolved ``run`` (config.yaml as the launcher writes it), finished."""
    return write_resolved_run(ws, run, final=lambda cfg: {
        **{f"eval/toy/acc@{b}": value for b in cfg["eval"]["budgets"]}, "eval/toy/anytime_acc": value,
        "eval/toy/grid_anytime_acc": value, "eval/toy/final_acc": value, "eval/toy/think_len": 30.0})


def test_a_report_of_a_workspace_with_a_seed_at_another_learning_rate_is_one_error_line(tmp_path):
    import wandb

    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import resolve_arm

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    grpo = load_experiment("main-grpo")
    for seed in (0, 1):
        _write(ws, resolve_arm(grpo, "grpo", seed, "tiny"), 0.2 + 0.01 * seed)
    _write(ws, resolve_arm(grpo, "grpo", 2, "tiny", user_overrides=["optim.lr=0.0005"]), 0.5)
    wandb.teardown()
    for command in (["--table", "final", "--experiment", "main-grpo"], ["--claims", "paper", "--scale", "tiny"]):
        res = runner.invoke(app, ["report", *command, "--workdir", str(ws), "--out", str(tmp_path / "out")])
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1, res.output
        assert lines[0].startswith("error: arm 'grpo': seeds 0,1 and seed 2 are runs of other configs (optim.lr "), res.output
        assert lines[0].endswith("--where optim.lr=VALUE") and not (tmp_path / "out").exists()
    res = runner.invoke(app, ["report", "--claims", "paper", "--scale", "tiny", "--workdir", str(ws), "--where",
                              "optim.lr=0.0005", "--out", str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {r["seed"] for r in doc["runs"]} == {2}
    commands = {c for claim in doc["claims"] for t in claim["tests"] for c in t.get("commands") or []}
    assert commands and all("optim.lr=0.0005" in c for c in commands), commands  # trains the config of the runs read


def test_eval_only_seeds_of_their_own_checkpoints_and_a_machine_read_without_config_yaml_are_one_config():
    """From a review: each seed's eval-only run (``verl.eval_checkpoint=RUN_s{seed}/checkpoints/global_step_N``, the
    paper's final evaluation) names its own seed's run, and was refused as "other configs" with a --where that kept
    one seed; a run read without its config.yaml (a W&B project) has no ``recorded`` column, and the machine kind its
    job recorded (or verl's own config, with each seed's folder) was read as config. Seeds evaluating another step
    are still other configs."""
    def evaluates(seed: int, step: int = 630, **config) -> dict:
        return row(seed, verl__eval_only=True, backend="verl", scale__name="paper",
                   verl__eval_checkpoint=f"/scratch/ws/runs/main-grpo_grpo_s{seed}_abc/checkpoints/global_step_{step}",
                   **config)

    one_run_per_arm_seed(table_of(evaluates(0), evaluates(1), evaluates(2)))
    with pytest.raises(ReportError, match=r"verl.eval_checkpoint .*global_step_630 vs .*global_step_400"):
        one_run_per_arm_seed(table_of(evaluates(0), evaluates(1, 400)))
    unrecorded = [{**row(seed, machine=kind, trainer__default_local_dir=f"/ws/runs/s{seed}/checkpoints"),
                   "recorded": ""} for seed, kind in ((0, "AMD EPYC | AVX512"), (1, "Intel Xeon | AVX512"))]
    one_run_per_arm_seed(table_of(*unrecorded))

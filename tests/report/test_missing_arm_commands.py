"""The command a figure or table gives for an arm of its spec without runs trains runs read beside the others
(from a hunt): in a workspace of runs trained with the micro overrides at seeds 0-2, it said
`arctl run my-lam --arm ar-new --workdir WS`, without the overrides, the seeds or the --where in effect, and so
trained a 100-step run of one seed of another config, which the report then refused or left out. It now carries
the scale, the seeds and the overrides the runs read share (as the claims' commands do:
arctl.report.claims_render.shared_overrides), and a --where the arm's cell does not meet."""

from __future__ import annotations

import json
import os
import shlex

import pandas as pd
from micro import MICRO_AT_TINY_BUDGETS  # tests/support/micro.py
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.experiment import load_experiment
from arctl.compose.resolve import resolve_arm
from arctl.report.cells import CONFIG_PREFIX, cell_composer
from arctl.report.data import missing_arms_warning

runner = CliRunner()


def _write(ws, run, value: float) -> str:
    """A real offline W&B run of the resolved ``run`` (config.yaml as the launcher writes it), finished."""
    return write_resolved_run(ws, run, every_step={f"eval/{ds}/{key}": (30.0 if key == "think_len" else value)
                                                   for ds in ("aime24", "amc22")
                                                   for key in ("anytime_acc", "final_acc", "think_len")})


def _warning(doc: dict) -> str:
    (line,) = [w for w in doc["warnings"] if "have no runs in" in w]
    return line


def _commands(line: str) -> list[str]:
    return [c for c in line.split("`")[1::2] if c.startswith("arctl ")]


def _planned(command: str) -> list[dict]:
    """The runs ``command`` (as printed) would launch: `--dry-run --json`."""
    res = runner.invoke(app, [*shlex.split(command)[1:], "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    return doc["runs"]


def test_a_figure_s_missing_arms_command_trains_runs_of_the_config_and_seeds_read(tmp_path):
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    exp = load_experiment("ablation-dense")
    written = {}
    for arm in ("grpo", "grpo-dense"):
        for seed in (0, 1, 2):
            run = resolve_arm(exp, arm, seed, "tiny", user_overrides=list(MICRO_AT_TINY_BUDGETS))
            written[(arm, seed)] = run.config
            _write(ws, run, 0.2 + 0.01 * seed)
    wandb.teardown()
    res = runner.invoke(app, ["report", "--figure", "ablation_dense", "--workdir", str(ws), "--out",
                              str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    line = _warning(json.loads(res.stdout))
    run_cmd, sweep_cmd = _commands(line)
    assert run_cmd.startswith("arctl run ablation-dense --arm grpo-lp-v1 --arm grpo-lp-v2 --seeds 0-2 "), line
    assert run_cmd.endswith(f" --workdir {ws}") and "trainer.total_steps=3" in run_cmd and "model.hidden_size=32" in run_cmd
    assert sweep_cmd.startswith("arctl sweep ablations --seeds 0-2 ") and "trainer.total_steps=3" in sweep_cmd, line
    assert "no one way" not in line, line
    # run as printed, it plans every seed of both arms at the config of the runs read (the micro scale's)
    planned = _planned(run_cmd)
    assert sorted((r["arm"], r["seed"]) for r in planned) == [(a, s) for a in ("grpo-lp-v1", "grpo-lp-v2")
                                                               for s in (0, 1, 2)]
    grpo = written[("grpo", 0)]
    for r in planned:
        cfg = r["config"]
        assert (cfg["trainer"]["total_steps"], cfg["model"], cfg["eval"]["budgets"], cfg["data"]) == \
            (3, grpo["model"], grpo["eval"]["budgets"], grpo["data"]), r["run_id"]
    # --where reward.alpha=0.1 keeps the GRPO runs (they read no reward.alpha); the length-penalty arms read it: the
    # command sets it, so that the runs it trains are those the same --where keeps
    res = runner.invoke(app, ["report", "--figure", "ablation_dense", "--workdir", str(ws), "--out",
                              str(tmp_path / "w"), "--json", "--where", "reward.alpha=0.1"])
    assert res.exit_code == 0, res.output
    run_cmd = _commands(_warning(json.loads(res.stdout)))[0]
    assert " reward.alpha=0.1 " in run_cmd and run_cmd.count("reward.alpha") == 1, run_cmd
    assert {r["config"]["reward"]["alpha"] for r in _planned(run_cmd)} == {0.1}


def _row(compose, arm: str, seed: int, **changed) -> dict:
    cell = compose("ablation-dense", arm, seed, "tiny")
    rec = {"run_id": f"{arm}-s{seed}", "experiment": "ablation-dense", "arm": arm, "seed": seed,
           **{CONFIG_PREFIX + k: v for k, v in cell.items()}}
    rec.update({CONFIG_PREFIX + k: v for k, v in changed.items()})
    return rec


def test_runs_no_overrides_give_their_config_are_said_and_the_scale_is_carried():
    compose = cell_composer(["ablations"])
    spec = {"kind": "figure", "sweep": "ablations"}
    # the runs read differ from their cells in optim.lr, one way per seed: no overrides give them all
    uneven = pd.DataFrame([_row(compose, "grpo", 0, **{"optim.lr": 5e-4}), _row(compose, "grpo", 1)])
    line = missing_arms_warning(spec, {"grpo-dense": ["ablation-dense"]}, None, "/w", where=" --workdir /w",
                                runs_read=uneven)
    assert "`arctl run ablation-dense --arm grpo-dense --seeds 0,1 --workdir /w`" in line, line
    assert line.endswith("but the runs read differ from their cells in optim.lr, in no one way that overrides "
                         "give every run: add those of the runs it should match"), line
    # runs of one config at the paper scale: the command says --scale paper (the experiment's default is tiny)
    compose = cell_composer([])
    paper = [{**_row(compose, "grpo", s), **{CONFIG_PREFIX + k: v for k, v in
                                             compose("ablation-dense", "grpo", s, "paper").items()}} for s in (0, 1)]
    line = missing_arms_warning({"kind": "figure"}, {"grpo-dense": ["ablation-dense"]}, None, "/w",
                                runs_read=pd.DataFrame(paper))
    assert "`arctl run ablation-dense --arm grpo-dense --scale paper --seeds 0,1`" in line, line

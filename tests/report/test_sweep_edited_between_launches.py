"""Reports of a sweep edited between launches (from a hunt, "evolve" findings 2, 3, 4 and 6): ``--where
optim.lr=3e-4`` finds the runs of 0.0003 (read as Hydra reads the launch's override, not as YAML 1.1); a grid point
chosen with ``--where`` is no run that "differs from its cell"; after one arm's edit and new seeds, the error names
first the launch that makes the arm one config, a missing arm's command does not train it at the edited arm's
value, and arms read at uneven seed counts are said; seeds the sweep lists with no runs are said, with the launch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from resolved_runs import write_resolved_run  # tests/support/resolved_runs.py
from spec_tree import write_specs  # tests/support/spec_tree.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.experiment import load_experiment
from arctl.compose.resolve import resolve_arm
from arctl.report.cells import parse_where

runner = CliRunner()
FIGURE = ("kind: figure\nname: evfig\nbuilder: training_curves\nexperiments: [evx]\narms: [grpo, grpo-vr]\n"
          "datasets: [aime24]\npanels:\n  - {key: \"eval/aime24/anytime_acc\", label: acc}\n")


@pytest.fixture
def specs(tmp_path, monkeypatch) -> Path:
    return write_specs(tmp_path / "specs", reports={"evfig": FIGURE}, monkeypatch=monkeypatch)


def _experiment(root: Path, grpo: str = "") -> None:
    (root / "experiments" / "evx.yaml").write_text(
        f"description: evolve\nseeds: [0]\narms:\n  grpo: [algo=grpo, prior=base{grpo}]\n"
        "  grpo-vr: [algo=grpo-vr, prior=base]\n")


def _train(ws: Path, arm: str, seeds, *overrides: str) -> list[str]:
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ids = [write_resolved_run(ws, resolve_arm(load_experiment("evx"), arm, seed, "tiny", user_overrides=list(overrides)),
                              every_step={"eval/aime24/anytime_acc": 0.3}) for seed in seeds]
    wandb.teardown()
    return ids


def _report(tmp_path: Path, ws: Path, *extra: str, code: int = 0):
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    res = runner.invoke(app, ["report", "--figure", "evfig", "--sweep", "evs", "--workdir", str(ws), "--out", str(out),
                              "--json", *extra])
    assert res.exit_code == code, res.output
    return json.loads(res.stdout) if code == 0 else res.output


@pytest.mark.parametrize(("text", "value"), [("1e-4", 1e-4), ("3e-4", 3e-4), ("5E-4", 5e-4), ("0.0003", 3e-4),
                                             ("2", 2), ("true", True), ("null", None), ("[48, 96]", [48, 96])])
def test_where_values_are_read_as_a_launch_reads_an_override(text, value):
    ((key, got, scope),) = parse_where([f"optim.lr={text}"])
    assert (key, scope) == ("optim.lr", None) and got == value and type(got) is type(value)


@pytest.mark.parametrize(("text", "value"), [("math-verify", "math-verify"), ("uniform", "uniform"),
                                             ("'3e-4'", "3e-4"), ("1e-4x", "1e-4x"), ("a,b", "a,b"), ("", "")])
def test_where_text_values_stay_text(text, value):
    ((_, got, _),) = parse_where([f"verl.grader={text}"])
    assert got == value


def test_a_grid_point_chosen_with_where_is_read_without_a_cell_warning_and_3e_4_is_0_0003(tmp_path, specs):
    _experiment(specs)
    (specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1]\n"
                                               "grid: {optim.lr: [0.0001, 0.0003]}\n")
    ws = tmp_path / "ws"
    at = {lr: [*_train(ws, "grpo", (0, 1), f"optim.lr={lr}"), *_train(ws, "grpo-vr", (0, 1), f"optim.lr={lr}")]
          for lr in ("0.0001", "0.0003")}
    for text in ("0.0003", "3e-4", "3E-4"):
        doc = _report(tmp_path, ws, "--where", f"optim.lr={text}")
        assert sorted(r["run_id"] for r in doc["runs"]) == sorted(at["0.0003"]), text
        said = " | ".join(doc["warnings"])
        assert "differ from their cell" not in said and "seed(s)" not in said, said


def test_seeds_the_sweep_lists_without_runs_are_said_with_their_launch(tmp_path, specs):
    (specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1, 2, 3]\n")
    _experiment(specs)
    ws = tmp_path / "ws"
    _train(ws, "grpo", (0, 1))
    _train(ws, "grpo-vr", (0, 1))
    doc = _report(tmp_path, ws)
    (line,) = [w for w in doc["warnings"] if "seed(s)" in w]
    assert line == (f"sweep evs lists seed(s) 2,3, which no run read here has (not launched yet?): launch them with "
                    f"`arctl sweep evs --seeds 2,3 --workdir {ws}`"), line


@pytest.fixture
def edited(tmp_path, specs):
    """Seeds 0,1 of both arms at the default learning rate; GRPO's then edited to 0.0005 and seeds 2,3 launched."""
    (specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1, 2, 3]\n")
    ws = tmp_path / "ws"
    _experiment(specs)
    old = _train(ws, "grpo", (0, 1))
    _train(ws, "grpo-vr", (0, 1))
    _experiment(specs, ", optim.lr=0.0005")
    new = _train(ws, "grpo", (2, 3))
    _train(ws, "grpo-vr", (2, 3))
    return ws, old, new


def test_the_cross_seed_error_names_first_the_launch_that_makes_the_arm_one_config(tmp_path, edited):
    ws, _, _ = edited
    out = _report(tmp_path, ws, code=2)
    assert (f"a figure or table averages an arm's runs over seeds; make them one config as the specs now stand with "
            f"`arctl sweep evs --seeds 0,1 --workdir {ws}`, or choose one config with --where optim.lr=VALUE") in \
        " ".join(out.split()), out


def test_a_missing_arm_s_command_does_not_train_it_at_another_arm_s_edited_value(tmp_path, edited):
    ws, _, new = edited
    doc = _report(tmp_path, ws, "--where", "optim.lr=0.0005")  # GRPO+BRPO never ran at it
    assert sorted(r["run_id"] for r in doc["runs"]) == sorted(new)
    (line,) = [w for w in doc["warnings"] if "have no runs in" in w]
    assert line.endswith(f"produce them with `arctl sweep evs --seeds 2,3 --workdir {ws}`"), line


def test_arms_read_at_uneven_seed_counts_are_said(tmp_path, edited):
    ws, old, _ = edited
    doc = _report(tmp_path, ws, "--where", "optim.lr=0.0001")  # GRPO at 2 seeds beside GRPO+BRPO at 4
    assert sorted(r["run_id"] for r in doc["runs"] if r["arm"] == "grpo") == sorted(old)
    (line,) = [w for w in doc["warnings"] if "uneven" in w]
    assert line.startswith("the arms are read at uneven seed counts: GRPO 2 (seeds 0,1), "), line
    assert "4 (seeds 0-3)" in line, line


def test_an_arm_s_where_filters_that_arm_alone(tmp_path, edited):
    """From a hunt ("evolve"): after GRPO's learning rate was edited, `--where optim.lr=0.0005` (GRPO's new runs)
    dropped GRPO+BRPO, which never ran at it, from the figure. `--where grpo:optim.lr=0.0005` filters GRPO's runs
    alone: its new seeds beside GRPO+BRPO's four, nothing said missing."""
    ws, _, new = edited
    doc = _report(tmp_path, ws, "--where", "grpo:optim.lr=0.0005")
    read = {(r["arm"], r["run_id"]) for r in doc["runs"]}
    assert {run for arm, run in read if arm == "grpo"} == set(new)
    assert len({run for arm, run in read if arm == "grpo-vr"}) == 4
    assert not [w for w in doc["warnings"] if "have no runs in" in w], doc["warnings"]
    assert _report(tmp_path, ws, "--where", "evx/grpo:optim.lr=0.0005")["runs"] == doc["runs"]

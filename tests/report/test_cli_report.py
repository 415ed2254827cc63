"""`arctl report`: success output, and one-line errors with exit code 2 for user mistakes."""

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from arctl.cli.main import app

runner = CliRunner()


def test_unknown_figure_suggests_the_closest(workspace):
    res = runner.invoke(app, ["report", "--figure", "score_curv", "--workdir", str(workspace)])
    assert res.exit_code == 2
    assert "did you mean 'score_curve'" in res.output
    assert "Traceback" not in res.output


def test_no_runs_names_the_producing_command(tmp_path):
    res = runner.invoke(app, ["report", "--figure", "main_training", "--workdir", str(tmp_path)])
    assert res.exit_code == 2 and "arctl sweep priors" in res.output
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(tmp_path)])
    assert res.exit_code == 2 and "arctl run ablation-vr" in res.output
    res = runner.invoke(app, ["report", "--table", "final", "--workdir", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_claims_on_an_empty_workspace_is_one_line_naming_the_sweep_and_writes_nothing(tmp_path):
    """An existing workspace without the claims' runs: not a 150-line table of missing runs and exit 0,
    but one error line naming what to run, exit 2, no report written."""
    res = runner.invoke(app, ["report", "--claims", "--workdir", str(tmp_path)])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: no runs of paper in")
    assert f"`arctl sweep paper --workdir {tmp_path}`" in lines[0] and list(tmp_path.iterdir()) == []
    res = runner.invoke(app, ["report", "--claims", "priors", "--scale", "tiny", "--workdir", str(tmp_path)])
    assert res.exit_code == 2 and f"`arctl sweep priors --scale tiny --workdir {tmp_path}`" in res.output and list(tmp_path.iterdir()) == []


def test_flag_mistakes_exit_2(tmp_path):
    assert runner.invoke(app, ["report"]).exit_code == 2
    assert runner.invoke(app, ["report", "--figure", "a", "--table", "b"]).exit_code == 2
    assert runner.invoke(app, ["report", "--figure", "score_curve", "--compare-paper"]).exit_code == 2


def test_table_json_and_missing_experiment_note(workspace, tmp_path):
    res = runner.invoke(app, ["report", "--table", "anytime", "--workdir", str(workspace), "--out", str(tmp_path),
                              "--experiment", "main-grpo", "--experiment", "baselines-elastic", "--json"])
    assert res.exit_code == 0, res.output  # an experiment without runs yet: a note, the rest is built
    data = json.loads(res.stdout)
    assert data["missing_experiments"] == ["baselines-elastic"]
    assert {r["experiment"] for r in data["runs"]} == {"main-grpo"}
    assert (tmp_path / "anytime.tex").is_file()


def test_module_import_is_light():
    code = ("import sys, arctl.cli.cmd_report; "
            "print([m for m in ('pandas', 'matplotlib', 'wandb', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_sweep_selects_its_experiments_and_arctl_home_is_the_default_workdir(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_HOME", str(workspace))
    res = runner.invoke(app, ["report", "--figure", "main_training", "--sweep", "priors", "--out", str(tmp_path),
                              "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {r["experiment"] for r in data["runs"]} == {"main-grpo", "main-ar-base", "main-ar-linear",
                                                        "main-ar-uniform"}
    assert (tmp_path / "main_training.svg").is_file()
    res = runner.invoke(app, ["report", "--figure", "main_training", "--sweep", "nosuch"])
    assert res.exit_code == 2 and "unknown sweep" in res.output


def test_when_every_wandb_file_is_unreadable_the_error_names_them(workspace, tmp_path):
    """Issue 14 item 12: not "no runs ... produce them with arctl run" when the runs are there."""
    import shutil

    copy = tmp_path / "ws"
    shutil.copytree(workspace, copy, symlinks=True)
    files = sorted({p.resolve() for p in copy.rglob("run-*.wandb")})
    assert files
    for path in files:
        path.write_bytes(b"this is not a W&B transaction log")
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(copy)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    text = " ".join(res.output.split())
    assert "could not be read" in text and ".wandb" in text, res.output


def test_a_diverged_run_is_not_called_an_unreadable_file(tmp_path):
    """From a review: with no run that logged a report's metrics, the error counted every warning as a W&B
    file that could not be read: the new "logged NaN" line, and the cells' "differs from its cell" (a
    readable run, told to be removed). Only what reading the files said counts now."""
    import wandb
    from wandb_workspace import _write_run

    _write_run(tmp_path / "ws", "ablation-vr", "grpo", 0, [0, 1], final=False, extra_rows=[
        {"trainer/global_step": 2, "train/loss": float("nan")}])
    wandb.teardown()
    res = runner.invoke(app, ["report", "--figure", "cov_variance", "--workdir", str(tmp_path / "ws")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "could not be read" not in text and "no runs of" in text, res.output


def test_a_malformed_where_is_refused_before_any_run_is_read(tmp_path):
    """Found by an adversarial pass: `--where foo` was refused only after every run had been read, and
    the parsed runs had been cached into the workspace (`.arctl-cache/`) by a command that failed."""
    from wandb_workspace import build_workspace  # tests/support/wandb_workspace.py

    ws = build_workspace(tmp_path / "ws")
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    for where in (["foo"], ["=1"], ["thinking.lam=0.5", "config.thinking.lam=0.7"]):
        res = runner.invoke(app, ["report", "--table", "anytime", "--workdir", str(ws), "--out", str(tmp_path / "out"),
                                  *[a for w in where for a in ("--where", w)]])
        assert res.exit_code == 2 and res.output.startswith("error: --where"), res.output
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before and not (tmp_path / "out").exists()
    res = runner.invoke(app, ["report", "--table", "anytime", "--workdir", str(ws), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0 and (ws / ".arctl-cache").is_dir(), res.output  # what the refused ones did not do


def test_a_tilde_in_out_or_arctl_home_is_the_home_folder(tmp_path):
    """From a review: `--out=~/x` (bash leaves ~ after '=') made a folder named '~' and then failed in
    pandas' to_csv, which expands ~ itself (a traceback); ARCTL_HOME="~/ws" was expanded by `arctl run`
    (launch's workspace_path) and not by report or export: two homes, two workspaces."""
    env = {"HOME": str(tmp_path), "ARCTL_HOME": "~/ws"}
    res = runner.invoke(app, ["report", "--figure", "tree_mask", "--out", "~/figs"], env=env)
    assert res.exit_code == 0 and (tmp_path / "figs" / "tree_mask.png").is_file(), res.output
    res = runner.invoke(app, ["report", "--figure", "tree_mask"], env=env)
    assert res.exit_code == 0 and (tmp_path / "ws" / "report" / "tree_mask.png").is_file(), res.output
    assert not Path("~").exists()


def test_runs_of_two_scales_in_one_table_are_refused_naming_the_filter(tmp_path):
    """From a review: tiny's search task and tiny-running-sum both log eval/toy/* and nothing compared the runs'
    scales, so a table averaged the two tasks' runs as seeds without a word. One line naming --where."""
    import yaml
    from wandb_workspace import LAST_STEP, _write_run

    root = tmp_path / "ws"
    steps = list(range(LAST_STEP + 1))
    for seed, scale in ((0, "tiny"), (1, "tiny-running-sum")):
        run_dir = _write_run(root, "main-grpo", "grpo", seed, steps)
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        (run_dir / "config.yaml").write_text(yaml.safe_dump({**config, "scale": {"name": scale}}))
    import wandb

    wandb.teardown()
    args = ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(root), "--out", str(tmp_path / "o")]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "ran at several scales" in res.output and "--where scale.name=" in res.output, res.output
    assert not (tmp_path / "o").exists()
    res = runner.invoke(app, [*args, "--where", "scale.name=tiny"])
    assert res.exit_code == 0, res.output

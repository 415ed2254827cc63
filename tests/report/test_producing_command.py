"""A report of final values that finds runs of its cells, none finished, says how to finish THOSE (from a hunt):
beside a stopped run of the micro overrides it said "produce them with `arctl run main-grpo --workdir WS`", which
composes a new default config, a 100-step run beside the one already half trained (on a cluster, GPU hours spent on
a run the report then refuses). It now says `arctl resume RUN` of one run, and of several the launch command with
their scale, seeds and the overrides they share (arctl.report.data.missing_arm_args), which resumes them; where no
run is there, the command is today's."""

from __future__ import annotations

import json
import os
import shlex

from micro import MICRO  # tests/support/micro.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.experiment import load_experiment
from arctl.compose.resolve import resolve_arm

runner = CliRunner()
STEPS = 40  # the runs' trainer.total_steps: launched with it, stopped at step 1


def _stopped(ws, seed: int, *extra: str) -> str:
    """A real offline W&B run of main-grpo's grpo at ``seed``, the micro overrides (and ``extra``), launched for
    :data:`STEPS` steps and stopped after step 1 (config.yaml as the launcher writes it); its run id."""
    import yaml

    from arctl.launch.run_id import make_run_id
    from arctl.track.writer import open_run

    run = resolve_arm(load_experiment("main-grpo"), "grpo", seed, "tiny",
                      user_overrides=[*MICRO, f"trainer.total_steps={STEPS}", *extra])
    cfg = dict(run.config)
    cfg["run_id"] = rid = make_run_id(cfg)
    run_dir = ws / "runs" / rid
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    wb = open_run(cfg, run_dir)
    for step in (0, 1):
        wb.log({"trainer/global_step": step, "train/anytime_score": 0.5,
                **{f"eval/{ds}/{k}": 0.3 for ds in ("aime24", "amc22") for k in ("anytime_acc", "final_acc")}})
    wb.finish()
    return rid


def _error(ws) -> str:
    res = runner.invoke(app, ["report", "--table", "final", "--workdir", str(ws), "--out", str(ws.parent / "out")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: no finished runs in "), res.output
    assert not (ws.parent / "out").exists()
    return lines[0]


def _commands(line: str) -> list[str]:
    return [c for c in line.split("`")[1::2] if c.startswith("arctl ") and "status" not in c]


def _planned(command: str) -> dict[str, str]:
    """run id -> what ``command`` (as printed) would do with it: `--dry-run --json`."""
    res = runner.invoke(app, [*shlex.split(command)[1:], "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    return {r["run_id"]: r.get("action") for r in json.loads(res.stdout)["runs"]}


def _workspace(tmp_path, *runs: tuple) -> tuple:
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    ws = tmp_path / "ws"
    ids = [_stopped(ws, *r) for r in runs]
    wandb.teardown()
    res = runner.invoke(app, ["repair", "--workdir", str(ws)])  # their registry rows, as a launch writes them
    assert res.exit_code == 0, res.output
    return ws, ids


def test_stopped_runs_of_the_micro_overrides_are_finished_at_their_config(tmp_path):
    ws, ids = _workspace(tmp_path, (0,), (1,))
    line = _error(ws)
    assert "or finish them with `arctl run main-grpo --seeds 0,1 " in line, line
    first, *others = _commands(line)
    assert first.endswith(f" --workdir {ws}") and f"trainer.total_steps={STEPS}" in first, line
    # as printed, it resumes the very runs there (same config, same run ids): no new run of the default config
    assert _planned(first) == {i: "resume" for i in ids}, line
    sweep = others[-1]
    assert sweep.startswith("arctl sweep priors --seeds 0,1 ") and f"trainer.total_steps={STEPS}" in sweep, line
    assert {i: a for i, a in _planned(sweep).items() if i in ids} == {i: "resume" for i in ids}, line
    for command in others[:-1]:  # the other experiments of the table: at the runs' config too
        assert command.startswith("arctl run main-ar-") and f"trainer.total_steps={STEPS}" in command, line


def test_one_stopped_run_is_resumed_and_runs_of_no_one_config_are_resumed_by_id(tmp_path):
    ws, (rid,) = _workspace(tmp_path, (0,))
    line = _error(ws)
    assert line.endswith(f"or finish them with `arctl resume {rid} --workdir {ws}`"), line
    assert _planned(_commands(line)[0]) == {rid: "resume"}
    # one seed at another learning rate: no overrides give both runs their config
    ws, ids = _workspace(tmp_path / "b", (0, "optim.lr=5e-4"), (1,))
    assert _error(ws).endswith(f"or finish them with `arctl resume {' '.join(ids)} --workdir {ws}`")


def test_no_runs_keep_the_command_that_produces_them(tmp_path):
    from arctl.report.data import producing_command

    spec = {"sweep": "priors"}
    assert producing_command(spec, ["main-grpo"], None, " --workdir W", run_ids=[], found=None) == \
        "`arctl run main-grpo --workdir W` (or the whole sweep: `arctl sweep priors --workdir W`)"
    assert producing_command(spec, None, "priors", "") == "`arctl sweep priors`"

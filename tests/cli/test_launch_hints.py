"""What a launch's closing lines tell a user to do next, and what a skipped run's line says, held to what happens.

From a hunt: the README's own flow (`arctl cp main-grpo experiments/my-exp.yaml`, `arctl run my-exp`) ended with
`draw the figure: arctl report --figure main_training ...`, which reads main-grpo's runs and exits 2; a `figure:`
naming no report spec got a command that answers "unknown figure"; and `wandb.*` edited in a spec after its run
completed was skipped as "completed" without a word, the run's config.yaml keeping the old values.
"""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest

MY_EXP = ("description: my copy\nfigure: {figure}\ngroups: {{model: r1-distill-qwen-1.5b}}\nseeds: [0]\n"
          "arms:\n  grpo: [algo=grpo, prior=base{extra}]\n")


@pytest.fixture
def box(sandbox, monkeypatch):
    """The sandbox (a workspace, the project's specs) with the counting test backend: a debug run takes a second."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    return sandbox


def write_exp(box, name: str, figure: str = "main_training", extra: str = "") -> None:
    (box.specs / "experiments" / f"{name}.yaml").write_text(MY_EXP.format(figure=figure, extra=extra))


def launch(box, *args: str):
    """``arctl ARGS --executor debug --workdir WS trainer.total_steps=2``: the outcome, checked to have run."""
    done = box.run(*args, "--executor", "debug", "--workdir", str(box.ws), "trainer.total_steps=2")
    assert done.code == 0 and done.crash is None, done.out + done.err + (done.crash or "")
    return done


def figure_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("draw the figure: ")]
    assert len(lines) == 1, out
    return lines[0].removeprefix("draw the figure: ")


def test_the_figure_command_after_running_a_copied_experiment_reads_its_runs_and_draws(box, tmp_path):
    """`arctl cp main-grpo` then `arctl run my-exp`: the printed command names my-exp (main_training reads the
    main-* experiments), and run as printed it draws the figure from my-exp's run (exit 0)."""
    import wandb_workspace  # tests/support/wandb_workspace.py

    copied = box.run("cp", "main-grpo", str(box.specs / "experiments" / "my-exp.yaml"))
    assert copied.code == 0, copied.err
    command = figure_line(launch(box, "run", "my-exp", "wandb.mode=disabled").out)
    assert command == f"arctl report --figure main_training --experiment my-exp --workdir {box.ws}"
    # the run's metrics as a job logs them (the counting backend logs no evaluation): a run of my-exp in WS
    wandb_workspace._write_run(box.ws, "my-exp", "grpo", 0, range(wandb_workspace.LAST_STEP + 1))
    drawn = box.run(*shlex.split(command)[1:], "--out", str(tmp_path / "out"))
    assert drawn.code == 0 and drawn.crash is None, drawn.out + drawn.err
    assert (tmp_path / "out" / "main_training.png").is_file()
    # a figure that reads every experiment (or this one) keeps its plain command
    write_exp(box, "ablation-vr-copy", figure="tree_mask")  # drawn from definitions: takes no --experiment
    assert figure_line(launch(box, "run", "ablation-vr-copy", "wandb.mode=disabled").out) == (
        f"arctl report --figure tree_mask --workdir {box.ws}")


def test_a_sweep_of_experiments_the_figure_does_not_read_names_the_sweep(box):
    (box.specs / "sweeps" / "mysw.yaml").write_text("description: mine\nexperiments: [my-exp]\nseeds: [0]\n")
    write_exp(box, "my-exp")
    out = launch(box, "sweep", "mysw", "wandb.mode=disabled").out
    assert figure_line(out) == f"arctl report --figure main_training --sweep mysw --workdir {box.ws}"


def test_a_figure_no_report_spec_defines_is_said_not_printed_as_a_command(box):
    write_exp(box, "my-exp", figure="my_curve")
    out = launch(box, "run", "my-exp", "wandb.mode=disabled").out
    assert "draw the figure" not in out and "arctl report --figure my_curve" not in out, out
    assert ("no figure to draw: my-exp names figure my_curve, which `arctl report` cannot draw: unknown figure "
            "'my_curve'") in out
    doc = json.loads(launch(box, "run", "my-exp", "wandb.mode=disabled", "--json").out)
    assert doc["figures"] == [] and doc["figure_notes"][0].startswith("no figure to draw: my-exp names figure my_curve")


def test_a_completed_run_skipped_says_where_its_launch_only_keys_differ_from_the_spec(box):
    """The hunt's case: wandb.notes, then wandb.project too, edited after the run completed."""
    write_exp(box, "eq", extra=', "wandb.notes=first idea"')
    first = json.loads(launch(box, "run", "eq", "wandb.mode=disabled", "--json").out)["submitted"][0]["run_id"]
    again = launch(box, "run", "eq", "wandb.mode=disabled").out  # the spec as it was: nothing to say
    assert f"skip    {first}  (eq/grpo/s0)  completed (use --force to rerun)\n" in again, again
    write_exp(box, "eq", extra=', "wandb.notes=second idea", wandb.project=other-proj')
    note = ("its config.yaml has wandb.notes='first idea', wandb.project=arctl, not your spec's (launch-only keys, "
            "outside the run id: --force reruns it with yours)")
    out = launch(box, "run", "eq", "wandb.mode=disabled").out
    assert f"skip    {first}  (eq/grpo/s0)  completed (use --force to rerun); {note}\n" in out, out  # the same run id
    doc = json.loads(launch(box, "run", "eq", "wandb.mode=disabled", "--json").out)
    assert doc["skipped"] == [{"run_id": first, "experiment": "eq", "arm": "grpo", "seed": 0,
                               "reason": f"completed (use --force to rerun); {note}"}]
    dry = json.loads(launch(box, "run", "eq", "wandb.mode=disabled", "--dry-run", "--json").out)
    assert [(r["run_id"], r["action"], r["reason"]) for r in dry["runs"]] == [(first, "skip", f"completed; {note}")]
    # --force reruns it, and its config.yaml then holds the spec's values
    launch(box, "run", "eq", "wandb.mode=disabled", "--force")
    assert "wandb.project=" not in launch(box, "run", "eq", "wandb.mode=disabled").out


def test_a_run_under_way_is_compared_in_every_launch_only_key_a_completed_one_in_wandb_only(box):
    """A run that is done only logged where its ``wandb`` said (its ``cluster`` said where it ran: no matter now);
    one under way goes on with its own ``cluster`` too. A key a config frozen before it existed lacks
    (``wandb.notes``) counts as its default."""
    from arctl.cli.launching import kept_settings_note
    from arctl.launch.workspace import Workspace

    write_exp(box, "eq")
    run_id = json.loads(launch(box, "run", "eq", "wandb.mode=disabled", "--json").out)["submitted"][0]["run_id"]
    config_yaml = box.ws / "runs" / run_id / "config.yaml"
    config_yaml.write_text(config_yaml.read_text().replace("  notes: null\n", ""))  # as written before wandb.notes
    assert "notes" not in config_yaml.read_text()
    composed = json.loads(launch(box, "run", "eq", "wandb.mode=disabled", "cluster.time_min=77", "--dry-run",
                                 "--json").out)["runs"][0]
    assert composed["run_id"] == run_id
    item = SimpleNamespace(run_id=run_id, config=composed["config"])
    workspace = Workspace.open(str(box.ws))
    assert kept_settings_note(item, workspace, active=False, force=False) == ""
    assert kept_settings_note(item, workspace, active=True, force=False) == (
        "; its config.yaml has cluster.time_min=60, not your spec's (launch-only keys, outside the run id: it goes "
        "on with its own)")
    item.config["wandb"] = {**item.config["wandb"], "tags": ["a", "b"], "mode": "offline", "name": "x", "group": "y"}
    assert kept_settings_note(item, workspace, active=False, force=True) == (
        "; its config.yaml has wandb.group=eq, wandb.mode=disabled, wandb.name=grpo-s0 and 1 more, not your spec's "
        "(launch-only keys, outside the run id: it was brought along, not rerun)")

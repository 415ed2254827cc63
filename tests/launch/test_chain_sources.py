"""A run that starts from another's weights (``trainer.init_from``) is refused, before anything is submitted and by
its dry run alike, where that run cannot give it the weights it names: a completed run whose checkpoints were
deleted (the line names the command that retrains it), a stopped run the resume does not relaunch, a run of
another model. ``arctl show`` prints the run id it starts from (from the "chain" hunt: findings 3-7)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import textwrap
from pathlib import Path

import pytest

from arctl.compose import resolve_experiment
from arctl.compose.errors import SpecError
from arctl.launch.launcher import items_from_resolved, launch, plan
from arctl.launch.registry import Registry
from arctl.launch.status_file import write_status
from arctl.launch.workspace import Workspace

CHAIN = textwrap.dedent(
    """\
    description: two rounds, the second from the first one's final weights
    seeds: [0]
    overrides: [trainer.total_steps=4, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      r1: [algo=grpo, prior=base]
      r2: [algo=grpo, prior=base, optim.lr=2e-6, trainer.init_from=r1]
      r3: [algo=grpo, prior=base, optim.lr=1e-6, trainer.init_from=r2]
      wide: [algo=grpo, prior=base, model.hidden_size=64, model.intermediate_size=256, trainer.init_from=r1]
      kl: [algo=grpo, prior=base, optim.kl_coef=0.001, trainer.init_from=r1]
    """
)


@pytest.fixture
def chain(specs) -> Path:
    (specs / "experiments" / "chain.yaml").write_text(CHAIN)
    return specs


def _items(arms, overrides=None, scale=None):
    return items_from_resolved(resolve_experiment("chain", overrides or [], scale, arms=arms))


def _records(ws: Path) -> dict:
    with Registry(ws / "registry.sqlite") as reg:
        return {r.arm: r for r in reg.list()}


def _one_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stdout[-2000:], out.stderr)
    return lines[0]


def test_a_completed_source_without_checkpoints_refuses_its_dependent_and_names_the_command_that_retrains_it(
        chain, tmp_path, cli):
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r1"]), ws, executor="debug")
    r1 = _records(ws.root)["r1"]
    assert r1.state == "COMPLETED"
    shutil.rmtree(ws.run_dir(r1.run_id) / "checkpoints")  # a disk clean-up
    r2 = plan(_items(["r2"]), ws)[1]
    assert r2.action == "refused" and r2.problem == r2.reason
    assert f"starts from run {r1.run_id}, which is COMPLETED but has no checkpoint left" in r2.problem
    args = ["--arm", "r2", "--executor", "debug", "--workdir", str(ws.root)]
    dry = _one_line(cli("run", "chain", *args, "--dry-run"))
    real = _one_line(cli("run", "chain", *args))
    assert dry.endswith(real.removeprefix("error: ")) and r1.run_id in real
    assert set(_records(ws.root)) == {"r1"}  # nothing claimed, nothing submitted
    # the command the line names retrains the source; then the same launch runs the dependent from it
    command = re.search(r"`(arctl run [^`]*--force[^`]*)`", real).group(1)
    assert command.startswith("arctl run chain --arm r1 ") and f"--workdir {ws.root}" in command
    cli(*shlex.split(command)[1:], "--executor", "debug", check=True)
    cli("run", "chain", *args, check=True)
    recs = _records(ws.root)
    assert (recs["r1"].state, recs["r2"].state, recs["r1"].generation) == ("COMPLETED", "COMPLETED", r1.generation + 1)


def test_a_dependent_that_resumes_from_its_own_checkpoint_is_not_refused_for_its_sources_checkpoints(chain, tmp_path):
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r2"]), ws, executor="debug")
    recs = _records(ws.root)
    shutil.rmtree(ws.run_dir(recs["r1"].run_id) / "checkpoints")
    with Registry(ws.registry_path) as reg:
        reg.update(recs["r2"].run_id, state="FAILED")
    write_status(ws.run_dir(recs["r2"].run_id), state="failed")
    assert [i.action for i in plan(_items(["r2"]), ws)] == ["skip", "resume"]  # its own checkpoint: no source needed
    shutil.rmtree(ws.run_dir(recs["r2"].run_id) / "checkpoints")
    assert [i.action for i in plan(_items(["r2"]), ws)] == ["skip", "refused"]  # it would start over from r1's


def test_a_kl_run_resuming_from_its_own_checkpoint_still_needs_its_sources(chain, tmp_path, cli):
    """A run with a KL term rebuilds its reference, the weights it started from, from its source's checkpoint on
    every resume: where those are gone (and no archive in the source's previous/ has them) its resume and the
    resume's dry run are refused in one line (from a review: the dry run said "resumes from step 21", the job then
    failed "its KL reference cannot be rebuilt"). An archived checkpoint of the source is enough."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(["kl"]), ws, executor="debug")
    recs = _records(ws.root)
    source = ws.run_dir(recs["r1"].run_id)
    with Registry(ws.registry_path) as reg:
        reg.update(recs["kl"].run_id, state="FAILED")
    write_status(ws.run_dir(recs["kl"].run_id), state="failed")
    (source / "previous" / "20261206-000000").mkdir(parents=True)
    shutil.move(source / "checkpoints", source / "previous" / "20261206-000000" / "checkpoints")
    assert [i.action for i in plan(_items(["kl"]), ws)] == ["skip", "resume"]  # the archive has them
    shutil.rmtree(source / "previous")
    assert [i.action for i in plan(_items(["kl"]), ws)] == ["skip", "refused"]
    args = [recs["kl"].run_id, "--executor", "debug", "--workdir", str(ws.root)]
    for dry in (["--dry-run"], []):
        line = _one_line(cli("resume", *args, *dry))
        assert f"starts from run {recs['r1'].run_id}, whose checkpoints are gone" in line and "KL term" in line, line


def test_the_resume_dry_run_refuses_what_the_resume_refuses(chain, tmp_path, cli):
    """`arctl resume DEP --dry-run` of a run whose source was cancelled (not relaunched by a resume): exit 2 with
    the resume's own line, where it said "would resume", exit 0."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r2"]), ws, executor="debug")
    recs = _records(ws.root)
    with Registry(ws.registry_path) as reg:
        reg.update(recs["r1"].run_id, state="CANCELLED")
        reg.update(recs["r2"].run_id, state="FAILED")
    write_status(ws.run_dir(recs["r1"].run_id), state="cancelled")
    write_status(ws.run_dir(recs["r2"].run_id), state="failed")
    shutil.rmtree(ws.run_dir(recs["r2"].run_id) / "checkpoints")
    args = [recs["r2"].run_id, "--executor", "debug", "--workdir", str(ws.root)]
    dry = _one_line(cli("resume", *args, "--dry-run"))
    as_json = cli("resume", *args, "--dry-run", "--json")
    real = _one_line(cli("resume", *args))
    said = f"starts from run {recs['r1'].run_id}, which is CANCELLED: launch that run first"
    assert said in real and dry.endswith(real.removeprefix("error: "))
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["runs"][0]["action"] == "refused"
    assert _records(ws.root)["r2"].state == "FAILED"


def test_show_prints_the_run_id_a_dependent_starts_from(chain, cli):
    r1, r2 = _items(["r2"])
    shown = json.loads(cli("show", "chain", "--arm", "r2", "--json", check=True).stdout)
    assert [r["config"]["trainer"]["init_run"] for r in shown] == [r1.run_id] == [r2.config["trainer"]["init_run"]]
    text = cli("show", "chain", "--arm", "r2", check=True).stdout
    assert f"init_run: {r1.run_id}" in text


def test_a_dependent_of_another_model_is_refused_when_resolved(chain, tmp_path, cli):
    with pytest.raises(SpecError) as err:
        _items(["wide"])
    line = str(err.value)
    assert "\n" not in line and "chain/wide/s0 starts from the weights of run chain_r1_s0_" in line
    assert "model.hidden_size=64 where chain/r1 has " in line and "model.intermediate_size=256" in line
    # the same model given to both (a command-line override reaches the run it starts from too): accepted
    assert len(_items(["wide"], ["model.hidden_size=64", "model.intermediate_size=256"])) == 2
    out = cli("run", "chain", "--arm", "wide", "--dry-run", "--executor", "local", "--workdir", str(tmp_path / "ws"))
    assert "model.hidden_size=64" in _one_line(out) and not (tmp_path / "ws").exists()


def test_a_verl_dependent_of_another_checkpoint_is_refused_when_resolved(specs):
    (specs / "experiments" / "vx.yaml").write_text(textwrap.dedent(
        """\
        description: a 7B run that would start from a 1.5B run
        seeds: [0]
        groups: {model: r1-distill-qwen-1.5b}
        arms:
          s: [algo=grpo, prior=base]
          t: [algo=grpo, prior=base, model=r1-distill-qwen-7b, trainer.init_from=s]
        """))
    with pytest.raises(SpecError, match=r"vx/t/s0 starts from the weights of run vx_s_s0_\w+ \(vx/s/s0\), whose model "
                                        r"differs: model.name='r1-distill-qwen-7b' where vx/s has 'r1-distill-qwen-1.5b'"
                                        r", model.path="):
        items_from_resolved(resolve_experiment("vx", [], "paper", arms=["t"]))


def test_a_forced_rerun_names_the_runs_that_start_from_it_and_their_plan_says_so_without_rerunning_them(
        chain, tmp_path, cli):
    """After `arctl run chain --arm r1 --force`, r2 (completed from r1's previous weights) is named by the forced
    launch and its dry run, and its plan says so with the command that retrains it; it is never rerun by itself (the
    evidence is file times, and a rerun spends GPU hours: from a review, a `cp -r` copy planned a 200-step run rerun).
    The command it names reruns r2 alone, from r1's new weights."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r2"]), ws, executor="debug")
    before = _records(ws.root)
    r1, r2 = before["r1"].run_id, before["r2"].run_id
    assert [i.action for i in plan(_items(["r2"]), ws)] == ["skip", "skip"]
    args = ["--arm", "r1", "--force", "--executor", "debug", "--workdir", str(ws.root)]
    dry = json.loads(cli("run", "chain", *args, "--dry-run", "--json", check=True).stdout)
    assert dry["starting_from_forced"].startswith(f"{r2} starts from {r1}: this launch does not rerun it;")
    assert f"note: {r2} starts from {r1}" in cli("run", "chain", *args, "--dry-run", check=True).stdout
    assert f"note: {r2} starts from {r1}" in cli("run", "chain", *args, check=True).stderr
    planned = plan(_items(["r2"]), ws)
    assert [i.action for i in planned] == ["skip", "skip"]
    assert planned[1].reason.startswith(f"completed; but the run it started from, {r1}, was rerun after it started")
    command = re.search(r"`(arctl run [^`]+)`[^`]* runs it again from the start", planned[1].reason).group(1)
    words = shlex.split(command)
    assert words[:3] == ["arctl", "run", "chain"] and "--force" in words and words[words.index("--arm") + 1] == "r2"
    cli(*words[1:], "--executor", "debug", check=True)  # not `auto`: it would reach a SLURM that answers here
    after = _records(ws.root)
    assert (after["r2"].state, after["r2"].generation) == ("COMPLETED", before["r2"].generation + 1)
    assert after["r1"].generation == before["r1"].generation + 1  # once, by the --force above
    assert [(i.action, i.reason) for i in plan(_items(["r2"]), ws)] == [("skip", "completed"), ("skip", "completed")]
    # what r2 took of r1 the first time was archived with its rerun (verl's merged copy would be too)
    assert any((p / "init.json").is_file() for p in (ws.root / "runs" / r2 / "previous").iterdir())


def test_a_run_others_are_queued_to_start_from_is_not_rerun_under_them(chain, tmp_path, cli):
    """`--force` of a completed run while a run that starts from it is queued or running is refused in one line,
    naming it, before anything is moved (from a review: the queued run failed "has no checkpoint to start from" a
    second after the rerun moved the checkpoints to previous/)."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r2"]), ws, executor="debug")
    recs = _records(ws.root)
    with Registry(ws.root / "registry.sqlite") as reg:
        reg.update(recs["r2"].run_id, state="PENDING")
    args = ["run", "chain", "--arm", "r1", "--force", "--executor", "debug", "--workdir", str(ws.root)]
    for dry in (["--dry-run"], []):
        line = _one_line(cli(*args, *dry))
        assert f"{recs['r1'].run_id} would be rerun while {recs['r2'].run_id} (" in line, line
        assert "`arctl cancel` it first" in line, line
    assert _records(ws.root)["r1"].generation == recs["r1"].generation  # nothing rerun
    assert (ws.root / "runs" / recs["r1"].run_id / "checkpoints").is_dir()


def test_a_tiny_dependent_of_another_vocabulary_is_refused_when_resolved(specs, tmp_path, cli):
    """From a review (r5-6): a tiny run whose task gives another vocabulary than its source's (the embedding's rows)
    passed the launch and was refused by its job, after the queue. The backend says what its weights depend on
    beyond the model keys (``Backend.weights_identity``); a task knob that changes only the problems passes."""
    (specs / "experiments" / "curric.yaml").write_text(textwrap.dedent(
        """\
        description: a curriculum, longer sums from the short sums' weights
        seeds: [0]
        overrides: [trainer.total_steps=4, wandb.mode=disabled, tiny.task.name=running_sum]
        arms:
          short: [algo=grpo, prior=base, tiny.task.running_sum.max_terms=12]
          long: [algo=grpo, prior=base, tiny.task.running_sum.max_terms=20, trainer.init_from=short]
          fewer: [algo=grpo, prior=base, tiny.task.running_sum.max_terms=12, tiny.task.running_sum.min_terms=3,
                  trainer.init_from=short]
          search: [algo=grpo, prior=base, tiny.task.name=search, trainer.init_from=short]
        """))
    for arm in ("long", "search"):
        with pytest.raises(SpecError) as err:
            items_from_resolved(resolve_experiment("curric", [], None, arms=[arm]))
        line = str(err.value)
        assert "\n" not in line and f"curric/{arm}/s0 starts from the weights of run curric_short_s0_" in line
        assert "whose weights do not fit it: tiny.task gives the " in line and "model differs" not in line, line
    line = str(pytest.raises(SpecError, items_from_resolved, resolve_experiment("curric", [], None, arms=["long"])).value)
    assert re.search(r"tiny\.task gives the running_sum task's vocabulary at tiny\.task\.running_sum\.max_terms=20 "
                     r"\(\d+ words, sha256 \w{12}\) where curric/short's gives the running_sum task's vocabulary at "
                     r"tiny\.task\.running_sum\.max_terms=12 \(", line), line
    assert len(items_from_resolved(resolve_experiment("curric", [], None, arms=["fewer"]))) == 2
    out = cli("run", "curric", "--arm", "long", "--executor", "local", "--workdir", str(tmp_path / "ws"))
    assert "max_terms=20" in _one_line(out) and not (tmp_path / "ws").exists()


def test_a_forced_rerun_of_a_chain_s_head_is_said_at_every_level_after_it(chain, tmp_path, cli):
    """From a review (r5-3): after `--force` of r1 in r1 -> r2 -> r3, r2's plan said r1 was rerun, r3's nothing
    until r2 was rerun too. r3 took r2's weights, trained from r1's old ones: its plan says so, with the command
    that retrains it; nothing is rerun by itself."""
    ws = Workspace(tmp_path / "ws")
    launch(_items(["r3"]), ws, executor="debug")
    recs = _records(ws.root)
    r1, r2 = recs["r1"].run_id, recs["r2"].run_id
    assert [i.reason for i in plan(_items(["r3"]), ws)] == ["completed"] * 3
    cli("run", "chain", "--arm", "r1", "--force", "--executor", "debug", "--workdir", str(ws.root), check=True)
    planned = {i.arm: i for i in plan(_items(["r3"]), ws)}
    assert [planned[a].action for a in ("r1", "r2", "r3")] == ["skip"] * 3
    assert planned["r1"].reason == "completed"
    assert planned["r2"].reason.startswith(f"completed; but the run it started from, {r1}, was rerun after it started")
    assert planned["r3"].reason.startswith(f"completed; but the run it started from, {r2}, started in turn from the "
                                           f"weights of {r1}, which was rerun after {r2} took them (an archive of it, ")
    # the commands it names, in order (from a review: r3's --force alone retrained it from r2's stale weights, and
    # the note stayed): r2 first, then r3; after them no run's plan says anything
    commands = re.findall(r"`(arctl run [^`]+)`", planned["r3"].reason.split(": rerun ", 1)[1])
    assert [shlex.split(c)[shlex.split(c).index("--arm") + 1] for c in commands] == ["r2", "r3"], planned["r3"].reason
    for command in commands:
        cli(*shlex.split(command)[1:], "--executor", "debug", check=True)
    assert [i.reason for i in plan(_items(["r3"]), ws)] == ["completed"] * 3

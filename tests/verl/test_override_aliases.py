"""A ``verl.overrides`` entry naming an alias of a key arctl sets is refused like one naming the key (from a hunt:
``actor_rollout_ref.actor.grad_clip=0.5`` was accepted, and verl 0.9.1, which clips with ``optim.clip_grad`` only,
trained at arctl's 1.0), and ``ARCTL_VERL_LAUNCH_CHECK=0`` skips only the checks of what is seen from here, never
the check of the overrides (it let ``algorithm.adv_estimator=gae`` through, to a traceback in the job's setup)."""

from __future__ import annotations

import copy
import dataclasses
import json
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.backends.verl.overrides import VERL_ALIASES, VerlConfigError, verl_overrides
from arctl.backends.verl.run_config import LAUNCH_CHECK_ENV, launch_problem
from arctl.cli.main import app


def _config(*overrides: str) -> dict:
    from arctl.compose import resolve_experiment

    (run,) = resolve_experiment("main-grpo", scale="paper", overrides=["cluster=slurm", *overrides])
    return run.config


def _variants() -> list[dict]:
    """Paper configs between them setting every key arctl sets: GPU, CPU, a step limit."""
    return [_config(), _config("trainer.total_steps=10"),
            _config("verl.device=cpu", "verl.tree_attention=dense", "cluster.gpus_per_node=0")]


def _derived(config: dict) -> set[str]:
    return {item.split("=", 1)[0].lstrip("+") for item in verl_overrides(config, "/tmp/run")}


def _entry(alias: str) -> str:
    from omegaconf import OmegaConf

    from arctl.backends.verl.overrides import _base_config

    declared = OmegaConf.select(_base_config(), alias, default="<absent>", throw_on_missing=False) != "<absent>"
    return f"{'' if declared else '+'}{alias}=1"  # a dataclass field outside verl's yaml takes Hydra's '+'


@pytest.mark.parametrize("alias", sorted(VERL_ALIASES))
def test_an_alias_of_a_key_arctl_sets_is_refused_in_one_line_naming_arctls_setting(alias):
    stands_for, advice, _ = VERL_ALIASES[alias]
    config = next(c for c in _variants() if set(stands_for) & _derived(c))
    config = copy.deepcopy(config)
    config["verl"]["overrides"] = [_entry(alias)]
    with pytest.raises(VerlConfigError) as info:
        verl_overrides(config)
    msg = str(info.value)
    assert "\n" not in msg and f"{alias} stands for" in msg and msg.endswith(advice), msg


def test_the_hunts_grad_clip_is_refused_and_names_optim_grad_clip():
    config = _config("verl.overrides=['actor_rollout_ref.actor.grad_clip=0.5']")
    problem = launch_problem(config, None)
    assert problem is not None and "actor_rollout_ref.actor.optim.clip_grad" in problem, problem
    assert problem.endswith("set optim.grad_clip"), problem
    # the one verl does read, optim.clip_grad, is arctl's key: refused as before
    config = _config("verl.overrides=['actor_rollout_ref.actor.optim.clip_grad=0.5']")
    assert "replaces actor_rollout_ref.actor.optim.clip_grad" in launch_problem(config, None)


def test_the_alias_table_holds_keys_verl_declares_for_keys_arctl_sets():
    """Each alias is a key of verl 0.9.1's config (its yaml, or a field of the typed config class of its node),
    and each key it stands for one that arctl sets: the table is not stale on either side."""
    import importlib

    from omegaconf import OmegaConf

    from arctl.backends.verl.overrides import _base_config

    base = _base_config()
    derived = set().union(*(_derived(c) for c in _variants()))
    for alias, (stands_for, _, _) in VERL_ALIASES.items():
        assert set(stands_for) <= derived, (alias, stands_for)
        if OmegaConf.select(base, alias, default="<absent>", throw_on_missing=False) != "<absent>":
            continue
        parent, _, leaf = alias.rpartition(".")
        module, _, cls = str(OmegaConf.select(base, parent)["_target_"]).rpartition(".")
        fields = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls))}
        assert leaf in fields, alias


def test_verl_reads_grad_clip_only_as_the_optimizers_deprecated_alias():
    """The table's claim for actor.grad_clip: in verl's code, ``grad_clip`` is declared (actor, critic) and read only
    by the optimizer config's deprecation shim; the engines clip with optim.clip_grad."""
    import verl

    root = Path(verl.__file__).parent
    where = {str(p.relative_to(root)) for p in root.rglob("*.py") if "grad_clip" in p.read_text(errors="replace")}
    assert where == {"workers/config/optimizer.py", "workers/config/actor.py", "workers/config/critic.py"}, where
    from verl.workers.config.actor import FSDPActorConfig

    assert "grad_clip" in typing.get_type_hints(FSDPActorConfig)  # declared: Hydra accepts it, nothing reads it


def test_a_key_that_is_no_alias_is_still_accepted():
    config = _config("verl.overrides=['trainer.log_val_generations=7', "
                     "'actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40000']")
    assert "trainer.log_val_generations=7" in verl_overrides(config)


def test_without_the_launch_check_the_overrides_are_still_checked(tmp_path, monkeypatch):
    monkeypatch.setenv(LAUNCH_CHECK_ENV, "0")
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "only-on-the-nodes"))
    assert launch_problem(_config(), tmp_path / "run") is None  # the data: the user vouches for it
    for entry, says in (("algorithm.adv_estimator=gae", "replaces algorithm.adv_estimator"),
                        ("actor_rollout_ref.actor.grad_clip=0.5", "set optim.grad_clip"),
                        ("trainer.log_val_generations=often", "wrong type")):
        problem = launch_problem(_config(f"verl.overrides=['{entry}']"), tmp_path / "run")
        assert problem is not None and says in problem and "\n" not in problem, (entry, problem)


def test_a_smoke_run_and_a_machine_without_verl_still_refuse_what_the_jobs_setup_would(tmp_path, monkeypatch):
    """The job's setup (ray_job.job_setup) builds the override list of every run, smoke included, without verl."""
    entry = "verl.overrides=['trainer.save_freq=10']"
    assert "replaces trainer.save_freq" in launch_problem(_config("verl.smoke=true", entry), tmp_path / "run")
    monkeypatch.setitem(__import__("sys").modules, "verl", None)  # `import verl` raises ImportError
    assert "replaces trainer.save_freq" in launch_problem(_config(entry), tmp_path / "run")
    assert launch_problem(_config(), tmp_path / "run") is None


@pytest.mark.parametrize("args, says", [
    (["verl.overrides=['algorithm.adv_estimator=gae']"], "replaces algorithm.adv_estimator"),
    (["verl.overrides=['actor_rollout_ref.actor.grad_clip=0.5']"], "set optim.grad_clip"),
    # a section holding keys arctl sets; an eval-only run's own entries (tests/verl/test_overrides_arctl_keys_kept.py)
    (["verl.overrides=['actor_rollout_ref.actor.optim={lr:0.001}']"], "replaces the section actor_rollout_ref.actor.optim"),
    (["verl.eval_only=true", "verl.eval_checkpoint=/runs/a/checkpoints/global_step_40",
      "verl.overrides=['trainer.val_only=false']"], "replaces trainer.val_only")])
def test_the_launch_with_the_check_off_refuses_a_bad_entry_in_one_line_and_writes_nothing(tmp_path, monkeypatch,
                                                                                          args, says):
    import slurm_shims  # tests/support/slurm_shims.py

    calls = tmp_path / "calls.log"
    shims = slurm_shims.install(tmp_path / "shims", **{
        name: f'echo "{name} $*" >> "{calls}"\nexit 1\n' for name in slurm_shims.CLIENT_PROGRAMS})
    monkeypatch.setenv("PATH", f"{shims}:/usr/bin:/bin")
    monkeypatch.setenv(LAUNCH_CHECK_ENV, "0")
    monkeypatch.setenv("ARCTL_DATA_DIR", str(tmp_path / "only-on-the-nodes"))
    ws = tmp_path / "ws"
    args = ["run", "main-grpo", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "cluster=slurm", *args]
    res = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert res.exit_code == 2 and says in res.stderr and json.loads(res.stdout)["refused"], res.output
    res = CliRunner().invoke(app, args)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and says in lines[0], res.output
    assert not ws.exists() and "sbatch" not in (calls.read_text() if calls.exists() else "")

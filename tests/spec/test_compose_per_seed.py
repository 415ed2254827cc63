"""A launch composes each arm once for all its seeds (:class:`arctl.compose.resolve._Arms`): the config of every
seed, and every error, is what composing that seed alone gives (``resolve_arm``: Hydra's whole compose, once a
seed). From a hunt: planning a launch composed every seed from scratch, ~90 ms a run (a 1,000-seed dry run took
90 s). A run's resolved config is its identity (run ids hash it) and what it trains: each comparison here is key
for key, value for value and type for type (1, 1.0 and True differ), in order."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose import SpecError
from arctl.compose import resolve as compose
from arctl.compose.paths import spec_files

SEEDS = [0, 1, 2, 3, 123456]
# overrides that read the seed (interpolations of it, directly, through oc.select and through wandb.name) or not, one
# per case in turn: every shipped experiment is planned once, at the tiny or the paper scale
BOTH = [[], ["wandb.notes=${seed}"], ["wandb.tags=[a,'s${seed}']"], ["wandb.notes='s${oc.select:seed,5}'"],
        ["wandb.group=${wandb.name}", "thinking.lam=0.7"]]
OVERRIDES = {"tiny": [*BOTH, ["tiny.eval_seed=${seed}"]],  # the tiny backend's section
             "paper": [*BOTH, ["data.train_dataset=${wandb.name}"]]}  # another section, through wandb.name
EXPERIMENTS = sorted(spec_files("experiments"))
CASES = [(name, scale, OVERRIDES[scale][(i // 2) % len(OVERRIDES[scale])])
         for i, name in enumerate(EXPERIMENTS) for scale in [("tiny", "paper")[i % 2]]]
# a setting some arms do not read: those runs are composed again without it (arctl.compose.resolve._as_read)
CASES += [("ablation-dense", "tiny", ["reward.alpha=0.3", "wandb.notes=${seed}"])]


@pytest.fixture
def per_seed(monkeypatch):
    """Within its ``with``: every seed composed alone, as before (``resolve_arm``), the path the fast one falls
    back to."""
    class Old:
        def __enter__(self):
            monkeypatch.setattr(compose._SeedConfigs, "make", classmethod(lambda cls, plan, seed: None))

        def __exit__(self, *exc):
            monkeypatch.undo()

    return Old()


def strict(a, b, path: str = "config") -> None:
    assert type(a) is type(b), f"{path}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            strict(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            strict(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def outcome(fn):
    try:
        return fn()
    except SpecError as err:
        return (err.what, err.where, err.hint)


def same(fast, old) -> None:
    assert type(fast) is type(old), (fast, old)
    if isinstance(old, tuple):  # an error: the same line
        assert fast == old
        return
    assert [r.name for r in fast] == [r.name for r in old]
    for a, b in zip(fast, old):
        for field in ("experiment", "arm", "seed", "sweep", "user_overrides", "sweep_overrides", "sweep_not_read"):
            strict(getattr(a, field), getattr(b, field), f"{a.name} {field}")
        strict(a.config, b.config, f"{a.name} config")


def test_the_cases_plan_every_shipped_experiment():
    assert {name for name, _, _ in CASES} == set(EXPERIMENTS) and len(EXPERIMENTS) >= 10
    assert {scale for _, scale, _ in CASES} == {"tiny", "paper"}


@pytest.mark.parametrize(("experiment", "scale", "overrides"), CASES,
                         ids=[f"{name}-{scale}-{' '.join(ov) or 'none'}" for name, scale, ov in CASES])
def test_an_experiments_runs_are_those_composed_seed_by_seed(experiment, scale, overrides, per_seed):
    fast = outcome(lambda: compose.resolve_experiment(experiment, list(overrides), scale, None, SEEDS))
    with per_seed:
        old = outcome(lambda: compose.resolve_experiment(experiment, list(overrides), scale, None, SEEDS))
    assert not isinstance(old, tuple), old  # the cases compose: their configs are compared
    same(fast, old)


@pytest.mark.parametrize(("sweep", "scale", "overrides"), [("lambda", "tiny", ["wandb.notes=${seed}"]),
                                                           ("priors", "paper", [])])
def test_a_sweeps_cells_are_those_composed_seed_by_seed(sweep, scale, overrides, per_seed):
    """The sweeps with a grid: each grid point of an arm is an arm of its own."""
    fast = outcome(lambda: compose.resolve_sweep(sweep, list(overrides), scale, [0, 123456]))
    with per_seed:
        old = outcome(lambda: compose.resolve_sweep(sweep, list(overrides), scale, [0, 123456]))
    assert not isinstance(old, tuple), old
    same(fast, old)


def test_the_seed_reaches_every_key_that_reads_it():
    """``seed`` and what interpolates it are each seed's; the rest is the first seed's, as composed."""
    runs = compose.resolve_experiment("main-grpo", ["wandb.notes=${seed}", "data.train_dataset=${wandb.name}"],
                                      "paper", None, [7, 123456])
    assert [(r.seed, r.config["seed"], r.config["wandb"]["name"], r.config["wandb"]["notes"],
             r.config["data"]["train_dataset"]) for r in runs] == [
        (7, 7, "grpo-s7", "7", "grpo-s7"), (123456, 123456, "grpo-s123456", "123456", "grpo-s123456")]
    assert runs[0].config["optim"] == runs[1].config["optim"] and runs[0].config["optim"] is not runs[1].config["optim"]


def test_an_arms_seeds_are_composed_once(monkeypatch):
    """Hydra composes an arm once for a launch's 20 seeds, not once a seed (from a hunt: ~90 ms a run)."""
    compose.resolve_experiment("main-grpo", scale="tiny", seeds=[0])  # caches warm (the scale's model)
    calls = []
    real = compose.compose_config
    monkeypatch.setattr(compose, "compose_config", lambda overrides: calls.append(overrides) or real(overrides))
    runs = compose.resolve_experiment("main-grpo", scale="tiny", seeds=list(range(20)))
    assert [r.seed for r in runs] == list(range(20)) and calls == []
    assert len({r.config["wandb"]["name"] for r in runs}) == 20


def test_a_user_config_group_option_that_reads_the_seed(tmp_path, monkeypatch, per_seed):
    """A user's ``conf/`` option (``cluster=seeded``) whose values interpolate the seed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    (tmp_path / "conf" / "cluster").mkdir(parents=True)
    (tmp_path / "conf" / "cluster" / "seeded.yaml").write_text(
        "# @package _global_\ncluster:\n  executor: local\n  time_min: 77\nwandb:\n  notes: run ${seed}\n")
    fast = compose.resolve_experiment("ablation-vr", ["cluster=seeded"], "tiny", None, [0, 3, 123456])
    with per_seed:
        old = compose.resolve_experiment("ablation-vr", ["cluster=seeded"], "tiny", None, [0, 3, 123456])
    same(fast, old)
    assert [r.config["wandb"]["notes"] for r in fast[:3]] == ["run 0", "run 3", "run 123456"]


@pytest.mark.parametrize(("overrides", "seeds", "expected"), [
    (["seed=3"], [0, 1], "sets the run's identity"),  # a bad seed override
    (["tiny.eval_seed=${seed}"], [0, 1234, 5], "tiny.eval_seed=1234 is also tiny.warmup.seed"),  # seeds_problem
    (["data.train_batch_size=${seed}"], [64, 0], "data.train_batch_size"),  # a range, at the second seed
    (["eval.grid='${arctl.grid:[${seed}],2}'"], [4, 0], "arctl.grid: largest budget 0"),  # resolves for 4, not 0
    ([], [0, 2**31], "seed"),  # past SEED_MAX
])
def test_a_seeds_error_is_the_same_line(overrides, seeds, expected, per_seed):
    fast = outcome(lambda: compose.resolve_experiment("main-grpo", list(overrides), "tiny", None, seeds))
    with per_seed:
        old = outcome(lambda: compose.resolve_experiment("main-grpo", list(overrides), "tiny", None, seeds))
    assert isinstance(old, tuple) and expected in old[0], old
    same(fast, old)


def test_a_seeds_error_on_the_command_line_is_the_same_line(tmp_path, per_seed):
    args = ["run", "main-grpo", "--scale", "tiny", "--seeds", "0,1234", "tiny.eval_seed=${seed}", "--dry-run",
            "--workdir", str(tmp_path / "ws")]
    fast = CliRunner().invoke(app, args)
    with per_seed:
        old = CliRunner().invoke(app, args)
    assert (fast.exit_code, fast.output) == (old.exit_code, old.output)
    assert fast.exit_code == 2 and len(fast.output.strip().splitlines()) == 1, fast.output
    assert "tiny.eval_seed=1234 is also tiny.warmup.seed" in fast.output
    assert not (tmp_path / "ws").exists()

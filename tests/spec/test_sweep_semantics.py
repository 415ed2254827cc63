"""What a sweep's cells become, from a read-only hunt of sweep semantics (each case was silent or wrong):

- names Hydra reads as values (an arm ``1e3``, ``true``, ``null``) stay the names they are;
- two cells that are one run id but differ in a key outside the identity (``cluster.*``, ``wandb.*``) are
  one error line naming the key and where it is set (every cell ran with the first value);
- a grid point that changes nothing (the command line or the experiment sets what it varies) is a note;
- an experiment listed twice is refused; an experiment's own mistake is said in its own file.
"""

from __future__ import annotations

import json

import pytest
from bad_input import Sandbox, launch_args

from arctl.compose import resolve_experiment
from arctl.launch.launcher import items_from_resolved
from arctl.launch.run_id import make_run_id

NUMERIC_ARMS = ["1e3", "1000", "1_000", "true", "null", "0.5", "nan"]


def _write(sandbox: Sandbox, kind: str, name: str, text: str) -> None:
    (sandbox.specs / kind / f"{name}.yaml").write_text(text)


def test_names_hydra_would_read_as_values_stay_names_and_distinct_runs(sandbox):
    """Passed unquoted, arm ``1e3`` became 1000.0, arms ``1000`` and ``1_000`` were one run, ``null`` a type error."""
    arms = "".join(f'  "{arm}": [optim.lr={i + 1}e-6]\n' for i, arm in enumerate(NUMERIC_ARMS))
    _write(sandbox, "experiments", "1e3", f"description: names\ngroups: {{algo: grpo, prior: base}}\narms:\n{arms}")
    runs = resolve_experiment("1e3", scale="tiny")
    assert [(r.config["experiment"], r.config["arm"]) for r in runs] == [("1e3", arm) for arm in NUMERIC_ARMS]
    assert all(r.config["wandb"]["group"] == "1e3" and r.config["wandb"]["name"] == f"{r.arm}-s0" for r in runs)
    ids = [make_run_id(r.config) for r in runs]
    assert len(set(ids)) == len(ids) and ids[0].startswith("1e3_1e3_s0_") and ids[2].startswith("1e3_1-000_s0_")


@pytest.mark.parametrize("key, values", [("cluster.mem_gb", "[1, 2]"), ("wandb.notes", "[a, b]"),
                                         ("scale.mem_gb", "[3, 4]"), ("verl.keep_checkpoints", "[1, 2]")])
def test_a_grid_over_a_key_outside_the_identity_is_one_error_line(sandbox, key, values):
    _write(sandbox, "sweeps", "g", f"experiments: [main-grpo]\nseeds: [0]\ngrid: {{{key}: {values}}}\n")
    for dry in (["--dry-run"], ["--json"], []):
        err = sandbox.check_refused("sweep", "g", *dry, *launch_args(sandbox)).err
        assert f"g.yaml: grid.{key}: two cells of main-grpo/grpo/s0 set {key}=" in err
        assert f"{key} is no part of what a run computes" in err
    with pytest.raises(Exception, match=f"set {key}="):  # the layer below the CLI refuses too
        from arctl.compose import resolve_sweep

        items_from_resolved(resolve_sweep("g", [], "tiny"))


@pytest.mark.parametrize("sweep, runs", [
    # the cue is read only with extensions: 4 points, 3 runs (a review: the first version refused both sweeps)
    ("experiments: [main-grpo]\ngrid: {budget_control.forcing_extensions: [0, 2], budget_control.forcing_cue: [chk, hmm]}",
     3),
    # an L1 setting beside GRPO, which has no method: 2 L1 runs per arm of baselines-l1 + 1 GRPO run
    ("experiments: [main-grpo, baselines-l1]\ngrid: {budget_control.l1_alpha: [0.001, 0.002]}", 5)])
def test_a_grid_over_a_setting_some_arms_do_not_read_launches_their_run_once(sandbox, sweep, runs):
    _write(sandbox, "sweeps", "g", sweep + "\nseeds: [0]\n")
    result = sandbox.run("sweep", "g", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    assert len(json.loads(result.out)["runs"]) == runs
    assert "are one run of main-grpo/grpo/s0, launched once" in result.err


def test_a_key_outside_the_identity_set_once_is_fine(sandbox):
    _write(sandbox, "sweeps", "g", "experiments: [main-grpo]\nseeds: [0, 1]\noverrides: [cluster.mem_gb=3]\n")
    result = sandbox.run("sweep", "g", "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and result.crash is None, result.err
    assert [r["config"]["cluster"]["mem_gb"] for r in json.loads(result.out)["runs"]] == [3.0, 3.0]


def test_an_experiment_listed_twice_is_refused(sandbox):
    _write(sandbox, "sweeps", "twice", "experiments: [main-grpo, ablation-vr, main-grpo]\nseeds: [0]\n")
    err = sandbox.check_refused("sweep", "twice", "--dry-run", *launch_args(sandbox)).err
    assert "twice.yaml: experiments: experiment 'main-grpo' is listed 2 times" in err


def _grid_runs(sandbox, *overrides: str) -> tuple[list[str], str]:
    result = sandbox.run("sweep", "pg", *overrides, "--dry-run", "--json", *launch_args(sandbox))
    assert result.code == 0 and result.crash is None, result.err + (result.crash or "")
    return [r["config"]["thinking"]["prior"] for r in json.loads(result.out)["runs"]], result.err


def test_a_grid_over_a_group_that_an_override_sets_says_its_points_are_one_run(sandbox):
    """The note matched the grid's literal key only: ``thinking.prior=linear`` against ``grid: {prior: [...]}``
    turned 3 points into 1 run with no word."""
    _write(sandbox, "sweeps", "pg", "experiments: [main-ar-base]\nseeds: [0]\ngrid: {prior: [base, linear, uniform]}\n")
    priors, err = _grid_runs(sandbox)
    assert priors == ["base", "linear", "uniform"] and "note:" not in err
    priors, err = _grid_runs(sandbox, "thinking.prior=linear")
    assert priors == ["linear"]
    assert ("note: the sweep's grid points prior=base / prior=linear / prior=uniform are one run of "
            "main-ar-base/ar-base/s0, launched once") in err
    assert len(err.strip().splitlines()) == 1


def test_a_grid_that_the_experiment_overrides_says_so(sandbox):
    _write(sandbox, "experiments", "fixed", "groups: {algo: anytime}\narms:\n  a: [thinking.prior=base]\n"
                                            "  b: [prior=uniform]\n")
    _write(sandbox, "sweeps", "pg", "experiments: [fixed]\nseeds: [0, 1]\ngrid: {prior: [linear, uniform]}\n")
    priors, err = _grid_runs(sandbox)
    assert priors == ["base", "base", "linear", "linear", "uniform", "uniform"]  # a: 1 run a seed; b: one per point
    assert "grid points prior=linear / prior=uniform are one run of fixed/a/s0, fixed/a/s1, launched once" in err
    assert "fixed/b" not in err


def test_an_experiments_own_mistake_is_said_in_its_file_an_unknown_name_in_the_sweeps(sandbox):
    _write(sandbox, "experiments", "broken", "arms: {}\n")
    _write(sandbox, "sweeps", "s", "experiments: [main-grpo, broken]\nseeds: [0]\n")
    err = sandbox.check_refused("sweep", "s", "--dry-run", *launch_args(sandbox)).err
    assert f"error: {sandbox.specs / 'experiments' / 'broken.yaml'}: an experiment needs a non-empty" in err
    _write(sandbox, "sweeps", "s", "experiments: [main-grpo, main-grp]\nseeds: [0]\n")
    err = sandbox.check_refused("sweep", "s", "--dry-run", *launch_args(sandbox)).err
    assert f"error: {sandbox.specs / 'sweeps' / 's.yaml'}: experiments: unknown experiment 'main-grp'" in err


def test_an_export_names_the_runs_of_a_sweep_a_launch_now_refuses(sandbox, tmp_path):
    """A review: `arctl export --sweep` composes the sweep's cells to name its runs; a sweep launched before the
    conflict was refused must still be exported (the check is the launch's)."""
    _write(sandbox, "sweeps", "g", "experiments: [main-grpo]\nseeds: [0]\ngrid: {cluster.mem_gb: [1, 2]}\n")
    (sandbox.ws / "runs").mkdir()
    result = sandbox.run("export", "--sweep", "g", "--scale", "tiny", "--seeds", "0", "--workdir", str(sandbox.ws),
                         "--out", str(tmp_path / "out"))
    assert result.crash is None and "no part of what a run computes" not in result.err
    assert "none of the 1 runs asked for is in it" in result.err  # its one run, composed, not in the workspace


def test_a_name_yaml_reads_as_a_value_says_to_quote_it(sandbox):
    """An audit: `true:` as an arm was "bad arm name True", `experiments: [true]` "a sweep needs experiments"."""
    _write(sandbox, "experiments", "t", "arms:\n  true: [algo=grpo]\n")
    err = sandbox.check_refused("run", "t", "--dry-run", *launch_args(sandbox)).err
    assert "t.yaml: arms: arm name True is read by YAML as a boolean" in err and 'e.g. "true": [...]' in err
    _write(sandbox, "sweeps", "s", "experiments: [main-grpo, 1e3, 2024]\nseeds: [0]\n")
    err = sandbox.check_refused("sweep", "s", "--dry-run", *launch_args(sandbox)).err
    assert "s.yaml: experiments: experiment name 2024 is read by YAML as an integer" in err
    _write(sandbox, "sweeps", "s", "experiments: [main-grpo, null]\nseeds: [0]\n")
    err = sandbox.check_refused("sweep", "s", "--dry-run", *launch_args(sandbox)).err
    assert "experiment name None is read by YAML as null (no name)" in err


def test_composing_a_sweep_reports_each_cell_and_the_cli_shows_it_on_a_terminal(monkeypatch):
    """From a hunt: `arctl sweep paper --seeds 0-49` composed 650 cells for ~15 s with nothing on the terminal."""
    import io

    from rich.console import Console

    import arctl.cli.launching as launching
    from arctl.compose import resolve_sweep

    calls = []
    runs = resolve_sweep("lambda", [], "tiny", [0, 1], on_cell=lambda done, total: calls.append((done, total)))
    assert len(runs) == 8 and calls == [(k, 8) for k in range(1, 9)]
    with launching.composing("lambda") as on_cell:
        assert on_cell is None  # stderr is no terminal here: nothing drawn
    screen = io.StringIO()
    monkeypatch.setattr(launching, "err_console", Console(file=screen, force_terminal=True, width=100))
    with launching.composing("lambda") as on_cell:
        for k in range(1, 9):
            on_cell(k, 8)
    assert "composing lambda" in screen.getvalue() and "8/8" in screen.getvalue()
    with launching.composing("{x} [bold]y") as on_cell:  # a review: "{x}" was a KeyError before the name's check
        on_cell(1, 1)
    assert "composing {x} [bold]y" in screen.getvalue()

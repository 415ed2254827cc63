"""Reports after a spec edit, and claims that read only what they test (from a hunt): a run whose cell's spec was
edited since it ran (``thinking.lam=0.5`` -> ``0.6``) is named with the key the spec sets, never cut behind a
launch's command-line overrides; ``--claims`` decides cells only for the arms its tests read; a typo in a claims
statistic's metric is one error line at load time with a did-you-mean; and runs of other configs at one seed name
the key they differ in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.report.cells import CONFIG_PREFIX, _not_composed, cell_composer, one_run_per_cell
from arctl.report.claims import RunView, arms_tested, load_claims, one_config_per_arm_seed, runs_of_arms
from arctl.report.errors import ReportError
from arctl.track.runs import Runs

runner = CliRunner()
SHIPPED_CLAIMS = Path(__file__).resolve().parents[2] / "reports" / "claims.yaml"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A spec root with an experiment whose arm sets thinking.lam, and a sweep of it."""
    root = tmp_path / "specs"
    (root / "experiments").mkdir(parents=True)
    (root / "sweeps").mkdir()
    (root / "experiments" / "my-lam.yaml").write_text(
        "description: my lambda idea\nseeds: [0]\narms:\n"
        "  ar-quad: [algo=anytime, prior=linear, thinking.lam=0.6]\n  grpo: [algo=grpo, prior=base]\n")
    (root / "sweeps" / "my-small.yaml").write_text("experiments: [my-lam]\nseeds: [0, 1]\nshare_arms: true\n")
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root


def _ran(cell: dict, run_id: str, **changed) -> dict:
    """A runs-table row of a run of ``cell`` (a composed cell, flattened) with ``changed`` values."""
    rec = {CONFIG_PREFIX + k: v for k, v in cell.items()}
    rec.update({CONFIG_PREFIX + k.replace("__", "."): v for k, v in changed.items()})
    return {"run_id": run_id, "experiment": cell["experiment"], "arm": cell["arm"], "seed": cell["seed"], **rec}


def test_a_key_the_spec_sets_is_named_first_with_both_values_never_cut(project):
    compose = cell_composer(["my-small"])
    cell = compose("my-lam", "ar-quad", 0, "tiny")
    assert cell["thinking.lam"] == 0.6
    # the runs ran at the old thinking.lam and with four command-line overrides that sort before it
    micro = {"model__hidden_size": 32, "model__num_heads": 2, "model__num_layers": 2, "model__intermediate_size": 64}
    table = pd.DataFrame([_ran(cell, "r0", thinking__lam=0.5, **micro),
                          _ran({**cell, "seed": 1}, "r1", thinking__lam=0.5, **micro)])
    (said,) = _not_composed(table, compose)
    assert said.startswith("2 run(s) differ from their cell as the report's sweep composes it, in thinking.lam, "
                           "model.hidden_size, model.intermediate_size, model.num_heads and 1 more: r0, r1; the specs "
                           "now set thinking.lam=0.6 where these runs ran 0.5"), said
    assert "no spec sets the other keys" in said
    # a run that differs only by a command-line override: said as before, without a spec key
    (said,) = _not_composed(pd.DataFrame([_ran(cell, "r2", **micro)]), compose)
    assert said == ("1 run(s) differ from their cell as the report's sweep composes it, in model.hidden_size, "
                    "model.intermediate_size, model.num_heads and 1 more: r2; they are read as that cell's runs "
                    "(--where KEY=VALUE leaves them out)")
    # a group choice counts for the keys it sets: prior=linear writes thinking.prior
    (said,) = _not_composed(pd.DataFrame([_ran(cell, "r3", thinking__prior="uniform")]), compose)
    assert "the specs now set thinking.prior=linear where these runs ran uniform" in said, said


def _runs(*rows: dict) -> Runs:
    table = pd.DataFrame.from_records(rows)
    history = pd.DataFrame({"run_id": table["run_id"], "experiment": table["experiment"], "arm": table["arm"],
                            "seed": table["seed"], "step": 0, "metric": "eval/toy/final_acc",
                            "value": np.arange(len(table), dtype=float)})
    return Runs(history=history, runs=table)


def _row(run_id: str, arm: str, seed: int = 0, serves: str = "", **config) -> dict:
    out = {"run_id": run_id, "experiment": "my-lam", "arm": arm, "seed": seed, "serves": serves,
           "config.scale": "tiny", "config.thinking.lam": 0.5, "config.thinking.prior": "uniform"}
    out.update({f"config.{k.replace('__', '.')}": v for k, v in config.items()})
    return out


def test_claims_decide_cells_only_for_the_arms_their_tests_read():
    spec = load_claims(SHIPPED_CLAIMS)
    arms = arms_tested(spec)
    assert "grpo" in arms and "ar-new" not in arms
    shared = json.dumps([["main-grpo", "grpo"]])
    runs = _runs(_row("g0", "grpo"), _row("n0", "ar-new"), _row("n1", "ar-new", thinking__prior="linear"),
                 _row("n2", "ar-new", thinking__lam=0.7), _row("s0", "grpo-alias", serves=shared))
    with pytest.raises(ReportError, match="ar-new seed 0 has 3 runs"):  # every arm's cells: refused
        one_run_per_cell(_runs(*runs.runs.to_dict("records")), compose=lambda *a: None)
    kept = one_run_per_cell(runs_of_arms(runs, arms), compose=lambda *a: None)
    assert sorted(kept.runs["run_id"]) == ["g0", "s0"]  # the run shared with a tested arm stays
    assert sorted(set(kept.history["run_id"])) == ["g0", "s0"]


def _claims_with(tmp_path, monkeypatch, old: str, new: str) -> Path:
    text = SHIPPED_CLAIMS.read_text()
    assert old in text
    root = tmp_path / "specs"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "claims.yaml").write_text(text.replace(old, new))
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root / "reports" / "claims.yaml"


def test_a_typo_in_a_claims_metric_is_one_error_line_with_did_you_mean(tmp_path, monkeypatch):
    path = _claims_with(tmp_path, monkeypatch, '"eval/{dataset}/grid_anytime_acc"', '"eval/{dataset}/grid_anytme_acc"')
    (tmp_path / "ws").mkdir()
    res = runner.invoke(app, ["report", "--claims", "--workdir", str(tmp_path / "ws"), "--out", str(tmp_path / "out")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert str(path) in lines[0] and "statistics.anytime.key" in lines[0]
    assert "did you mean eval/{dataset}/grid_anytime_acc" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()
    # every metric the shipped claims read is one the runs log; so is a name per budget of the schema
    load_claims(SHIPPED_CLAIMS)
    _claims_with(tmp_path / "b", monkeypatch, '"eval/{dataset}/think_len"', '"eval/{dataset}/acc_at_frac/50"')
    load_claims()


def _view(run_id: str, seed: int, **config) -> RunView:
    from arctl.report.cells import compute_key, computed_items

    rec = {"run_id": run_id, "config.scale.name": "tiny", "config.backend": "tiny", "config.seed": seed,
           "config.optim.lr": 1e-4, "config.thinking.lam": 0.5}
    rec.update({f"config.{k.replace('__', '.')}": v for k, v in config.items()})
    return RunView(run_id, "my-lam", "grpo", seed, {}, {}, 4, 4, {}, compute_key(rec), computed_items(rec))


def test_runs_of_other_configs_at_one_seed_name_the_key_they_differ_in():
    with pytest.raises(ReportError) as e:
        one_config_per_arm_seed([_view("a", 0), _view("b", 0, optim__lr=5e-4)])
    assert str(e.value) == ("arm 'grpo' has 2 runs of other configs at seed 0 (optim.lr 0.0001 vs 0.0005: a, b): the "
                            "claims pair runs by arm and seed and would read only one; choose with --where "
                            "optim.lr=VALUE")

"""The committed evidence follows from its committed runs: every ``docs/evidence/<name>/`` that holds an
export (``arctl export``: ``export.json`` and ``runs/``) holds each run's files as indexed, and
``arctl report --claims`` over those runs, with today's report code, gives the verdicts and numbers of
its committed ``claims.json``. A change to the statistics that moves a committed verdict or number
fails here until the evidence is regenerated (``docs/evidence/README.md`` says how)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from arctl.config.files import file_sha256

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
EXPORTS = sorted(p.parent for p in EVIDENCE.glob("**/export.json"))
NUMBERS = ("n", "mean", "ci_low", "ci_high", "sd", "p_value", "p_holm", "seeds_needed")


def test_some_committed_evidence_carries_its_runs():
    assert EXPORTS, f"no export (export.json) under {EVIDENCE}"


@pytest.mark.parametrize("folder", EXPORTS, ids=[str(p.relative_to(EVIDENCE)) for p in EXPORTS])
def test_the_exported_runs_are_the_indexed_files(folder):
    index = json.loads((folder / "export.json").read_text())
    assert index["runs"] and sorted(p.name for p in (folder / "runs").iterdir()) == sorted(index["runs"])
    for run_id, entry in index["runs"].items():
        assert entry["state"] == "completed", run_id
        run = folder / "runs" / run_id
        assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()) == sorted(entry["files"])
        for name, sha in entry["files"].items():
            assert file_sha256(run / name) == sha, f"{run_id}/{name}"


@pytest.mark.parametrize("folder", EXPORTS, ids=[str(p.relative_to(EVIDENCE)) for p in EXPORTS])
def test_every_committed_run_logged_every_step_exactly_once(folder):
    """Read by the independent reader of offline ``.wandb`` files (what ``wandb sync`` would leave on a
    server, every fragment of every attempt): steps 0..trainer.total_steps, each exactly once, and the
    final evaluation at the last step."""
    import yaml
    from wandb_reference import synced_history  # tests/support/wandb_reference.py

    for run_id in json.loads((folder / "export.json").read_text())["runs"]:
        run = folder / "runs" / run_id
        total = int(yaml.safe_load((run / "config.yaml").read_text())["trainer"]["total_steps"])
        _, history = synced_history(run)
        steps = [int(row["_step"]) for row in history]
        assert sorted(steps) == list(range(total + 1)), (run_id, len(steps))
        assert any(k.startswith("eval/") and k.endswith("grid_anytime_acc") for k in history[-1]), run_id


# the sweep each committed export's runs were launched by (a new export says here which)
EXPORT_SWEEPS = {"tiny-8seeds": "paper", "baselines/data": "baselines"}


@pytest.mark.parametrize("folder", EXPORTS, ids=[str(p.relative_to(EVIDENCE)) for p in EXPORTS])
def test_todays_code_composes_the_committed_runs_ids(folder):
    """A change to a default, a scale file or an experiment that changes what a committed run's cell
    composes to gives that cell another run id: `arctl sweep` would train it again and the reports would
    read the committed run as another config's (a warning). Such a change must be on purpose: then the
    evidence is regenerated. (A setting only some arms use belongs in their experiment file, not in the
    scale every run carries.)"""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved

    name = str(folder.relative_to(EVIDENCE))
    assert name in EXPORT_SWEEPS, f"say in EXPORT_SWEEPS which sweep launched the runs of {name}"
    index = json.loads((folder / "export.json").read_text())["runs"]
    seeds = sorted({int(e["seed"]) for e in index.values()})
    composed = {i.run_id for i in items_from_resolved(resolve_sweep(EXPORT_SWEEPS[name], [], "tiny", seeds))}
    assert sorted(set(index) - composed) == []


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("folder", [p for p in EXPORTS if (p / "claims.json").is_file()],
                         ids=[p.name for p in EXPORTS if (p / "claims.json").is_file()])
def test_the_committed_claims_follow_from_the_committed_runs(folder, tmp_path):
    from arctl.config.json_text import json_text
    from arctl.report.claims_render import build_claims_report

    committed = json.loads((folder / "claims.json").read_text())
    work = tmp_path / folder.name  # the report caches what it reads beside the runs: not in the checkout
    shutil.copytree(folder / "runs", work / "runs")
    report = build_claims_report(sweeps=committed["meta"]["sweeps"], scale=committed["meta"].get("scale"), workdir=work, out_dir=tmp_path / "out",
                                 progress=False, processes=1)
    fresh = json.loads(json_text(report.to_json()))  # as claims.json has it: keys as text
    assert sorted(r["run_id"] for r in fresh["runs"]) == sorted(r["run_id"] for r in committed["runs"])
    for old, new in zip(committed["claims"], fresh["claims"], strict=True):
        assert (new["id"], new["verdict"]) == (old["id"], old["verdict"])
        for t_old, t_new in zip(old["tests"], new["tests"], strict=True):
            where = f"claim {old['id']}: {t_old['label']}"
            assert (t_new["label"], t_new["verdict"]) == (t_old["label"], t_old["verdict"]), where
            assert _same(t_new["per_seed"], t_old["per_seed"]), where
            for key in NUMBERS:
                assert _same(t_new.get(key), t_old.get(key)), f"{where}: {key} {t_new.get(key)} != {t_old.get(key)}"


def test_the_committed_baselines_figure_follows_from_its_committed_runs(tmp_path):
    """docs/evidence/baselines/: `arctl report --figure budget_methods --sweep baselines` over the
    exported runs gives the committed numbers, per arm and per seed, from the runs it names."""
    import pandas as pd

    from arctl.report.render import render_figure

    folder = EVIDENCE / "baselines"
    shutil.copytree(folder / "data" / "runs", tmp_path / "ws" / "runs")
    res = render_figure("budget_methods", out_dir=tmp_path / "out", sweep="baselines", workdir=tmp_path / "ws",
                        progress=False, processes=1)
    for name in ("budget_methods.csv", "budget_methods.seeds.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / name), pd.read_csv(folder / name))
    committed = json.loads((folder / "budget_methods.runs.json").read_text())["runs"]
    assert sorted(r["run_id"] for r in res.runs) == sorted(r["run_id"] for r in committed)

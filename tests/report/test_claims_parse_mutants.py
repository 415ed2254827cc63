"""claims.yaml parsing and the runs the claims read, where a mutation hunt (mutation8) found a change no test
noticed: a claims file that is no mapping of ``kind: claims``, a statistic without a kind, ``above_chance`` on a
statistic that is no band, a converge test whose ``a`` is among its arms (each one ``error:`` line, exit 2), the
claim's ``paper:`` reference, ``id: null`` (not given: the claim's number), a finished run without a seed (left out),
and run_views's ``scale`` (the report-level check: test_claims_html_contents.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.paths import PROJECT_ROOT
from arctl.config import safe_yaml

runner = CliRunner()
STATS = "statistics: {s: {kind: final, key: 'eval/{dataset}/final_acc'}}\n"
ONE_CLAIM = "claims: [{id: 1, title: t, tests: [{kind: sign, arms: [a], stat: s}]}]\n"
TOP = "top level: expected a mapping with kind: claims"
CASES = {  # the whole claims file, the error's words
    "a top-level list": ("- kind: claims\n- claims: []\n", TOP),
    "kind: figure": ("kind: figure\n" + STATS + ONE_CLAIM, TOP),
    "no kind": (STATS + ONE_CLAIM, TOP),
    "a statistic without a kind": ("kind: claims\nstatistics: {s: {key: 'eval/{dataset}/final_acc'}}\n" + ONE_CLAIM,
                                   "statistics.s: kind must be one of final, band, gap, trend"),
    "above_chance on a final statistic": (
        "kind: claims\nstatistics: {s: {kind: final, key: 'eval/{dataset}/final_acc', above_chance: 0.05}}\n" + ONE_CLAIM,
        "statistics.s: above_chance is a margin 0 <= m < 1 of a band statistic"),
    "converge with a among its arms": (
        "kind: claims\nstatistics: {lo: {kind: band, key: 'eval/{dataset}/acc@{budget}', band: low},"
        " hi: {kind: band, key: 'eval/{dataset}/acc@{budget}', band: high}}\n"
        "claims: [{id: 1, title: t, tests: [{kind: converge, a: ar-uniform, arms: [ar-uniform, grpo], low: lo, high: hi}]}]\n",
        "claims[0].tests[0]: needs a (the arm that leads at low), the other arms, low and high"),
    "converge with a its only arm": (
        "kind: claims\nstatistics: {lo: {kind: band, key: 'eval/{dataset}/acc@{budget}', band: low},"
        " hi: {kind: band, key: 'eval/{dataset}/acc@{budget}', band: high}}\n"
        "claims: [{id: 1, title: t, tests: [{kind: converge, a: grpo, arms: [grpo], low: lo, high: hi}]}]\n",
        "claims[0].tests[0]: needs a (the arm that leads at low), the other arms, low and high"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_claims_file_of_the_wrong_shape_is_one_error_line_naming_the_field(case, tmp_path, monkeypatch):
    text, words = CASES[case]
    specs = tmp_path / "specs"
    (specs / "reports").mkdir(parents=True)
    (specs / "reports" / "claims.yaml").write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--claims", "priors", "--workdir", str(tmp_path), "--out", str(out)],
                        env={"COLUMNS": "400"})
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    assert f"{specs / 'reports' / 'claims.yaml'}: {words}" in lines[0], lines[0]
    assert not out.exists()


def test_a_claims_paper_reference_is_kept_and_a_claim_without_one_has_none(tmp_path):
    from arctl.report.claims import load_claims

    shipped = PROJECT_ROOT / "reports" / "claims.yaml"
    papers = [str(c.get("paper") or "") for c in safe_yaml.load(shipped.read_text())["claims"]]
    assert any(papers)
    assert [c.paper for c in load_claims(shipped).claims] == papers
    path = tmp_path / "claims.yaml"
    path.write_text("kind: claims\n" + STATS + "claims: [{id: 1, title: t, paper: 'Table 2', tests: [{kind: sign, "
                    "arms: [a], stat: s}]}, {id: 2, title: u, tests: [{kind: sign, arms: [b], stat: s}]}, "
                    "{id: 3, title: v, paper: null, tests: [{kind: sign, arms: [c], stat: s}]}]\n")
    assert [c.paper for c in load_claims(path).claims] == ["Table 2", "", ""]


def test_a_null_claim_id_is_not_given_the_claim_is_numbered(tmp_path):
    """From a hunt: ``id: null`` was the claim id "None", and two such claims were refused as one id given twice."""
    from arctl.report.claims import load_claims

    path = tmp_path / "claims.yaml"
    path.write_text("kind: claims\n" + STATS + "claims: [{id: null, title: t, tests: [{kind: sign, arms: [a], stat: s}]},"
                    " {id: null, title: u, tests: [{kind: sign, arms: [b], stat: s}]},"
                    " {title: v, tests: [{kind: sign, arms: [c], stat: s}]}, {id: x, title: w, tests: [{kind: sign,"
                    " arms: [d], stat: s}]}]\n")
    assert [c.id for c in load_claims(path).claims] == ["1", "2", "3", "x"]


def _runs(seed_of_ar):
    """Two finished runs (run_views's input: a history and a runs table) of arms ar and grpo, ar's seed given."""
    import pandas as pd

    runs = [dict(run_id="e-ar", experiment="e", arm="ar", seed=seed_of_ar, serves=""),
            dict(run_id="e-grpo-s1", experiment="e", arm="grpo", seed=1, serves="")]
    history = [dict(run_id=r["run_id"], step=s, metric="eval/d/final_acc", value=v)
               for r in runs for s, v in ((0, 0.1), (10, 0.5))]
    return pd.DataFrame(history), pd.DataFrame(runs)


@pytest.mark.parametrize("seed", [None, float("nan")])
def test_a_finished_run_without_a_seed_is_left_out_not_a_traceback(seed):
    from arctl.report.claims import run_views

    views = run_views(*_runs(seed), warnings=[])
    assert [(v.run_id, v.arm, v.seed, v.final) for v in views] == [("e-grpo-s1", "grpo", 1, {"eval/d/final_acc": 0.5})]
    assert [(v.run_id, v.seed) for v in run_views(*_runs(2), warnings=[])] == [("e-ar", 2), ("e-grpo-s1", 1)]


def test_run_views_keep_only_the_runs_of_the_scale_asked_for():
    from arctl.report.claims import run_views

    history, table = _runs(2)
    table["config.scale.name"] = ["paper", "tiny"]
    assert [v.run_id for v in run_views(history, table, scale="tiny", warnings=[])] == ["e-grpo-s1"]
    assert [v.run_id for v in run_views(history, table, scale=None, warnings=[])] == ["e-ar", "e-grpo-s1"]

"""A user's own report spec (``reports/*.yaml`` of theirs) with a mistake a checker can see: a typo in its
``arms``, its ``datasets``, its metric ``key`` or ``requires``, and a draft beside it that is not YAML. From a
read-only hunt: each typo was ignored without a word (an arm vanished, every dataset was drawn) or told the
user to re-run finished experiments, and one broken draft stopped every ``arctl report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.errors import SpecError
from arctl.compose.paths import PROJECT_ROOT
from arctl.compose.report_specs import check_report_spec

runner = CliRunner()
ENV = {"COLUMNS": "400"}


def _specs(tmp_path: Path, monkeypatch, files: dict[str, str]) -> Path:
    """A spec root (``$ARCTL_SPECS``) holding ``files`` (path under it -> text)."""
    root = tmp_path / "specs"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root


def _error_line(res) -> str:
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


# --- 1. arms and datasets ---------------------------------------------------------------------------------------------

def test_an_arm_none_of_the_specs_experiments_defines_is_one_error_line(tmp_path, monkeypatch):
    """``arms: [grpo, ar-linaer]`` of experiments main-grpo and main-ar-linear: the table showed GRPO alone, with
    ``missing_arms: []``. Now one line naming the file, the field and the arm meant, exit 2, nothing written."""
    spec = ("kind: table\nexperiments: [main-grpo, main-ar-linear]\narms: [grpo, ar-linaer]\n"
            "key: 'eval/{dataset}/final_acc'\n")
    root = _specs(tmp_path, monkeypatch, {"reports/tt.yaml": spec})
    work, out = tmp_path / "ws", tmp_path / "out"
    work.mkdir()
    res = runner.invoke(app, ["report", "--table", "tt", "--workdir", str(work), "--out", str(out)], env=ENV)
    line = _error_line(res)
    assert line.startswith(f"error: {root / 'reports' / 'tt.yaml'}: arms: no experiment of main-grpo, main-ar-linear "
                           "defines arm 'ar-linaer'"), line
    assert "did you mean 'ar-linear'?" in line and not out.exists()
    assert _error_line(runner.invoke(app, ["ls", "tables"], env=ENV)) == line  # the listing says the same


def test_the_arm_check_reads_the_experiments_as_the_search_path_has_them(tmp_path, monkeypatch):
    """A user's experiment defines the arms its figure may list; one that cannot be read leaves the check out (its
    own error comes where its runs are asked for); a shipped spec is not held to a user's copy of its experiment,
    which may drop one of the figure's arms (that figure then draws the arms it has)."""
    _specs(tmp_path, monkeypatch, {"experiments/mine.yaml": "arms: {lin: [prior=linear], uni: [prior=uniform]}\n",
                                   "experiments/broken.yaml": "arms: 5\n",
                                   "experiments/ablation-vr.yaml": "arms: {grpo: [algo=grpo]}\n"})
    base = {"kind": "figure", "name": "f", "builder": "score_curve"}
    check_report_spec({**base, "experiments": ["mine"], "arms": ["lin", "uni"]}, "f.yaml")
    with pytest.raises(SpecError, match=r"f.yaml: arms: no experiment of mine defines arm 'unii' — did you mean 'uni'"):
        check_report_spec({**base, "experiments": ["mine"], "arms": ["lin", "unii"]}, "f.yaml")
    check_report_spec({**base, "experiments": ["mine", "broken"], "arms": ["lin", "unii"]}, "f.yaml")
    shipped = {**base, "experiments": ["ablation-vr"], "arms": ["grpo", "grpo-vr"]}
    check_report_spec({**shipped, "_origin": "shipped"}, "ablation_vr.yaml")
    with pytest.raises(SpecError, match="defines arm 'grpo-vr'"):
        check_report_spec({**shipped, "_origin": "project"}, "ablation_vr.yaml")


def _curves_data(datasets: list[str]):
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.track.runs import Runs

    history = pd.DataFrame([{"run_id": f"r{s}", "arm": "grpo", "experiment": "e", "seed": s, "step": step,
                             "metric": f"eval/{ds}/anytime_acc", "value": 0.5}
                            for s in range(2) for step in (0, 10) for ds in datasets])
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    runs = pd.DataFrame({"run_id": ["r0", "r1"], "experiment": ["e"] * 2, "arm": ["grpo"] * 2, "seed": [0, 1]})
    return ReportData(Runs(history, runs), None, source="t")


@pytest.mark.parametrize("listed, logged, titles, said", [
    # a typo: no dataset of the spec logged, one looks like a logged one
    (["toyy"], ["toy"], ["Toy"], ["no run read logged the datasets of the spec (toyy): the figure draws every dataset "
                                  "they logged (toy: did you mean 'toy'?)"]),
    # some logged: the others are said, and left out
    (["aime24", "amc22"], ["aime24"], ["AIME24"], ["dataset(s) amc22 of the spec: no run read logged them (they logged "
                                                    "aime24); left out of the figure"]),
    # runs at another scale (tiny's toy for the paper's benchmarks): every logged dataset, as before, without a word
    (["aime24", "amc22"], ["toy"], ["Toy"], []),
    (["aime24"], ["aime24", "amc22"], ["AIME24"], []),
])
def test_a_dataset_of_a_training_curve_spec_no_run_logged_is_said(listed, logged, titles, said):
    import matplotlib.pyplot as plt

    from arctl.report.training_curves import build

    data = _curves_data(logged)
    fig, _ = build({"name": "t", "datasets": listed, "panels": [{"key": "eval/{dataset}/anytime_acc"}]}, data)
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == titles
    assert data.runs.warnings == said
    plt.close(fig)


# --- 2. a metric key no run logged ------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, meant", [
    ("key", "'eval/{dataset}/final_ac'", "eval/*/final_acc"),
    ("requires", "'eval/*/anytime_acx'", "eval/*/anytime_acc"),
])
def test_a_key_the_runs_did_not_log_names_the_keys_they_did(field, value, meant, workspace, tmp_path, monkeypatch):
    """The runs of main-grpo are there and finished: the error said "produce them with `arctl run main-grpo`".
    Now it says the runs logged none of it and the key they logged that is nearest (a typo), and the spec's file."""
    key = value if field == "key" else "'eval/{dataset}/final_acc'"
    extra = f"requires: {value}\n" if field == "requires" else ""
    root = _specs(tmp_path, monkeypatch, {"reports/tt.yaml": f"kind: table\nexperiments: [main-grpo]\nkey: {key}\n{extra}"})
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--table", "tt", "--workdir", str(workspace), "--out", str(out)], env=ENV)
    line = _error_line(res)
    assert ": the 2 run(s) there logged none (did you mean " in line and meant in line, line
    assert f"fix {root / 'reports' / 'tt.yaml'} if that is a typo" in line and not out.exists()


# --- 3. a broken file beside the spec asked for ----------------------------------------------------------------------

DRAFT = "kind: figure\nbuilder: [score_curve\n"  # not YAML


def test_a_draft_that_is_not_yaml_stops_only_itself(workspace, tmp_path, monkeypatch):
    """``reports/draft.yaml`` with a YAML error: ``arctl report --figure ablation_vr`` stopped on it (exit 2).
    Now the figure is drawn and a warning names the draft; the draft itself, asked for, and ``arctl ls``, stop on it."""
    root = _specs(tmp_path, monkeypatch, {"reports/draft.yaml": DRAFT})
    draft = root / "reports" / "draft.yaml"
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(workspace),
                              "--out", str(tmp_path / "out"), "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    said = [w for w in json.loads(res.stdout)["warnings"] if "draft.yaml" in w]
    assert said == [f"{draft}: " + said[0].split(": ", 1)[1]] and said[0].endswith(
        "; skipped it (fix it, or move it out of reports/)") and "invalid YAML" in said[0], said
    for args in (["report", "--figure", "draft", "--workdir", str(workspace), "--out", str(tmp_path / "o2")],
                 ["ls", "figures"]):
        line = _error_line(runner.invoke(app, args, env=ENV))
        assert line.startswith(f"error: {draft}: invalid YAML"), line
    assert not (tmp_path / "o2").exists()


def test_a_broken_copy_of_the_spec_asked_for_still_stops_it(workspace, tmp_path, monkeypatch):
    """A file that is the spec asked for, or could be it, is not skipped: a user's ``score_curve.yaml`` that is not
    YAML (it overlays the shipped one by its file name), a copy under another file name whose kind is wrong, two
    copies of one name. A clash of two other specs' names does not stop this one."""
    args = ["report", "--figure", "score_curve", "--workdir", str(workspace), "--out", str(tmp_path / "out")]
    root = _specs(tmp_path, monkeypatch, {"reports/score_curve.yaml": DRAFT})
    assert _error_line(runner.invoke(app, args, env=ENV)).startswith(f"error: {root / 'reports' / 'score_curve.yaml'}: ")
    (root / "reports" / "score_curve.yaml").unlink()
    shipped = (PROJECT_ROOT / "reports" / "score_curve.yaml").read_text()
    (root / "reports" / "mine.yaml").write_text(shipped.replace("kind: figure", "kind: figur"))
    assert "mine.yaml: kind: " in _error_line(runner.invoke(app, args, env=ENV))
    (root / "reports" / "mine.yaml").write_text(shipped.replace("name: score_curve", "name: other"))
    (root / "reports" / "mine2.yaml").write_text(shipped.replace("name: score_curve", "name: other"))
    res = runner.invoke(app, [*args, "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    assert any("two figure specs are named 'other'" in w for w in json.loads(res.stdout)["warnings"])
    line = _error_line(runner.invoke(app, [*args[:2], "other", *args[3:]], env=ENV))
    assert "two figure specs are named 'other'" in line and "rename one of them" in line


def test_an_unknown_report_names_the_files_that_could_not_be_read_and_the_search_paths_problems(
        workspace, tmp_path, monkeypatch):
    """A draft that is not YAML may be the figure asked for (its name: unread): "unknown figure" names it; an
    $ARCTL_SPECS entry that does not exist is named as the unknown-spec errors of specs name it."""
    root = _specs(tmp_path, monkeypatch, {"reports/draft.yaml": DRAFT})
    monkeypatch.setenv("ARCTL_SPECS", f"{root}:{tmp_path / 'nowhere'}")
    line = _error_line(runner.invoke(app, ["report", "--figure", "my_curve", "--workdir", str(workspace),
                                           "--out", str(tmp_path / "o")], env=ENV))
    assert line.startswith("error: unknown figure 'my_curve'"), line
    assert f"1 file(s) under reports/ could not be read: {root / 'reports' / 'draft.yaml'}" in line, line
    assert f"$ARCTL_SPECS entry {tmp_path / 'nowhere'} does not exist" in line, line

"""A report spec's ``sweep:`` must run each of its ``experiments:``: it is the command a missing run names. From a
hunt: ``sweep: priors`` beside ``experiments: [my-lam]`` was no error, and the warning for an arm without runs said
"produce them with arctl sweep priors --workdir WS", twelve unrelated runs that never produce that arm."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.errors import SpecError
from arctl.compose.report_specs import check_report_spec

runner = CliRunner()
ENV = {"COLUMNS": "400"}
FIGURE = ("kind: figure\nname: my_fig\nbuilder: training_curves\nsweep: {sweep}\nexperiments: [my-lam]\n"
          "panels:\n  - {{key: 'eval/{{dataset}}/anytime_acc', label: Anytime}}\n")


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "specs"
    files = {"experiments/my-lam.yaml": "arms: {grpo: [algo=grpo], ar: [algo=anytime]}\n",
             "sweeps/my-small.yaml": "experiments: [my-lam]\nseeds: [0]\n",
             "sweeps/broken.yaml": "experiments: 5\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(root))
    monkeypatch.chdir(tmp_path)  # not the source checkout, whose specs would be the project's, not shipped
    return root


def test_a_report_spec_whose_sweep_does_not_run_its_experiment_is_one_error_line(root, tmp_path):
    spec = root / "reports" / "my_fig.yaml"
    spec.parent.mkdir()
    spec.write_text(FIGURE.format(sweep="priors"))
    work, out = tmp_path / "ws", tmp_path / "out"
    res = runner.invoke(app, ["report", "--figure", "my_fig", "--workdir", str(work), "--out", str(out)], env=ENV)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith(f"error: {spec}: sweep: sweep 'priors' ("), lines
    assert "does not run experiment my-lam, which experiments: lists" in lines[0], lines
    # the fix: the user's sweep that runs it, or a copy of the shipped one
    assert "name a sweep that runs them all (my-small)" in lines[0] and "arctl cp priors" in lines[0], lines
    assert not work.exists() and not out.exists()
    listed = runner.invoke(app, ["ls", "figures"], env=ENV)
    assert listed.exit_code == 2 and listed.output.strip() == lines[0]


def test_a_sweep_that_runs_every_experiment_is_accepted(root):
    base = {"kind": "figure", "name": "f", "builder": "score_curve", "experiments": ["my-lam"]}
    check_report_spec({**base, "sweep": "my-small"}, "f.yaml")
    check_report_spec({**base, "sweep": "broken"}, "f.yaml")  # a sweep that cannot be read: its own error, elsewhere
    check_report_spec({**base, "sweep": "priors", "experiments": []}, "f.yaml")  # every experiment: nothing to hold
    check_report_spec({**base, "sweep": "priors", "_origin": "shipped"}, "f.yaml")  # as for a shipped spec's arms
    with pytest.raises(SpecError, match=r"^f.yaml: sweep: sweep 'my-small' .* does not run experiments main-grpo, "
                                        r"main-ar-base, which experiments: lists"):
        check_report_spec({**base, "sweep": "my-small", "experiments": ["my-lam", "main-grpo", "main-ar-base"]},
                          "f.yaml")


def test_every_shipped_report_spec_names_a_sweep_that_runs_its_experiments():
    from arctl.compose.report_specs import all_report_specs

    for kind in ("figure", "table"):
        for data in all_report_specs(kind).values():
            check_report_spec({**data, "_origin": "project"}, data["_path"])  # held to it as a user's copy is

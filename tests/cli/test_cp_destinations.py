"""``arctl cp NAME DEST``: a copy lands where arctl reads it, or the user is told (from a hunt).

``cp main-grpo mine.yaml`` and ``cp main-grpo experiments/ideas/x.yaml`` were written in silence, and
``arctl run mine`` then said "unknown experiment"; ``cp main-grpo experiments/My_Exp.yaml`` (a file name
that is no experiment name) and ``cp main-grpo sweeps/oops.yaml`` (an experiment among the sweeps) made
every ``arctl ls`` exit 2 afterwards. Now the last two are refused (one error line, exit 2, nothing
written) and the first two are written with a warning that says how to make them found."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty folder as the current one, no $ARCTL_SPECS."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    return tmp_path


def listed(kind: str = "experiments") -> dict[str, dict]:
    result = invoke("ls", kind, "--json")
    assert result.exit_code == 0, result.output
    return {row["name"]: row for row in json.loads(result.stdout)}


def refused(*args) -> str:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_a_file_name_that_is_no_experiment_name_is_refused_and_ls_keeps_working(project):
    line = refused("cp", "main-grpo", "experiments/My_Exp.yaml")
    assert "'My_Exp' is not a valid experiment name" in line and "my_exp.yaml" in line
    assert list(project.iterdir()) == []
    assert "main-grpo" in listed() and "priors" in listed("sweeps")


@pytest.mark.parametrize("name, dest, says", [
    ("main-grpo", "sweeps/oops.yaml", "is in a sweeps/ folder, but 'main-grpo' is an experiment"),
    ("priors", "experiments/", "is in an experiments/ folder, but 'priors' is a sweep"),
    ("score_curve", "sweeps/mine.yaml", "is in a sweeps/ folder, but 'score_curve' is a report"),
])
def test_a_folder_of_another_kind_is_refused(project, name, dest, says):
    line = refused("cp", name, dest)
    assert says in line and "copy it into" in line, line
    assert list(project.iterdir()) == []
    assert "main-grpo" in listed() and "priors" in listed("sweeps")


def test_a_folder_of_another_kind_is_refused_when_dest_is_a_bare_file_name_typed_inside_it(project, monkeypatch):
    (project / "sweeps").mkdir()
    monkeypatch.chdir(project / "sweeps")
    assert "is in a sweeps/ folder" in refused("cp", "main-grpo", "mine.yaml")
    assert list((project / "sweeps").iterdir()) == []


@pytest.mark.parametrize("dest", ["mine.yaml", "experiments/ideas/mine.yaml"])
def test_a_copy_arctl_will_not_find_is_written_with_a_warning_saying_where_it_would_be(project, dest):
    result = invoke("cp", "main-grpo", dest)
    assert result.exit_code == 0, result.output
    assert (project / dest).is_file()
    warning = result.stderr.strip()
    assert warning.startswith("warning: arctl will not find") and "experiments/mine.yaml here" in warning, warning
    assert "$ARCTL_SPECS" in warning and "mine" not in listed()


def test_a_copy_in_an_experiments_folder_off_the_path_says_which_folder_to_add_and_doing_so_finds_it(
        project, monkeypatch):
    result = invoke("cp", "main-grpo", "ideas/experiments/mine.yaml")
    assert result.exit_code == 0, result.output
    assert f"add {project / 'ideas'} to $ARCTL_SPECS" in result.stderr
    monkeypatch.setenv("ARCTL_SPECS", str(project / "ideas"))
    assert listed()["mine"]["source"] == "$ARCTL_SPECS"


def test_json_carries_the_warning(project):
    result = invoke("cp", "main-grpo", "mine.yaml", "--json")
    assert result.exit_code == 0, result.output
    assert "arctl will not find" in json.loads(result.stdout)["warnings"][0]


@pytest.mark.parametrize("args", [["cp", "main-grpo"], ["cp", "main-grpo", "experiments/mine.yaml"],
                                  ["cp", "main-grpo", "experiments/"]])
def test_a_copy_arctl_finds_has_no_warning_and_is_listed(project, args):
    """The documented default (no DEST) and a DEST in ./experiments/ work as before, silently."""
    result = invoke(*args)
    assert result.exit_code == 0 and result.stderr == "", result.output
    name = "mine" if "mine" in args[-1] else "main-grpo"
    assert listed()[name]["source"] == "project"


def test_a_copy_behind_a_file_of_its_name_earlier_on_the_path_is_said_to_be_unread(project, monkeypatch):
    specs = project / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "experiments" / "main-grpo.yaml").write_text("arms: {a: []}\n")  # a copy made before
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    result = invoke("cp", "main-grpo", "experiments/")
    assert result.exit_code == 0, result.output
    assert f"arctl will read {specs / 'experiments' / 'main-grpo.yaml'}" in result.stderr


def test_a_second_report_spec_of_one_name_in_one_folder_is_refused(project):
    assert invoke("cp", "score_curve", "reports/a.yaml").exit_code == 0
    line = refused("cp", "score_curve", "reports/b.yaml")
    assert "reports/a.yaml is already the figure spec named 'score_curve'" in line
    assert not (project / "reports" / "b.yaml").exists()
    assert listed("figures")["score_curve"]["source"] == "project"


def test_a_report_copied_over_the_display_names_file_is_refused(project):
    assert "holds display names, not a report spec" in refused("cp", "score_curve", "reports/labels.yaml")
    assert list(project.iterdir()) == []


def test_an_unknown_name_names_the_arctl_specs_entries_that_hold_nothing(project, monkeypatch):
    """From a hunt: ARCTL_SPECS naming a missing folder, or the experiments/ folder itself, was dropped in
    silence; the user saw only 'no ... named'."""
    (project / "mine" / "experiments").mkdir(parents=True)
    monkeypatch.setenv("ARCTL_SPECS", f"{project / 'nope'}:{project / 'mine' / 'experiments'}")
    line = refused("cp", "nosuch")
    assert f"$ARCTL_SPECS entry {project / 'nope'} does not exist" in line
    assert f"$ARCTL_SPECS entry {project / 'mine' / 'experiments'} holds no experiments/" in line
    assert f"point it at the folder above them ({project / 'mine'})" in line


def test_the_search_path_problems_are_none_for_good_entries(project, monkeypatch):
    from arctl.compose.paths import spec_path_hint, spec_path_problems

    (project / "a" / "sweeps").mkdir(parents=True)
    (project / "b" / "conf").mkdir(parents=True)
    monkeypatch.setenv("ARCTL_SPECS", f"{project / 'a'}:{project / 'b'}")
    assert spec_path_problems() == [] and spec_path_hint() == ""
    (project / "f").write_text("")
    monkeypatch.setenv("ARCTL_SPECS", str(project / "f"))
    assert spec_path_problems() == [f"$ARCTL_SPECS entry {project / 'f'} is a file, not a folder"]

"""A user's own config-group options: ``conf/<group>/<option>.yaml`` in a spec root (the project, or a
``$ARCTL_SPECS`` folder), so a pip install needs no edit of site-packages for a cluster site profile or a
prior (from a hunt: ``./conf/cluster/mysite.yaml`` then ``cluster=mysite`` was "unknown cluster option").
An option named like one arctl ships is never read (Hydra reads the shipped file), and no error unless chosen:
another tool's ``conf/`` beside arctl's specs must not stop a launch."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.paths import CONF_DIR, config_groups, group_options
from arctl.launch.run_id import make_run_id

runner = CliRunner()
MYSITE = "# @package _global_\ncluster:\n  executor: local\n  time_min: 77\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    return tmp_path


def option(root, group: str, name: str, text: str) -> None:
    (root / "conf" / group).mkdir(parents=True, exist_ok=True)
    (root / "conf" / group / f"{name}.yaml").write_text(text)


def shown(*args, experiment: str = "main-grpo") -> list[dict]:
    result = runner.invoke(app, ["show", experiment, "--json", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_cluster_profile_in_the_projects_conf_folder_is_an_option(project):
    option(project, "cluster", "mysite", MYSITE)
    assert "mysite" in group_options("cluster")
    assert [r["config"]["cluster"]["time_min"] for r in shown("cluster=mysite")] == [77]
    assert [r["config"]["cluster"]["time_min"] for r in shown("cluster=local")] == [60]


def test_a_prior_in_an_arctl_specs_folder_is_an_option_and_changes_the_run_id(project, monkeypatch):
    specs = project / "my specs, 'quoted'"  # Hydra's search path is a list: a comma or a quote splits nothing
    option(specs, "prior", "mine", (CONF_DIR / "prior" / "linear.yaml").read_text())
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    def thinking(choice: str) -> dict:  # an arm with several thinking budgets, where a prior matters
        return shown(choice, experiment="main-ar-base")[0]["config"]

    linear, mine, base = thinking("prior=linear"), thinking("prior=mine"), thinking("prior=base")
    assert mine["thinking"] == linear["thinking"] != base["thinking"]
    assert make_run_id(mine) == make_run_id(linear) != make_run_id(base)


def test_user_options_change_no_run_id_of_the_shipped_configs(project):
    """A user's conf/ only adds options: every shipped composition, and so every run id, is as before."""
    before = [make_run_id(r["config"]) for r in shown()]
    option(project, "cluster", "mysite", MYSITE)
    option(project, "prior", "mine", "# @package _global_\nthinking:\n  lam: 0.9\n")
    assert [make_run_id(r["config"]) for r in shown()] == before
    assert [make_run_id(r["config"]) for r in shown("cluster=mysite")] == before  # cluster is launch-only


def test_another_tools_conf_folder_with_arctls_option_names_blocks_no_launch(project):
    """From a review: a Hydra project's own ``conf/eval/default.yaml`` and ``conf/cluster/slurm.yaml`` in the cwd
    made every ``arctl run``/``show`` there exit 2 ("arctl ships a eval option 'default' too ... rename it"),
    though no choice named them. They are never read: the shipped options of those names are."""
    option(project, "eval", "default", "batch_size: 8\n")
    option(project, "cluster", "slurm", "partition: gpu\nnodes: 4\n")
    result = runner.invoke(app, ["run", "main-grpo", "--seeds", "0", "--dry-run", "--executor", "local",
                                 "--workdir", str(project / "ws")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "main-grpo" in result.stdout
    shipped = shown(experiment="main-grpo")
    assert shipped and all("batch_size" not in r["config"]["eval"] for r in shipped)
    assert shown("cluster=slurm")[0]["config"]["cluster"].get("nodes") != 4  # the shipped slurm profile


def test_choosing_a_shipped_option_an_arctl_projects_copy_shadows_is_one_error_line(project):
    """In a project with arctl's spec folders, an edited copy ``conf/cluster/slurm.yaml`` would be run as the
    shipped file without a word: choosing cluster=slurm there says which file is never read; not choosing it
    (or another tool's conf/ alone, above) is no error."""
    (project / "experiments").mkdir(exist_ok=True)
    option(project, "cluster", "slurm", "partition: gpu\nnodes: 4\n")
    res = runner.invoke(app, ["show", "main-grpo", "cluster=slurm"])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert f"{project / 'conf' / 'cluster' / 'slurm.yaml'}" in lines[0] and "cluster=my-slurm" in lines[0], lines
    assert runner.invoke(app, ["show", "main-grpo"]).exit_code == 0


def test_choosing_an_option_a_users_file_shadows_says_which_file_is_never_read(project):
    """A user's edited copy of a shipped option is never read (Hydra reads the shipped file first): the choice
    of it is where a user learns so, with the name to give the copy."""
    from arctl.compose.paths import shadowed_option

    option(project, "cluster", "slurm", (CONF_DIR / "cluster" / "slurm.yaml").read_text())
    assert shadowed_option("cluster", "slurm") is None  # conf/ alone: perhaps another tool's, never refused
    (project / "experiments").mkdir()  # an arctl project: its conf/ is arctl's
    option(project, "cluster", "mysite", MYSITE)
    err = shadowed_option("cluster", "slurm")
    assert err is not None and err.where == str(project / "conf" / "cluster" / "slurm.yaml"), err
    assert "arctl ships a cluster option 'slurm' too" in str(err) and "cluster=my-slurm" in str(err)
    assert shadowed_option("cluster", "mysite") is None and shadowed_option("cluster", "local") is None


def test_a_conf_folder_of_another_tool_adds_no_group(project):
    groups = config_groups()
    option(project, "database", "postgres", "host: x\n")
    assert config_groups() == groups and "database" not in groups
    assert group_options("database") == []
    assert shown()  # the project still composes

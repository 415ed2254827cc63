"""A mistake in a user's config-group option (``conf/<group>/<option>.yaml`` of the project or ``$ARCTL_SPECS``) is
one error line naming that file, the line and the fix, exit 2, nothing written. From a hunt: a tab or a key written
twice there was a 132-line traceback (``yaml.scanner.ScannerError``; ``arctl show`` even exited 0), and an unknown
key there was said to be in ``arctl/conf/prior/my.yaml``, arctl's package folder, not the user's file. A conflict a
sweep's grid value causes is said at the sweep's grid point, not in the experiment file the grid leaves as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_errors import error_line  # tests/support/cli_errors.py

from arctl.compose.errors import SpecError
from arctl.compose.resolve import resolve_experiment

EXPERIMENT = "seeds: [0]\narms:\n  a: [algo=anytime, prior=my]\n"
GOOD = "# @package _global_\nthinking:\n  prior: custom\n  probs: [0.1, 0.2, 0.3, 0.4]\n"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "x.yaml").write_text(EXPERIMENT)
    return tmp_path


def prior(root: Path, text: str, name: str = "my") -> Path:
    path = root / "conf" / "prior" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def both_commands(project: Path) -> str:
    """The error line of ``arctl run x`` (launched, and its dry run) and of ``arctl show x``: the same, and the
    launch wrote nothing."""
    work = project / "ws"
    line = error_line("run", "x", "--dry-run", "--workdir", str(work))
    assert error_line("run", "x", "--executor", "local", "--workdir", str(work)) == line
    assert error_line("show", "x") == line
    assert not work.exists()
    return line


def test_a_tab_in_a_users_option_is_one_line_with_its_file_line_and_fix(project):
    path = prior(project, "# @package _global_\nthinking:\n\tprior: custom\n")
    line = both_commands(project)
    assert f"{path}: invalid YAML at line 3, column 1" in line, line
    assert "indent with spaces" in line and "Traceback" not in line, line


def test_a_key_twice_in_a_users_option_is_one_line_with_its_file_and_line(project):
    path = prior(project, "# @package _global_\nthinking:\n  prior: custom\nthinking:\n  probs: [0.25, 0.75]\n")
    line = both_commands(project)
    assert f"{path}: invalid YAML at line 4, column 1: key 'thinking' appears twice" in line, line
    assert "write each key once" in line, line


def test_an_unknown_key_in_a_users_option_names_the_users_file_and_line(project):
    path = prior(project, GOOD.replace("probs:", "prob:"))
    line = both_commands(project)
    assert f"{path}: unknown config key 'thinking.prob' at line 4" in line, line
    assert "did you mean 'thinking.probs'" in line and "arctl/conf/" not in line, line


def test_a_users_option_without_the_package_line_says_to_add_it(project):
    path = prior(project, GOOD.replace("# @package _global_\n", ""))
    line = both_commands(project)
    assert f"{path}: unknown config key 'prior'" in line, line
    assert "add '# @package _global_' as its first line" in line, line


def test_a_yaml_mistake_in_an_option_a_users_option_brings_names_that_file(project):
    """An option its defaults list brings is read by Hydra alone: its YAML error is the same one line."""
    prior(project, "# @package _global_\ndefaults:\n  - inner\nthinking:\n  prior: uniform\n")
    inner = prior(project, "# @package _global_\nthinking:\n\tprior: custom\n", name="inner")
    with pytest.raises(SpecError, match=rf"{inner}: invalid YAML at line 3, column 1.*indent with spaces"):
        resolve_experiment("x")


def test_a_good_users_option_composes_and_is_found_after_arctls(project):
    from arctl.compose.resolve import option_file

    path = prior(project, GOOD)
    [run] = resolve_experiment("x")
    assert run.config["thinking"]["probs"] == [0.1, 0.2, 0.3, 0.4]
    assert option_file("prior", "my") == path
    assert option_file("prior", "uniform").parent.parent != project / "conf"  # arctl's own comes first
    prior(project, "# @package _global_\n", name="empty")  # no keys: an empty option, as Hydra reads it
    (project / "experiments" / "x.yaml").write_text(EXPERIMENT.replace("prior=my", "prior=empty"))
    assert resolve_experiment("x")


def test_a_conflict_a_grid_value_causes_is_said_at_the_sweeps_grid_point(project):
    """``grid: {algo: [grpo, anytime]}`` over an arm whose prior has four probabilities: GRPO trains at one budget.
    The line named the experiment's arm, which the grid leaves as it is; now the sweep file and ``grid algo=grpo``."""
    prior(project, GOOD)
    (project / "sweeps").mkdir()
    sweep = project / "sweeps" / "g.yaml"
    sweep.write_text("experiments: [x]\nseeds: [0]\ngrid: {algo: [grpo, anytime], optim.lr: [0.000001]}\n")
    line = error_line("sweep", "g", "--dry-run", "--workdir", str(project / "ws"))
    assert line.startswith(f"error: {sweep}: grid algo=grpo (x/a): thinking.probs has 4 probabilities but there "
                           "are 1 budgets"), line
    assert "optim.lr" not in line and "experiments/x.yaml" not in line, line
    # a mistake of the arm's own, which no grid value causes, is still said in the experiment file
    (project / "experiments" / "x.yaml").write_text(EXPERIMENT.replace("prior=my", "prior=my, thinking.lam=7"))
    line = error_line("sweep", "g", "--dry-run", "--workdir", str(project / "ws"))
    assert line.startswith(f"error: {project / 'experiments' / 'x.yaml'}: arms.a (x/a): thinking.lam"), line
    assert str(sweep) not in line and ": grid " not in line, line

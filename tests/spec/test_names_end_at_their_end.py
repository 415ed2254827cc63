"""A name's pattern ends at the end of the text: with ``re.match``, ``$`` also matched before a trailing newline
(from the "quote" hunt: `arctl cp ablation-vr $'exp\\n.yaml'` wrote that file, and `arctl run $'exp\\n'` ran an
experiment whose config, W&B group and registry row said ``exp\\n`` under a run id of ``exp-``)."""

from __future__ import annotations

import pytest

from arctl.compose.errors import SpecError
from arctl.compose.experiment import NAME_RE
from arctl.launch.registry import JOB_ID
from arctl.launch.run_id import SAFE_ID
from arctl.launch.states import SLURM_JOB_ID
from arctl.track.metrics_schema import eval_acc


@pytest.mark.parametrize(("pattern", "name"), [(NAME_RE, "exp"), (SAFE_ID, "exp_a_s0_0123456789"), (JOB_ID, "101_2"),
                                               (JOB_ID, "queue:3"), (SLURM_JOB_ID, "101")])
def test_a_name_with_a_trailing_newline_is_not_a_name(pattern, name):
    assert pattern.match(name)
    assert not pattern.match(name + "\n")


def test_a_dataset_name_with_a_trailing_newline_names_no_metric():
    assert eval_acc("aime24", 100) == "eval/aime24/acc@100"
    with pytest.raises(ValueError, match="not usable in a metric key"):
        eval_acc("aime24\n", 100)


def test_an_experiment_file_whose_name_ends_in_a_newline_is_not_run(tmp_path, monkeypatch):
    from arctl.compose import resolve_experiment

    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "exp\n.yaml").write_text("description: x\nseeds: [0]\narms:\n  a: [algo=grpo]\n")
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path))
    with pytest.raises(SpecError, match="is not a"):
        resolve_experiment("exp\n", scale="tiny")


def test_cp_refuses_a_destination_whose_name_ends_in_a_newline(tmp_path):
    from typer.testing import CliRunner

    from arctl.cli.main import app

    res = CliRunner().invoke(app, ["cp", "ablation-vr", str(tmp_path / "exp\n.yaml")])
    assert res.exit_code == 2, res.output
    assert list(tmp_path.iterdir()) == []

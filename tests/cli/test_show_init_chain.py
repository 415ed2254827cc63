"""`arctl show --arm X` refuses the trainer.init_from chains `arctl run` refuses (from a hunt: a cycle, and a
link to an arm whose own init_from names no arm, were shown)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app

runner = CliRunner()

SPEC = """description: init cycle and a bad second link
seeds: [0]
overrides: [trainer.total_steps=4, wandb.mode=disabled]
arms:
  a: [algo=grpo, prior=base, trainer.init_from=b]
  b: [algo=grpo, prior=base, trainer.init_from=a]
  d: [algo=grpo, prior=base, trainer.init_from=e]
  e: [algo=grpo, prior=base, trainer.init_from=nosuch]
  f: [algo=grpo, prior=base]
  g: [algo=grpo, prior=base, trainer.init_from=f]
"""


@pytest.fixture
def specs(tmp_path, monkeypatch):
    (tmp_path / "specs" / "experiments").mkdir(parents=True)
    (tmp_path / "specs" / "experiments" / "cyc.yaml").write_text(SPEC)
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path / "specs"))
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(("arm", "says"), [("a", "cycle"), ("d", "nosuch")])
def test_show_refuses_an_init_chain_run_refuses(specs, tmp_path, arm, says):
    for command in (["show", "cyc", "--arm", arm],
                    ["run", "cyc", "--arm", arm, "--dry-run", "--workdir", str(tmp_path / "ws")]):
        res = runner.invoke(app, command)
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], \
            (command, res.output)


def test_show_shows_a_good_init_chain(specs):
    res = runner.invoke(app, ["show", "cyc", "--arm", "g"])
    assert res.exit_code == 0, res.output
    assert "init_from: f" in res.output

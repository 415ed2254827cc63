"""``--dry-run`` of many runs (from a hunt of large workspaces): ``arctl sweep paper --seeds 0-39 --dry-run`` of
520 cells printed 70,793 lines, the full config of every cell (skipped and shared ones too, 40 per arm that differed
only in their seed and names), coloured by rich in a pipe, and never said how many would resume. Now only the runs
that would start have their configs printed, each distinct config once with the runs it serves, and the last line
counts each action (``--json``: ``counts``). A launch of 1-3 runs prints each one's config as before."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from arctl.cli import common
from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.registry import Registry, new_claim_token
from arctl.launch.rundir import dump_config, frozen_config, prepare_run_dir
from arctl.launch.workspace import Workspace
from arctl.track.runs.tidy import flatten_config

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# a sweep of main-grpo and ablation-vr sharing their one config of arm grpo (ablation-vr's grpo cells are shared)
SHARING = "experiments: [main-grpo, ablation-vr]\nseeds: [0, 1]\nshare_arms: true\n"


@pytest.fixture(autouse=True)
def specs(tmp_path, monkeypatch):
    """The shipped specs and sweep ``sharing`` (:data:`SHARING`), from a folder that is no project."""
    (tmp_path / "specs" / "sweeps").mkdir(parents=True)
    (tmp_path / "specs" / "sweeps" / "sharing.yaml").write_text(SHARING)
    monkeypatch.setenv("ARCTL_SPECS", str(tmp_path / "specs"))
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str):
    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return res, ANSI.sub("", res.stdout)


def _ended(ws: Workspace, items, ended: dict[tuple[str, int], str]) -> None:
    """Register ``items`` whose (arm, seed) ``ended`` names, ended in that state, each with its frozen config.yaml."""
    chosen = [i for i in items if (i.arm, i.seed) in ended and not i.shares]
    with Registry(ws.registry_path) as reg:
        reg.claim([i.record() for i in chosen], new_claim_token(), members=sorted({i.experiment for i in chosen}))
        for i in chosen:
            prepare_run_dir(ws.run_dir(i.run_id), frozen_config(i.config, i.run_id, i.run_id))
            reg.update(i.run_id, state=ended[(i.arm, i.seed)], executor="local", job_id="queue:1", claim=None,
                       before_claim=None)


def _sharing_workspace(tmp_path):
    """Sweep ``sharing``'s items and a workspace where main-grpo/grpo/s0 completed and ablation-vr/grpo-vr/s1
    failed: 4 cells would start new, 1 resume, 1 is skipped, 2 shared."""
    from arctl.cli.launching import sweep_items

    ws = Workspace(tmp_path / "ws")
    items = sweep_items("sharing", [], "tiny", None, ws.root, False)
    _ended(ws, items, {("grpo", 0): states.COMPLETED, ("grpo-vr", 1): states.FAILED})
    return ws, items


def _yaml_documents(out: str) -> int:
    """How many configs ``out`` prints: each one's first line is ``experiment: ...``."""
    return sum(line.startswith("experiment: ") for line in out.splitlines())


def test_only_the_runs_that_would_start_have_their_configs_printed_and_the_last_line_counts_each_action(tmp_path):
    ws, items = _sharing_workspace(tmp_path)
    res, out = invoke("sweep", "sharing", "--scale", "tiny", "--dry-run", "--executor", "local",
                      "--workdir", str(ws.root))
    assert res.exit_code == 0, res.output
    skipped = next(i for i in items if (i.experiment, i.arm, i.seed) == ("main-grpo", "grpo", 0))
    table = out.split("──")[0]
    # the completed run (and the cell sharing it) is in the table only: no config of its own
    assert out.count(skipped.run_id) == table.count(skipped.run_id) == 2, out
    assert out.splitlines()[-1] == "8 planned: 4 would start (new), 1 would resume, 1 skipped (completed), 2 shared"
    # main-grpo/grpo/s1 once (ablation-vr's grpo cells share it), grpo-vr's two seeds (one new, one resumed) once,
    # grpo-vr-decouple's once
    assert _yaml_documents(out) == 3, out


def test_the_json_counts_each_action(tmp_path):
    ws, _ = _sharing_workspace(tmp_path)
    res, out = invoke("sweep", "sharing", "--scale", "tiny", "--dry-run", "--executor", "local", "--json",
                      "--workdir", str(ws.root))
    assert res.exit_code == 0, res.output
    doc = json.loads(out)
    assert doc["counts"] == {"new": 4, "resume": 1, "skip": 1, "shared": 2}
    assert len(doc["runs"]) == 8 and all("config" in r for r in doc["runs"])  # still every run's config


def test_the_seeds_of_an_arm_print_its_config_once_naming_the_keys_in_which_they_differ(tmp_path):
    """15 runs, 3 arms x 5 seeds: three configs, each the one of its arm's seed 0, as the JSON has it; the keys
    the line names are the ones the runs' configs differ in (read from the JSON, not assumed)."""
    where = ("--scale", "tiny", "--seeds", "0-4", "--executor", "local", "--workdir", str(tmp_path / "ws"))
    res, out = invoke("run", "ablation-vr", "--dry-run", *where)
    assert res.exit_code == 0, res.output
    runs = json.loads(invoke("run", "ablation-vr", "--dry-run", "--json", *where)[1])["runs"]
    assert _yaml_documents(out) == 3, out
    for arm in ("grpo", "grpo-vr", "grpo-vr-decouple"):
        mine = [r for r in runs if r["arm"] == arm]
        flat = [flatten_config(r["config"]) for r in mine]
        differ = sorted(k for k in flat[0] if len({repr(f.get(k)) for f in flat}) > 1)
        assert differ == ["run_id", "seed", "wandb.id", "wandb.name"]
        first = mine[0]
        line = (f"5 would start (new), seeds 0-4: the config of {first['run_id']} (s0); the 4 others differ from it "
                f"only in {', '.join(differ)} (--json has every run's config)")
        assert line in out.splitlines(), out
        assert dump_config(first["config"]) in out  # shown whole, as the run would get it
    assert out.splitlines()[-1] == "15 planned: 15 would start (new)"


def test_the_grid_points_of_one_arm_are_configs_of_their_own():
    """Sweep ``lambda``: 4 values of thinking.lam x 2 seeds of one arm, 4 configs (one per value, not one)."""
    res, out = invoke("sweep", "lambda", "--scale", "tiny", "--dry-run", "--executor", "local", "--workdir", "ws")
    assert res.exit_code == 0, res.output
    assert _yaml_documents(out) == 4, out
    lams = [line.split()[1] for line in out.splitlines() if line.startswith("  lam: ")]
    assert sorted(lams) == ["0.25", "0.5", "0.75", "1.0"], lams


def test_a_resume_of_many_failed_seeds_prints_their_config_once(tmp_path):
    """`arctl resume EXP --dry-run` (from the hunt: 49,201 lines for 56 resumes): one frozen config per arm."""
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved

    ws = Workspace(tmp_path / "ws")
    items = items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, [0, 1, 2, 3]))
    _ended(ws, items, {("grpo-vr", s): states.FAILED for s in range(4)})
    res, out = invoke("resume", "ablation-vr", "--dry-run", "--workdir", str(ws.root))
    assert res.exit_code == 0, res.output
    assert _yaml_documents(out) == 1, out
    assert "4 would resume, seeds 0-3: the config of" in out
    assert out.splitlines()[-1] == "4 planned: 4 would resume"


def test_a_launch_of_three_runs_prints_each_ones_config_whole_under_its_run_id(tmp_path):
    """Small launches print what they always printed: each run's rule and its whole config."""
    where = ("--scale", "tiny", "--executor", "local", "--workdir", str(tmp_path / "ws"))
    res, out = invoke("run", "ablation-vr", "--dry-run", *where)
    assert res.exit_code == 0, res.output
    runs = json.loads(invoke("run", "ablation-vr", "--dry-run", "--json", *where)[1])["runs"]
    assert len(runs) == 3
    for r in runs:
        # its rule (or, too long for the rule, a plain rule and the title on its own line), the YAML, then the
        # blank line rich's Syntax printed
        (title,) = [line for line in out.splitlines() if f"{r['run_id']}  ({r['experiment']}/{r['arm']}/s0)" in line]
        assert f"{title}\n{dump_config(r['config'])}\n" in out
    assert out.splitlines()[-1] == "3 planned: 3 would start (new)"


@pytest.mark.parametrize("terminal", [False, True])
def test_yaml_is_highlighted_on_a_terminal_only(tmp_path, monkeypatch, terminal):
    """In a pipe rich's Syntax highlighting took 25 s of a dry run's 84 (a profile at 20 seeds)."""
    import rich.syntax
    from rich.text import Text

    highlighted = []

    class Counted:
        def __init__(self, code, *args, **kwargs):
            highlighted.append(code)
            self.code = code

        def __rich__(self):
            return Text(self.code)

    monkeypatch.setattr(rich.syntax, "Syntax", Counted)
    if terminal:
        monkeypatch.setattr(common.console, "forced_terminal", True)
        monkeypatch.setattr(common.console, "_width", 120)
    res, _ = invoke("run", "ablation-vr", "--scale", "tiny", "--dry-run", "--executor", "local",
                    "--workdir", str(tmp_path / "ws"))
    assert res.exit_code == 0, res.output
    assert len(highlighted) == (3 if terminal else 0)

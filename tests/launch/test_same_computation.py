"""A run of the same cell whose config differs only in settings its arm does not read is the cell's run (from a hunt
of an upgrade): an earlier arctl put such a setting in the run id (`arctl run ablation-dense reward.alpha=0.3`, a
sweep's grid over reward.alpha beside GRPO), and after the upgrade the same command planned GRPO "new" beside its
completed run, to train it again."""

from __future__ import annotations

import copy
import dataclasses

from arctl.compose import resolve_experiment
from arctl.launch import states
from arctl.launch.launcher import items_from_resolved, launch, plan
from arctl.launch.registry import Registry
from arctl.launch.shared import mark_same_computation
from arctl.launch.workspace import Workspace


def _items_with(arm: str, **section_values):
    """lt/ARM/s0's launch items with ``section.key=value`` written into the config as an earlier arctl kept it."""
    (run,) = resolve_experiment("lt", [], arms=[arm])
    config = copy.deepcopy(run.config)
    for dotted, value in section_values.items():
        section, key = dotted.split("__")
        config[section][key] = value
    return items_from_resolved([dataclasses.replace(run, config=config)])


def test_a_completed_run_that_differs_only_in_an_unread_setting_is_shared_not_trained_again(specs, tmp_path):
    ws = Workspace(tmp_path / "ws")
    (old,) = _items_with("a", reward__alpha=0.3)  # arm a: GRPO, no length penalty: reward.alpha is read by nothing
    launch([old], ws, executor="debug")
    (plain,) = items_from_resolved(resolve_experiment("lt", [], arms=["a"]))
    assert plain.run_id != old.run_id  # the id the run has now
    with Registry(ws.registry_path) as reg:
        assert reg.get(old.run_id).state == states.COMPLETED
    (item,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws), ws)
    assert (item.action, item.run_id, item.shares) == ("shared", old.run_id, old.run_id)
    assert item.reason == (f"same run as {old.run_id} in this workspace (completed): it differs only in "
                           "reward.alpha, which this arm does not read")
    items = mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws)
    result = launch(items, ws, executor="debug")
    assert not result.submitted and [why for _, why in result.skipped] == [f"shared: {item.reason}"]
    with Registry(ws.registry_path) as reg:
        assert reg.get(plain.run_id) is None and reg.get(old.run_id).state == states.COMPLETED
    # with --force, or where the setting is read (thinking.lam), the cell is a run of its own
    (forced,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws, force=True), ws)
    assert (forced.action, forced.run_id) == ("new", plain.run_id)


def test_a_run_that_differs_in_a_setting_its_arm_reads_is_not_shared(specs, tmp_path):
    ws = Workspace(tmp_path / "ws")
    (old,) = _items_with("a", thinking__lam=0.25)
    launch([old], ws, executor="debug")
    (item,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws), ws)
    assert item.action == "new" and item.run_id != old.run_id and item.shares is None
    assert "differs in thinking.lam: 0.25 there" in item.reason
    # another arm's run is no run of this cell, whatever it differs in
    (other,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["b"])), ws), ws)
    assert other.action == "new" and other.shares is None


def test_a_sweeps_json_lists_the_cells_shared_this_way(specs, tmp_path, cli):
    """From a review: `arctl sweep --json` listed under "shared" only the cells share_arms marked, which it read
    before the launch marked these."""
    import json

    ws = Workspace(tmp_path / "ws")
    (old,) = _items_with("a", reward__alpha=0.3)
    launch([old], ws, executor="debug")
    out = cli("sweep", "lt3", "--workdir", str(ws.root), "--executor", "debug", "--dry-run", "--json", check=True)
    doc = json.loads(out.stdout)
    assert [(c["arm"], c["run_id"]) for c in doc["shared"]] == [("a", old.run_id)], doc.get("shared")


def test_a_stopped_run_that_differs_only_in_an_unread_setting_is_resumed_not_trained_anew(specs, tmp_path, monkeypatch):
    """From a review: after an upgrade, a failed GRPO run of a grid over reward.alpha was planned anew (a launch
    shared only a run completed or under way), to train from step 0 beside the failed run's checkpoints. The launch
    now resumes it from its frozen config, as it resumes a run of its own id; with --force the cell is a new run."""
    from arctl.launch.rundir import read_run_config

    ws = Workspace(tmp_path / "ws")
    (old,) = _items_with("a", reward__alpha=0.3)
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "a")
    launch([old], ws, executor="debug")
    monkeypatch.delenv("ARCTL_TEST_FAIL_ARM")
    with Registry(ws.registry_path) as reg:
        assert reg.get(old.run_id).state == states.FAILED
    (plain,) = items_from_resolved(resolve_experiment("lt", [], arms=["a"]))
    (item,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", ["cluster.mem_gb=16"], arms=["a"])),
                                         ws), ws)
    assert (item.action, item.run_id, item.shares) == ("resume", old.run_id, None)
    # where and how it runs as this launch says, as a run of its own id resumes (from a review: a run failed for
    # memory was resumed with its old cluster.mem_gb)
    assert item.config["cluster"]["mem_gb"] == 16
    assert item.reason.endswith("; the same run as this cell's under an earlier id: it differs only in reward.alpha, "
                                "which this arm does not read"), item.reason
    assert item.config["reward"]["alpha"] == 0.3  # its own frozen config, as `arctl resume` takes it
    (forced,) = plan(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws, force=True), ws)
    assert (forced.action, forced.run_id) == ("new", plain.run_id)
    result = launch(mark_same_computation(items_from_resolved(resolve_experiment("lt", [], arms=["a"])), ws), ws,
                    executor="debug")
    assert [i.run_id for i in result.submitted] == [old.run_id]
    with Registry(ws.registry_path) as reg:
        assert reg.get(old.run_id).state == states.COMPLETED and reg.get(plain.run_id) is None
    assert read_run_config(ws.run_dir(old.run_id))["reward"]["alpha"] == 0.3  # its config.yaml unchanged

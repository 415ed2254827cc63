"""``share_arms: true`` in a sweep: an arm with the same resolved config in several experiments runs
once and serves each of them (registry membership, ``shared.json``, the sweep's output); every new
run dir records the code it was launched with (``provenance.json``). Real CLI in subprocesses, the
test-only counting backend, the local executor."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import arctl
from arctl.launch.provenance import git_state, read_provenance
from arctl.launch.registry import Registry
from arctl.launch.shared import SHARED_FILE

pytestmark = pytest.mark.slow  # sweeps of real tiny jobs through the local executor

# lt2 has lt's arm `a` (same overrides: the same run but for its name) and an arm of its own
LT2 = """\
description: shares arm a with lt
seeds: [0]
overrides: [trainer.total_steps=6, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
arms:
  a: [algo=grpo, prior=base]
  d: [algo=grpo-dense, prior=linear]
"""
LT3 = LT2.replace("description: shares arm a with lt", "description: shares arm a with lt and lt2").replace(
    "d: [algo=grpo-dense, prior=linear]", "e: [algo=anytime, prior=linear]\n  a-too: [algo=grpo, prior=base]")
# lt3's a-too is lt's a under another name (as AR-base is ablation-vr's grpo-vr-decouple)


@pytest.fixture
def shared_specs(specs: Path) -> Path:
    (specs / "experiments" / "lt2.yaml").write_text(LT2)
    (specs / "experiments" / "lt3.yaml").write_text(LT3)
    (specs / "sweeps" / "share.yaml").write_text("description: x\nexperiments: [lt, lt2]\nseeds: [0]\nshare_arms: true\n")
    (specs / "sweeps" / "apart.yaml").write_text("description: x\nexperiments: [lt, lt2]\nseeds: [0]\n")
    (specs / "sweeps" / "share3.yaml").write_text(
        "description: x\nexperiments: [lt, lt2, lt3]\nseeds: [0]\nshare_arms: true\n")
    return specs


def _steps(run_dir: Path) -> list[int]:
    return [int(line.split()[1]) for line in (run_dir / "steps.log").read_text().splitlines()]


def _run_dirs(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / "runs").iterdir())


def test_a_shared_arm_runs_once_and_serves_every_experiment(shared_specs, tmp_path, cli):
    ws = tmp_path / "ws"
    dry = json.loads(cli("sweep", "share", "--dry-run", "--json", "--executor", "local", "--workdir", str(ws),
                         check=True).stdout)
    assert not ws.exists()
    actions = {(r["experiment"], r["arm"]): (r["action"], r["run_id"]) for r in dry["runs"]}
    kept = actions[("lt", "a")][1]
    assert actions[("lt2", "a")] == ("shared", kept) and actions[("lt2", "d")][0] == "new"
    assert [(s["experiment"], s["arm"], s["seed"], s["action"], s["run_id"]) for s in dry["shared"]] == [
        ("lt2", "a", 0, "shared", kept)]

    doc = json.loads(cli("sweep", "share", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    submitted = {(r["experiment"], r["arm"]): r for r in doc["submitted"]}
    assert sorted(submitted) == [("lt", "a"), ("lt", "b"), ("lt", "c"), ("lt2", "d")]
    assert {r["state"] for r in doc["submitted"]} == {"COMPLETED"}
    assert submitted[("lt", "a")]["run_id"] == kept
    assert doc["shared"] == [{"experiment": "lt2", "arm": "a", "seed": 0, "action": "shared", "run_id": kept,
                              "reason": "same run as lt/a/s0 (share_arms)"}]
    assert [s["run_id"] for s in doc["skipped"]] == [kept] and doc["skipped"][0]["reason"].startswith("shared")
    assert not any(name.startswith("lt2_a_") for name in _run_dirs(ws))  # the shared cell has no run of its own
    assert _steps(ws / "runs" / kept) == list(range(1, 7))  # trained once
    shared_file = ws / "runs" / kept / SHARED_FILE
    assert json.loads(shared_file.read_text()) == {"cells": [["lt2", "a"]]}
    assert not (ws / "runs" / submitted[("lt2", "d")]["run_id"] / SHARED_FILE).exists()

    # the registry: lt2 lists the shared run (membership) besides its own; lt and the sweep as before
    status = json.loads(cli("status", "lt2", "--workdir", str(ws), "--json", check=True).stdout)
    assert sorted(r["run_id"] for r in status) == sorted([kept, submitted[("lt2", "d")]["run_id"]])
    assert {r["run_id"]: r["experiment"] for r in status}[kept] == "lt"  # it is lt's run, serving lt2
    assert len(json.loads(cli("status", "share", "--workdir", str(ws), "--json", check=True).stdout)) == 4
    assert len(json.loads(cli("status", "lt", "--workdir", str(ws), "--json", check=True).stdout)) == 3
    table = cli("status", "lt2", "--workdir", str(ws), check=True).stdout
    assert kept in table and "2 run(s)" in table

    # every new run dir records the code that launched it
    for run in doc["submitted"]:
        prov = read_provenance(run["run_dir"])
        assert prov is not None and prov["arctl_version"] == arctl.__version__
        assert prov["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"])
        assert prov["git_dirty"] in (None, True, False) and isinstance(prov["created_at"], float)
        assert (prov["git_commit"] is None) == (prov["git_dirty"] is None)

    # launched again: nothing new, the shared cell still shown, shared.json and provenance untouched
    before = {p: p.read_bytes() for p in [shared_file, *(Path(r["run_dir"]) / "provenance.json"
                                                          for r in doc["submitted"])]}
    mtime = shared_file.stat().st_mtime_ns
    again = json.loads(cli("sweep", "share", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert again["submitted"] == [] and len(again["skipped"]) == 5
    assert [s["run_id"] for s in again["shared"]] == [kept]
    assert {p: p.read_bytes() for p in before} == before and shared_file.stat().st_mtime_ns == mtime
    redo = json.loads(cli("sweep", "share", "--dry-run", "--json", "--executor", "local", "--workdir", str(ws),
                          check=True).stdout)
    assert {(r["experiment"], r["arm"]): r["action"] for r in redo["runs"]} == {
        ("lt", "a"): "skip", ("lt", "b"): "skip", ("lt", "c"): "skip", ("lt2", "a"): "shared", ("lt2", "d"): "skip"}
    text = cli("sweep", "share", "--executor", "local", "--workdir", str(ws), check=True).stdout
    assert "shared: same run as lt/a/s0" in text and "nothing to submit" in text

    # a later sweep that adds an experiment with the same arm: merged into shared.json
    grown = json.loads(cli("sweep", "share3", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert [(r["experiment"], r["arm"]) for r in grown["submitted"]] == [("lt3", "e")]
    assert [(s["experiment"], s["arm"], s["run_id"]) for s in grown["shared"]] == [
        ("lt2", "a", kept), ("lt3", "a", kept), ("lt3", "a-too", kept)]  # a-too: the same config, another name
    assert json.loads(shared_file.read_text()) == {"cells": [["lt2", "a"], ["lt3", "a"], ["lt3", "a-too"]]}
    status3 = json.loads(cli("status", "lt3", "--workdir", str(ws), "--json", check=True).stdout)
    assert kept in {r["run_id"] for r in status3} and len(status3) == 2
    assert _steps(ws / "runs" / kept) == list(range(1, 7))  # still trained once


def test_without_share_arms_each_experiment_runs_its_own_arm(shared_specs, tmp_path, cli):
    ws = tmp_path / "ws"
    doc = json.loads(cli("sweep", "apart", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert sorted((r["experiment"], r["arm"]) for r in doc["submitted"]) == [
        ("lt", "a"), ("lt", "b"), ("lt", "c"), ("lt2", "a"), ("lt2", "d")]
    assert "shared" not in doc and doc["skipped"] == []
    assert not list((ws / "runs").glob(f"*/{SHARED_FILE}"))
    with Registry(ws / "registry.sqlite") as reg:
        assert sorted(r.arm for r in reg.list("lt2")) == ["a", "d"]
        assert all(r.experiment == "lt2" for r in reg.list("lt2"))
    for run in doc["submitted"]:
        assert read_provenance(run["run_dir"])["arctl_version"] == arctl.__version__


def test_a_force_rerun_records_new_provenance_and_keeps_the_old_one(shared_specs, tmp_path, cli):
    ws = tmp_path / "ws"
    first = json.loads(cli("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws), "--json",
                           check=True).stdout)["submitted"][0]
    old = read_provenance(first["run_dir"])
    cli("run", "lt", "--arm", "a", "--executor", "local", "--workdir", str(ws), "--force", check=True)
    new = read_provenance(first["run_dir"])
    assert new["created_at"] > old["created_at"]
    (archived,) = Path(first["run_dir"]).glob("previous/*/provenance.json")
    assert json.loads(archived.read_text()) == old


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_git_state_of_a_checkout_an_untracked_copy_and_no_repository(tmp_path):
    assert git_state(tmp_path) == (None, None)  # not in a git work tree
    repo = tmp_path / "repo"
    pkg = repo / "arctl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = 'x'\n")
    _git(repo, "init", "-q")
    assert git_state(pkg) == (None, None)  # inside a work tree, but the package is not tracked there
    _git(repo, "add", "arctl/__init__.py")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert git_state(pkg) == (head, False)
    (repo / "untracked.txt").write_text("x")
    assert git_state(pkg) == (head, False)  # untracked files do not count
    (pkg / "__init__.py").write_text("__version__ = 'y'\n")
    assert git_state(pkg) == (head, True)
    assert git_state(pkg, timeout_s=0) == (None, None)  # out of time: unknown, never an error


def test_read_provenance_of_a_run_without_one_or_with_a_broken_one(tmp_path):
    assert read_provenance(tmp_path) is None
    (tmp_path / "provenance.json").write_text("{not json")
    assert read_provenance(tmp_path) is None
    (tmp_path / "provenance.json").write_text("[1]")
    assert read_provenance(tmp_path) is None


def test_only_the_names_of_a_run_may_differ_between_shared_cells(shared_specs):
    """Same config under another experiment, or under another arm name: shared. The same arm name
    with another config: a separate run."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved
    from arctl.launch.shared import mark_shared, share_key

    (shared_specs / "experiments" / "lt4.yaml").write_text(
        LT2.replace("a: [algo=grpo, prior=base]", "a: [algo=grpo, prior=base, optim.lr=2e-6]")
        .replace("d: [algo=grpo-dense, prior=linear]", "a2: [algo=grpo, prior=base]"))
    (shared_specs / "sweeps" / "mixed.yaml").write_text(
        "description: x\nexperiments: [lt, lt2, lt4]\nseeds: [0, 1]\nshare_arms: true\n")
    items = mark_shared(items_from_resolved(resolve_sweep("mixed")))
    cells = {(i.experiment, i.arm, i.seed): i for i in items}
    for seed in (0, 1):
        kept = cells[("lt", "a", seed)]
        assert kept.shares is None and cells[("lt2", "a", seed)].shares == kept.run_id
        assert cells[("lt2", "a", seed)].run_id == kept.run_id and cells[("lt2", "a", seed)].action == "shared"
        assert cells[("lt4", "a", seed)].shares is None and cells[("lt4", "a2", seed)].shares == kept.run_id
        assert cells[("lt4", "a2", seed)].reason == f"same run as lt/a/s{seed} (share_arms)"
    assert cells[("lt2", "a", 0)].run_id != cells[("lt2", "a", 1)].run_id  # seeds are never shared
    for other, names in ((("lt2", "a", 0), {"experiment", "run_id", "wandb"}),
                         (("lt4", "a2", 0), {"experiment", "arm", "run_id", "wandb"})):
        a, b = cells[("lt", "a", 0)].config, cells[other].config
        assert {k for k in a if a[k] != b[k]} == names  # what the names of a run are made of
        assert share_key(a) == share_key(b)
    assert sum(1 for i in items if i.shares) == 4


def test_a_refused_submission_leaves_no_membership_and_no_shared_file(shared_specs, tmp_path, refusing_sbatch):
    from arctl.compose import resolve_sweep
    from arctl.launch.executors import LaunchError
    from arctl.launch.launcher import items_from_resolved, launch
    from arctl.launch.shared import mark_shared
    from arctl.launch.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    (ws.root / "runs").mkdir(parents=True)  # an existing workspace: it stays, empty
    items = mark_shared(items_from_resolved(resolve_sweep("share")))
    with pytest.raises(LaunchError, match="invalid partition"):
        launch(items, ws, executor="slurm", members=["share"])
    with Registry(ws.registry_path) as reg:
        assert reg.list() == [] and reg.list("lt2") == [] and reg.names() == set()
    assert list(ws.runs_dir.iterdir()) == []


def test_a_sweep_shares_the_runs_the_workspace_already_has(shared_specs, tmp_path, cli):
    """`arctl run` first (the Quickstart's ablation-vr), a sharing sweep next (`arctl sweep paper`):
    a cell whose config a run of the workspace already computes (its own cell's run, another
    experiment's, or another arm name's) shares that run instead of training it again; --force
    reruns the sweep's own cells and shares nothing outside; a sweep whose every cell is shared
    submits nothing and records the sharing."""
    ws = tmp_path / "ws"
    first = json.loads(cli("run", "lt2", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    lt2 = {r["arm"]: r["run_id"] for r in first["submitted"]}
    assert {r["state"] for r in first["submitted"]} == {"COMPLETED"}

    # lt/a is lt2/a's config, and lt2/a's own run is done: lt/a shares it (not the other way round)
    doc = json.loads(cli("sweep", "share", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert sorted((r["experiment"], r["arm"]) for r in doc["submitted"]) == [("lt", "b"), ("lt", "c")]
    assert [(s["experiment"], s["arm"], s["run_id"], s["reason"]) for s in doc["shared"]] == [
        ("lt", "a", lt2["a"], "same run as lt2/a/s0 (share_arms)")]
    kept = ws / "runs" / lt2["a"]
    assert json.loads((kept / SHARED_FILE).read_text()) == {"cells": [["lt", "a"]]}
    assert _steps(kept) == list(range(1, 7)) and not any(n.startswith("lt_a_") for n in _run_dirs(ws))
    assert lt2["a"] in {r["run_id"] for r in json.loads(cli("status", "lt", "--workdir", str(ws), "--json",
                                                              check=True).stdout)}

    # lt3 alone: a and a-too have no run of their own; the workspace's lt2/a computes them
    (shared_specs / "sweeps" / "only3.yaml").write_text("description: x\nexperiments: [lt3]\nseeds: [0]\nshare_arms: true\n")
    dry = json.loads(cli("sweep", "only3", "--dry-run", "--json", "--executor", "local", "--workdir", str(ws),
                         check=True).stdout)
    assert {(r["arm"], r["action"], r["run_id"]) for r in dry["runs"] if r["arm"] != "e"} == {
        ("a", "shared", lt2["a"]), ("a-too", "shared", lt2["a"])}
    assert {r["reason"] for r in dry["runs"] if r["arm"] != "e"} == {"same run as lt2/a/s0 in this workspace (share_arms)"}
    doc3 = json.loads(cli("sweep", "only3", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert [(r["experiment"], r["arm"]) for r in doc3["submitted"]] == [("lt3", "e")]
    assert json.loads((kept / SHARED_FILE).read_text()) == {"cells": [["lt", "a"], ["lt3", "a"], ["lt3", "a-too"]]}
    status = {r["run_id"]: r for r in json.loads(cli("status", "only3", "--workdir", str(ws), "--json", check=True).stdout)}
    assert status[lt2["a"]]["serves"] == [["lt", "a"], ["lt3", "a"], ["lt3", "a-too"]]
    assert "lt2/a/s0 as lt3/a, lt3/a-too" in cli("status", "lt3", "--workdir", str(ws), check=True).stdout
    assert _steps(kept) == list(range(1, 7))  # still trained once

    # --force: the sweep's own cells rerun; nothing outside them is shared
    forced = json.loads(cli("sweep", "only3", "--dry-run", "--force", "--json", "--executor", "local",
                            "--workdir", str(ws), check=True).stdout)
    actions = {r["arm"]: (r["action"], r["run_id"]) for r in forced["runs"]}
    assert actions["a"][0] == "new" and actions["a"][1].startswith("lt3_a_s0_")
    assert actions["a-too"] == ("shared", actions["a"][1]) and actions["e"][0] == "rerun"

    # every cell shared: nothing to submit, the sharing recorded
    (shared_specs / "experiments" / "lt5.yaml").write_text(LT2.replace("  d: [algo=grpo-dense, prior=linear]\n", ""))
    (shared_specs / "sweeps" / "only5.yaml").write_text("description: x\nexperiments: [lt5]\nseeds: [0]\nshare_arms: true\n")
    doc5 = json.loads(cli("sweep", "only5", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert doc5["submitted"] == [] and [s["run_id"] for s in doc5["shared"]] == [lt2["a"]]
    assert ["lt5", "a"] in json.loads((kept / SHARED_FILE).read_text())["cells"]

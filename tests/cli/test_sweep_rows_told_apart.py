"""A sweep's rows told apart, and its runs judged against the sweep as it now stands. From a hunt of a sweep edited
between launches: `arctl sweep lambda --dry-run` listed 8 rows `main-ar-uniform ar-uniform 0 new`, four of each
seed, told apart by the hash in their run id only; after an arm was edited, `arctl status evs` listed
`evx/grpo/s0 COMPLETED` twice and nothing said which one the sweep now composes; after an arm was removed its runs
still counted in the totals, unmarked."""

from __future__ import annotations

import json
import re

import pytest
from bad_input import launch_args  # tests/support/bad_input.py

EVX = ("description: x\nseeds: [0, 1]\narms:\n  grpo: [algo=grpo, prior=base]\n"
       "  grpo-vr: [algo=grpo-vr, prior=base]\n")
EVX_EDITED = EVX.replace("prior=base]\n  grpo-vr", "prior=base, optim.lr=0.0005]\n  grpo-vr")  # grpo's lr edited
EVX_ONE_ARM = "description: x\nseeds: [0, 1]\narms:\n  grpo: [algo=grpo, prior=base]\n"  # grpo-vr removed


@pytest.fixture
def evx(sandbox):
    (sandbox.specs / "experiments" / "evx.yaml").write_text(EVX)
    return sandbox


def _plan_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith("evx_")]


def test_a_grid_sweeps_plan_says_each_rows_grid_point(evx):
    (evx.specs / "sweeps" / "evg.yaml").write_text(
        "experiments: [evx]\nseeds: [0]\ngrid: {optim.lr: [0.0001, 0.0003]}\n")
    res = evx.run("sweep", "evg", "--dry-run", *launch_args(evx))
    assert res.code == 0 and res.crash is None, res.err + (res.crash or "")
    header = next(line for line in res.out.splitlines() if line.startswith("run id"))
    assert header.split()[:8] == ["run", "id", "experiment", "arm", "seed", "would", "grid", "point"], header
    rows = _plan_rows(res.out)
    # the action stays the 5th word (a script's), the grid point the 6th
    assert sorted((r[2], r[4], r[5]) for r in rows) == [
        ("grpo", "new", "optim.lr=0.0001"), ("grpo", "new", "optim.lr=0.0003"),
        ("grpo-vr", "new", "optim.lr=0.0001"), ("grpo-vr", "new", "optim.lr=0.0003")], res.out
    doc = json.loads(evx.run("sweep", "evg", "--dry-run", "--json", *launch_args(evx)).out)
    assert sorted((r["arm"], r["grid"]["optim.lr"], r["grid_unread"]) for r in doc["runs"]) == [
        ("grpo", 0.0001, []), ("grpo", 0.0003, []), ("grpo-vr", 0.0001, []), ("grpo-vr", 0.0003, [])]
    # each run's grid point is its config's (the row is the run it names)
    assert all(r["config"]["optim"]["lr"] == r["grid"]["optim.lr"] for r in doc["runs"])


def test_a_grid_key_a_run_does_not_read_is_said_so(sandbox):
    """ablation-dense's GRPO has no length penalty: one run for every reward.alpha of the grid."""
    (sandbox.specs / "sweeps" / "ga.yaml").write_text(
        "experiments: [ablation-dense]\nseeds: [0]\ngrid: {reward.alpha: [0.1, 0.2]}\n")
    doc = json.loads(sandbox.run("sweep", "ga", "--dry-run", "--json", *launch_args(sandbox)).out)
    by_arm: dict[str, list] = {}
    for r in doc["runs"]:
        by_arm.setdefault(r["arm"], []).append((r["grid"], r["grid_unread"]))
    assert by_arm["grpo"] == [({}, ["reward.alpha"])], by_arm
    assert sorted(g["reward.alpha"] for g, _ in by_arm["grpo-lp-v1"]) == [0.1, 0.2], by_arm
    out = sandbox.run("sweep", "ga", "--dry-run", *launch_args(sandbox)).out
    (grpo,) = [line.split() for line in out.splitlines() if line.split()[1:3] == ["ablation-dense", "grpo"]]
    assert grpo[5] == "reward.alpha=(unread)", out


def test_a_sweep_without_a_grid_has_no_grid_column(evx):
    (evx.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0]\n")
    res = evx.run("sweep", "evs", "--dry-run", *launch_args(evx))
    assert "grid point" not in res.out and all(r[4] == "new" for r in _plan_rows(res.out)), res.out
    doc = json.loads(evx.run("sweep", "evs", "--dry-run", "--json", *launch_args(evx)).out)
    assert all(r["grid"] is None and r["grid_unread"] == [] for r in doc["runs"])


def _launched(sandbox, sweep: str, state: str = "COMPLETED", overrides: tuple[str, ...] = ()) -> list[str]:
    """The runs a launch of ``sweep`` would make, as a launch leaves them: run folders with their config.yaml, and
    registry rows in ``state``, members of the sweep (no job runs: these tests read the registry and the folders)."""
    from arctl.cli.launching import sweep_items
    from arctl.launch.registry import Registry, new_claim_token
    from arctl.launch.rundir import prepare_run_dir
    from arctl.launch.workspace import Workspace

    ws = Workspace(sandbox.ws)
    items = sweep_items(sweep, list(overrides), "tiny", None, str(sandbox.ws), False)
    with Registry(ws.registry_path) as reg:
        fresh = [i for i in items if reg.get(i.run_id) is None and not i.shares]
        for item in fresh:
            prepare_run_dir(ws.run_dir(item.run_id), item.config)
        reg.claim([i.record() for i in fresh], new_claim_token(), members=[sweep])
        for item in fresh:
            reg.update(item.run_id, state=state, claim=None, before_claim=None)
    return [i.run_id for i in fresh]


def _status(sandbox, *args: str):
    res = sandbox.run("status", *args, "--workdir", str(sandbox.ws), "--no-refresh")
    assert res.code == 0 and res.crash is None, res.err + (res.crash or "")
    return res


def _table(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("evx_")}


def test_status_marks_the_runs_an_edited_sweep_no_longer_composes(evx):
    # three seeds: the third is given its seed from the first's cells, not composed (sweep_now), and judged alike
    (evx.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1, 2]\n")
    old = _launched(evx, "evs")
    assert len(old) == 6
    res = _status(evx, "evs")  # nothing edited: no mark, no column
    assert "in sweep" not in res.out and "not what sweep" not in res.out, res.out
    doc = json.loads(_status(evx, "evs", "--json").out)
    assert [(r["in_sweep"], r["sweep_differs"]) for r in doc] == [(True, None)] * 6, doc

    (evx.specs / "experiments" / "evx.yaml").write_text(EVX_EDITED)  # grpo's lr edited, then grpo relaunched
    new = _launched(evx, "evs")
    assert len(new) == 3 and all("_grpo_" in r for r in new)
    res = _status(evx, "evs")
    rows = _table(res.out)
    assert len(rows) == 9, res.out
    stale = {r for r in old if "_grpo_" in r}
    assert {r for r, cols in rows.items() if cols[-1] == "no"} == stale, res.out
    assert all(rows[r][-1] == "yes" for r in rows if r not in stale), res.out
    text = " ".join(res.out.split())
    assert "9 run(s): 9 completed" in text, res.out
    assert "3 of 9 run(s), `no` under `in sweep`, are not what sweep evs composes as it now stands" in text, res.out
    assert "evx/grpo seed(s) 0-2: optim.lr=0.0001 (the sweep now: 0.0005)" in text, res.out
    doc = {r["run_id"]: r for r in json.loads(_status(evx, "evs", "--json").out)}
    assert {r for r, d in doc.items() if d["in_sweep"] is False} == stale
    for r in stale:
        assert doc[r]["sweep_differs"] == {"optim.lr": {"ran": 0.0001, "sweep": 0.0005}}, doc[r]
    # --state shows fewer runs; each shown one is judged as before
    shown = json.loads(_status(evx, "evs", "--json", "--state", "completed").out)
    assert {r["run_id"] for r in shown if r["in_sweep"] is False} == stale
    # every run, an experiment's or a run id's status judges nothing (no sweep named)
    assert all(d["in_sweep"] is None for d in json.loads(_status(evx, "evx", "--json").out))
    assert "in sweep" not in _status(evx).out


def test_status_marks_the_runs_of_a_removed_arm(evx):
    (evx.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0, 1]\n")
    _launched(evx, "evs")
    (evx.specs / "experiments" / "evx.yaml").write_text(EVX_ONE_ARM)
    res = _status(evx, "evs")
    rows = _table(res.out)
    assert {r for r, cols in rows.items() if cols[-1] == "no"} == {r for r in rows if "_grpo-vr_" in r}, res.out
    text = " ".join(res.out.split())
    assert "4 run(s): 4 completed" in text and "2 of 4 run(s), `no` under `in sweep`" in text, res.out
    assert "evx/grpo-vr seed(s) 0,1: the sweep composes no such cell now (its arm or experiment removed or renamed)" \
        in text, res.out
    doc = {r["run_id"]: r for r in json.loads(_status(evx, "evs", "--json").out)}
    assert all((d["in_sweep"], d["sweep_differs"]) == (("_grpo-vr_" not in r), None) for r, d in doc.items()), doc


def test_status_of_a_grid_sweep_says_each_runs_grid_point_and_marks_a_dropped_one(evx):
    (evx.specs / "sweeps" / "evg.yaml").write_text("experiments: [evx]\nseeds: [0]\ngrid: {optim.lr: [0.0001, 0.0003]}\n")
    _launched(evx, "evg")
    res = _status(evx, "evg")
    header = next(line for line in res.out.splitlines() if line.startswith("run id"))
    assert header.split()[-2:] == ["grid", "point"], res.out  # no mark column: every run is the sweep's
    assert sorted((cols[1], cols[-1]) for cols in _table(res.out).values()) == [
        ("evx/grpo-vr/s0", "optim.lr=0.0001"), ("evx/grpo-vr/s0", "optim.lr=0.0003"),
        ("evx/grpo/s0", "optim.lr=0.0001"), ("evx/grpo/s0", "optim.lr=0.0003")], res.out
    (evx.specs / "sweeps" / "evg.yaml").write_text("experiments: [evx]\nseeds: [0]\ngrid: {optim.lr: [0.0003]}\n")
    res = _status(evx, "evg")
    rows = _table(res.out)
    assert sorted((cols[-2], cols[-1]) for cols in rows.values()) == [
        ("optim.lr=0.0001", "no"), ("optim.lr=0.0001", "no"), ("optim.lr=0.0003", "yes"),
        ("optim.lr=0.0003", "yes")], res.out
    assert re.search(r"evx/grpo seed\(s\) 0: optim\.lr=0\.0001 \(the sweep now: 0\.0003\)", " ".join(res.out.split()))
    doc = json.loads(_status(evx, "evg", "--json").out)
    assert sorted((d["grid"]["optim.lr"], d["in_sweep"]) for d in doc) == [
        (0.0001, False), (0.0001, False), (0.0003, True), (0.0003, True)], doc


@pytest.mark.parametrize("sweep", ["lambda", "baselines"])  # a grid; trainer.init_from chains and share_arms
def test_the_seeds_status_does_not_compose_get_the_ids_a_launch_composes(sweep):
    """`arctl status SWEEP` composes two seeds and gives the cells of the others their seed: the same run ids (a
    chained run's with the id of the run it starts from at that seed) as composing every seed."""
    from arctl.cli.launching import _at_seeds
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved

    every = items_from_resolved(resolve_sweep(sweep, [], "tiny", [0, 1, 2, 5]), launching=False)
    probe = items_from_resolved(resolve_sweep(sweep, [], "tiny", [0, 1]), launching=False)
    spread = _at_seeds(probe, [0, 1], [2, 5])
    assert spread is not None
    assert sorted(i.run_id for i in spread) == sorted(i.run_id for i in every if i.seed in (2, 5))
    assert any(i.after for i in spread) == (sweep == "baselines")
    assert all(i.config["run_id"] == i.run_id and i.config["seed"] == i.seed for i in spread)


def test_an_arm_that_reads_its_seed_elsewhere_is_composed_at_every_seed(sandbox):
    from arctl.cli.launching import _at_seeds
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved

    (sandbox.specs / "experiments" / "sd.yaml").write_text(
        'description: x\nseeds: [1, 2]\narms:\n  g: [algo=grpo, prior=base, "trainer.total_steps=${seed}"]\n')
    (sandbox.specs / "sweeps" / "sds.yaml").write_text("experiments: [sd]\n")
    probe = items_from_resolved(resolve_sweep("sds", [], "tiny", [1, 2]), launching=False)
    assert [i.config["trainer"]["total_steps"] for i in probe] == [1, 2]
    assert _at_seeds(probe, [1, 2], [3]) is None  # not given seed 3 from seed 1's config: composed
    assert _at_seeds(probe, [1, 2], []) == []


def test_a_grid_sweeps_launch_lines_say_each_runs_grid_point(evx, monkeypatch):
    """The launch's own lines (submitted, then skipped) and its --json, with the counting test backend's debug runs."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    (evx.specs / "experiments" / "evx.yaml").write_text(EVX_ONE_ARM.replace("seeds: [0, 1]", "seeds: [0]"))
    (evx.specs / "sweeps" / "evg.yaml").write_text("experiments: [evx]\ngrid: {optim.lr: [0.0001, 0.0003]}\n")
    args = ("sweep", "evg", "--executor", "debug", "--workdir", str(evx.ws), "trainer.total_steps=2")
    res = evx.run(*args)
    assert res.code == 0 and res.crash is None, res.out + res.err + (res.crash or "")
    said = re.findall(r"^\s+new\s+(\S+)\s+\((evx/grpo/s0 optim\.lr=0\.000[13])\)", res.out, re.M)
    assert sorted(cell for _, cell in said) == ["evx/grpo/s0 optim.lr=0.0001", "evx/grpo/s0 optim.lr=0.0003"], res.out
    again = evx.run(*args)
    assert sorted(re.findall(r"^\s+skip\s+\S+\s+\((evx/grpo/s0 \S+)\)", again.out, re.M)) == [
        "evx/grpo/s0 optim.lr=0.0001", "evx/grpo/s0 optim.lr=0.0003"], again.out
    doc = json.loads(evx.run(*args, "--json").out)
    assert sorted((s["grid"]["optim.lr"], s["grid_unread"]) for s in doc["skipped"]) == [(0.0001, []), (0.0003, [])]


def test_a_sweep_that_no_longer_composes_leaves_its_runs_unjudged_in_a_note(evx):
    (evx.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0]\n")
    _launched(evx, "evs")
    (evx.specs / "experiments" / "evx.yaml").unlink()
    res = _status(evx, "evs")
    assert "in sweep" not in res.out and len(_table(res.out)) == 2, res.out
    assert ("sweep evs does not compose as it stands at scale tiny, so its 2 run(s) there are not judged: "
            in " ".join(res.out.split())), res.out
    res = _status(evx, "evs", "--json")
    assert [d["in_sweep"] for d in json.loads(res.out)] == [None, None]
    assert "note: sweep evs does not compose as it stands" in " ".join(res.err.split()), res.err


def test_a_resumes_plan_says_the_grid_point_its_frozen_config_holds(evx):
    (evx.specs / "sweeps" / "evg.yaml").write_text("experiments: [evx]\nseeds: [0]\ngrid: {optim.lr: [0.0001, 0.0003]}\n")
    _launched(evx, "evg", state="FAILED")
    res = evx.run("resume", "evg", "--dry-run", *launch_args(evx))
    assert res.code == 0 and res.crash is None, res.err + (res.crash or "")
    assert sorted((r[2], r[4], r[5]) for r in _plan_rows(res.out)) == [
        ("grpo", "resume", "optim.lr=0.0001"), ("grpo", "resume", "optim.lr=0.0003"),
        ("grpo-vr", "resume", "optim.lr=0.0001"), ("grpo-vr", "resume", "optim.lr=0.0003")], res.out
    doc = json.loads(evx.run("resume", "evg", "--dry-run", "--json", *launch_args(evx)).out)
    assert sorted(r["grid"]["optim.lr"] for r in doc["runs"]) == [0.0001, 0.0001, 0.0003, 0.0003]


def test_runs_a_launch_gave_a_command_line_override_are_not_the_sweep_as_it_stands(evx):
    (evx.specs / "sweeps" / "evs.yaml").write_text("experiments: [evx]\nseeds: [0]\n")
    plain = _launched(evx, "evs")
    hot = _launched(evx, "evs", overrides=("rollout.temperature=0.9",))
    assert len(plain) == len(hot) == 2
    doc = {r["run_id"]: r for r in json.loads(_status(evx, "evs", "--json").out)}
    assert {r for r, d in doc.items() if d["in_sweep"] is False} == set(hot)
    assert all(doc[r]["sweep_differs"] == {"rollout.temperature": {"ran": 0.9, "sweep": 1.0}} for r in hot), doc

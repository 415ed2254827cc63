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


# `arctl status SWEEP` keeps the cells it composed in <workspace>/.arctl-cache/sweeps/ (from a review: `status paper`
# went from 0.6 s to 2.3 s, every time, when it began to judge the runs against the sweep as it now stands)
EVS = "experiments: [evx]\nseeds: [0, 1, 2]\n"


@pytest.fixture
def composes(monkeypatch):
    """Each composition of a sweep (:func:`arctl.compose.resolve_sweep`), counted; the cache's guard against a spec
    written within the clock's tick off (the sandbox's specs were all written just now)."""
    import arctl.compose

    calls: list[str] = []
    real = arctl.compose.resolve_sweep

    def counted(name, *args, **kwargs):
        calls.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(arctl.compose, "resolve_sweep", counted)
    monkeypatch.setattr("arctl.track.runs.cache.RECENT_NS", 0)
    return calls


def _cached(sandbox) -> list:
    folder = sandbox.ws / ".arctl-cache" / "sweeps"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _twice(sandbox, composes, *args: str) -> tuple[str, str]:
    """`arctl status evs ARGS` (the table) and its --json, each composing nothing."""
    composes.clear()
    shown = _status(sandbox, "evs", *args).out, _status(sandbox, "evs", "--json", *args).out
    assert composes == [], composes
    return shown


def test_a_repeated_status_of_a_sweep_composes_nothing_and_shows_the_same(evx, composes, monkeypatch):
    (evx.specs / "sweeps" / "evs.yaml").write_text(EVS)
    _launched(evx, "evs")
    (evx.specs / "experiments" / "evx.yaml").write_text(EVX_EDITED)  # 3 of the 6 runs no longer the sweep's
    _launched(evx, "evs")
    monkeypatch.setattr("arctl.track.runs.cache.RECENT_NS", 10**18)  # every spec written within the guard: not kept
    composes.clear()
    fresh = _status(evx, "evs").out, _status(evx, "evs", "--json").out
    assert composes and _cached(evx) == [], composes
    assert "3 of 9 run(s), `no` under `in sweep`" in " ".join(fresh[0].split()), fresh[0]
    monkeypatch.setattr("arctl.track.runs.cache.RECENT_NS", 0)
    composes.clear()
    assert _status(evx, "evs", "--json").out == fresh[1] and composes  # composed, kept
    assert len(_cached(evx)) == 2  # every seed (two composed, one given its seed), and seed 2 of the stale runs
    assert _twice(evx, composes) == fresh
    # --state shows fewer runs, judged from the same cells
    shown = json.loads(_twice(evx, composes, "--state", "completed")[1])
    assert [(d["run_id"], d["in_sweep"], d["sweep_differs"]) for d in shown] == [
        (d["run_id"], d["in_sweep"], d["sweep_differs"]) for d in json.loads(fresh[1])]


def test_an_edited_spec_is_composed_again_and_judged_as_it_now_stands(evx, composes):
    import os

    spec = evx.specs / "experiments" / "evx.yaml"
    spec.write_text(EVX.replace("prior=base]\n  grpo-vr", "prior=base, optim.lr=0.0003]\n  grpo-vr"))
    (evx.specs / "sweeps" / "evs.yaml").write_text(EVS)
    old = _launched(evx, "evs")
    _status(evx, "evs")
    table, doc = _twice(evx, composes)
    assert "in sweep" not in table and all(d["in_sweep"] for d in json.loads(doc)), table
    # the same size, another value: only the file's times tell it
    before = spec.stat()
    spec.write_text(EVX.replace("prior=base]\n  grpo-vr", "prior=base, optim.lr=0.0005]\n  grpo-vr"))
    assert spec.stat().st_size == before.st_size
    os.utime(spec, ns=(before.st_atime_ns, before.st_mtime_ns - 10_000_000_000))  # (a future one is never kept)
    composes.clear()
    res = _status(evx, "evs")
    assert composes, composes
    stale = {r for r in old if "_grpo_" in r}
    assert {r for r, cols in _table(res.out).items() if cols[-1] == "no"} == stale, res.out
    assert "evx/grpo seed(s) 0-2: optim.lr=0.0003 (the sweep now: 0.0005)" in " ".join(res.out.split()), res.out
    assert _twice(evx, composes)[0] == res.out  # kept again, under the new key
    # a code change of arctl's, another search path: composed again
    composes.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("arctl.launch.provenance.code_hash", lambda root=None: "0" * 64)
        assert _status(evx, "evs").out == res.out and composes
    other = evx.root / "more-specs"
    (other / "experiments").mkdir(parents=True)
    (other / "experiments" / "unrelated.yaml").write_text("description: y\narms:\n  g: [algo=grpo]\n")
    composes.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARCTL_SPECS", f"{evx.specs}{os.pathsep}{other}")
        assert _status(evx, "evs").out == res.out and composes


@pytest.mark.parametrize("damage", ["not json", "cut short", "items of another shape", "a folder"])
def test_a_damaged_cache_entry_is_composed_again(evx, composes, damage):
    (evx.specs / "sweeps" / "evs.yaml").write_text(EVS)
    _launched(evx, "evs")
    fresh = _status(evx, "evs").out, _status(evx, "evs", "--json").out
    (entry,) = _cached(evx)
    text = entry.read_text()
    if damage == "not json":
        entry.write_text("{not json")
    elif damage == "cut short":
        entry.write_text(text[: len(text) // 2])
    elif damage == "items of another shape":
        entry.write_text(json.dumps({**json.loads(text), "items": [{"run_id": "evx_grpo_s0_0000000000"}]}))
    else:
        entry.unlink()
        entry.mkdir()
    composes.clear()
    res = evx.run("status", "evs", "--workdir", str(evx.ws), "--no-refresh")
    assert res.code == 0 and res.crash is None and res.out == fresh[0], res.err + (res.crash or "")
    assert composes == ["evs"]
    if damage != "a folder":  # rewritten: the next one reads it
        assert _twice(evx, composes) == fresh


def test_a_workspace_whose_cache_cannot_be_written_composes_each_time(evx, composes):
    (evx.specs / "sweeps" / "evs.yaml").write_text(EVS)
    _launched(evx, "evs")
    (evx.ws / ".arctl-cache").write_text("")  # no folder can be made there (as a read-only workspace; root writes)
    composes.clear()
    first, again = _status(evx, "evs", "--json").out, _status(evx, "evs", "--json").out
    assert first == again and composes == ["evs", "evs"]
    assert [d["in_sweep"] for d in json.loads(first)] == [True] * 6


def test_the_cache_key_holds_an_installed_backends_code_and_scale_profiles(tmp_path, monkeypatch):
    """A backend from an installed package (tests/plugins, in a subprocess with it on PYTHONPATH): its code and its
    scale profiles are in the key, so an upgrade or an edit of them composes the sweep again."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from plugin_site import make_site  # tests/support/plugin_site.py

    for var in ("ARCTL_SPECS", "ARCTL_HOME", "ARCTL_TEST_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    site = make_site(tmp_path / "site")
    show = "import json; from arctl.cli.launching import compose_inputs; print(json.dumps(compose_inputs()))"

    import arctl

    here = str(Path(arctl.__file__).resolve().parents[1])  # the arctl under test, whichever is installed

    def key(with_site: bool = True) -> dict:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*([str(site)] if with_site else []), here])}
        out = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, env=env, cwd=tmp_path,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    without, first = key(False), key()
    profile = site / "arctl_fake_backend" / "conf" / "scale" / "fake.yaml"
    assert [p[:3] for p in first["plugins"] if p[0] == "arctl.backends"] == [
        ["arctl.backends", "fake", "arctl_fake_backend:BACKEND"]]
    assert str(profile) in [f[0] for f in first["files"]] and str(profile) not in [f[0] for f in without["files"]]
    profile.write_text(profile.read_text() + "\n# edited\n")
    edited = key()
    assert edited["files"] != first["files"]  # (and its package's hash: code_hash reads .yaml too)
    code = site / "arctl_fake_backend" / "__init__.py"
    code.write_text(code.read_text() + "\n# edited\n")
    assert key()["plugins"] != edited["plugins"]


def test_the_cache_key_reads_the_files_of_a_linked_conf_folder(tmp_path):
    """From a third review: a lab's conf/algo linked to a shared folder was not walked (rglob does not enter a
    linked folder, Hydra reads through it), so an edit there left a cached status stale; a link back up is
    walked once."""
    from arctl.cli.launching import _files_under

    shared = tmp_path / "shared" / "algo"
    shared.mkdir(parents=True)
    (shared / "mygrpo.yaml").write_text("x: 1\n")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "algo").symlink_to(shared, target_is_directory=True)
    (conf / "top.yaml").write_text("y: 2\n")
    (shared / "up").symlink_to(conf, target_is_directory=True)  # a loop
    found = _files_under(conf)
    assert conf / "algo" / "mygrpo.yaml" in found and conf / "top.yaml" in found
    assert len(found) == len(set(map(lambda p: p.resolve(), found))) == 2

"""A run that starts from another run's final weights (``trainer.init_from``: L1-Max from L1-Exact,
ThinkPrune's rounds): the launcher resolves the other run, launches it first when it is not done,
and the run waits for it; a failed one fails it without starting it. The run's identity names the
other run's."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from arctl.compose import resolve_experiment
from arctl.compose.errors import SpecError
from arctl.launch.launcher import items_from_resolved, plan
from arctl.launch.registry import Registry
from arctl.launch.run_id import make_run_id
from arctl.launch.status_file import read_status
from arctl.launch.workspace import Workspace

CHAIN = textwrap.dedent(
    """\
    description: three rounds, each from the previous one's final weights
    seeds: [0]
    overrides: [trainer.total_steps=4, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      r1: [algo=grpo, prior=base]
      r2: [algo=grpo, prior=base, optim.lr=2e-6, trainer.init_from=r1]
      r3: [algo=grpo, prior=base, optim.lr=3e-6, trainer.init_from=chain/r2]
    """
)


@pytest.fixture
def chain(specs) -> Path:
    (specs / "experiments" / "chain.yaml").write_text(CHAIN)
    return specs


def _write(specs: Path, name: str, arms: str) -> None:
    (specs / "experiments" / f"{name}.yaml").write_text(
        "description: x\nseeds: [0]\noverrides: [trainer.total_steps=4, wandb.mode=disabled]\narms:\n" + arms)


def _items(name: str, arms=None, overrides=None):
    return items_from_resolved(resolve_experiment(name, overrides or [], arms=arms))


def test_a_run_brings_the_runs_it_starts_from_first_and_names_them_in_its_identity(chain):
    items = _items("chain", ["r3"])
    assert [i.arm for i in items] == ["r1", "r2", "r3"]
    r1, r2, r3 = items
    assert (r1.after, r2.after, r3.after) == (None, r1.run_id, r2.run_id)
    assert (r1.needed_by, r2.needed_by, r3.needed_by) == ("chain/r2/s0", "chain/r3/s0", None)
    assert r2.config["trainer"]["init_run"] == r1.run_id and r3.config["trainer"]["init_run"] == r2.run_id
    # the same runs, with the same ids, as when every arm is asked for (and then none is "needed by")
    every = _items("chain")
    assert [i.run_id for i in every] == [i.run_id for i in items] and {i.needed_by for i in every} == {None}
    # a run without init_from keeps the id it had before the keys existed
    bare = {**r1.config, "trainer": {k: v for k, v in r1.config["trainer"].items() if not k.startswith("init_")}}
    assert make_run_id(bare) == r1.run_id
    # the command line's overrides reach the runs it starts from too (one launch, one set of runs)
    tuned = _items("chain", ["r3"], ["optim.clip_ratio_high=0.3"])
    assert all(i.config["optim"]["clip_ratio_high"] == 0.3 for i in tuned)
    assert tuned[2].config["trainer"]["init_run"] == tuned[1].run_id != r2.run_id


def test_the_baselines_sweeps_chains_are_the_papers_recipes():
    """The shipped chains as `arctl sweep baselines` launches them: L1-Max from L1-Exact and ThinkPrune's
    round 3 from round 2 from round 1, at the same seed, scale and sweep overrides, each run after the
    one it starts from, which its identity names."""
    from arctl.compose import resolve_sweep

    items = items_from_resolved(resolve_sweep("baselines", [], "tiny", [0, 1]))
    by = {(i.experiment, i.arm, i.seed): i for i in items}
    for seed in (0, 1):
        exact, mx = by[("baselines-l1", "l1-exact", seed)], by[("baselines-l1", "l1-max", seed)]
        assert exact.after is None and mx.after == exact.run_id == mx.config["trainer"]["init_run"]
        assert (mx.config["budget_control"]["l1_mode"], exact.config["budget_control"]["l1_mode"]) == ("max", "exact")
        r1, r2, r3 = (by[("baselines-thinkprune", a, seed)] for a in ("thinkprune-r1", "thinkprune-r2", "thinkprune"))
        assert (r1.after, r2.after, r3.after) == (None, r1.run_id, r2.run_id)
        assert [r.config["budget_control"]["thinkprune_round"] for r in (r1, r2, r3)] == [1, 2, 3]
        for item in (exact, mx, r1, r2, r3):  # the sweep's override and scale reach every link
            assert item.config["budget_control"]["forcing_extensions"] == 2 and item.config["seed"] == seed
            assert item.config["scale"]["name"] == "tiny"
        assert [items.index(x) for x in (exact, mx)] == sorted(items.index(x) for x in (exact, mx))
        assert [items.index(x) for x in (r1, r2, r3)] == sorted(items.index(x) for x in (r1, r2, r3))


def test_changing_the_run_it_starts_from_changes_its_id(chain):
    before = _items("chain", ["r2"])[1].run_id
    (chain / "experiments" / "chain.yaml").write_text(CHAIN.replace("r1: [algo=grpo, prior=base]",
                                                                     "r1: [algo=grpo, prior=base, optim.lr=5e-6]"))
    after = _items("chain", ["r2"])
    assert after[1].run_id != before and after[1].after == after[0].run_id


@pytest.mark.parametrize("arms,expected", [
    ("  a: [algo=grpo, trainer.init_from=nope]\n", "experiment 'd' has no arm 'nope'"),
    ("  a: [algo=grpo, trainer.init_from=a]\n", "is the run itself"),
    ("  a: [algo=grpo, trainer.init_from=b]\n  b: [algo=grpo, prior=base, trainer.init_from=a]\n", "makes a cycle"),
    ("  a: [algo=grpo, trainer.init_from=x/y/z]\n", "is not an arm"),
    ("  a: [algo=grpo, trainer.init_from=ghost/a]\n", "unknown experiment 'ghost'"),
    ("  a: [algo=grpo, trainer.init_run=d_a_s0_0123456789]\n", "written by the launcher"),
])
def test_a_bad_init_from_is_one_clear_error(specs, arms, expected):
    _write(specs, "d", arms)
    with pytest.raises(SpecError) as err:
        _items("d")
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_the_cli_says_a_bad_init_from_in_one_line_exit_2_and_writes_nothing(specs, tmp_path, cli):
    _write(specs, "d", "  a: [algo=grpo, trainer.init_from=nope]\n")
    out = cli("run", "d", "--executor", "local", "--workdir", str(tmp_path / "ws"))
    assert out.returncode == 2 and not (tmp_path / "ws").exists()
    assert len(out.stderr.strip().splitlines()) == 1 and "trainer.init_from='nope'" in out.stderr


def test_dry_run_shows_the_order_and_the_sbatch_dependency(chain, tmp_path, cli):
    out = json.loads(cli("run", "chain", "--arm", "r2", "--dry-run", "--executor", "slurm", "--json",
                         "--workdir", str(tmp_path / "ws"), check=True).stdout)
    r1, r2 = out["runs"]
    assert r1["reason"] == "not in the registry; chain/r2/s0 starts from it"
    assert r2["reason"] == f"not in the registry; after {r1['run_id']}"
    assert [s["title"] for s in out["sbatch"]][0] == "sbatch script (1 run)"  # r1 first, then r2 after its job
    assert "#SBATCH --dependency=afterok:PARENT_JOB" in out["sbatch"][1]["script"]
    assert "#SBATCH --kill-on-invalid-dep=yes" in out["sbatch"][1]["script"]
    assert "dependency" not in out["sbatch"][0]["script"]


def test_the_dry_run_table_prints_run_ids_whole_and_never_cuts_them(chain, tmp_path, cli):
    """Piped, the table is plain lines: every run id and the run each waits for, whole (folded over lines, an
    id could not be copied or grepped)."""
    ids = [r["run_id"] for r in json.loads(cli("run", "chain", "--arm", "r2", "--dry-run", "--json", "--executor",
                                                "local", "--workdir", str(tmp_path / "ws"), check=True).stdout)["runs"]]
    out = cli("run", "chain", "--arm", "r2", "--dry-run", "--executor", "local", "--workdir", str(tmp_path / "ws"),
              check=True).stdout
    table = out[: out.index("\n" + "─")]  # the table, before the first config's rule: plain lines in a pipe
    rows = {line.split()[0]: line for line in table.splitlines()[3:]}
    assert "…" not in table and set(ids) <= set(rows), table
    assert rows[ids[1]].endswith(f"after {ids[0]}"), table


def _records(ws: Path) -> dict:
    with Registry(ws / "registry.sqlite") as reg:
        return {r.arm: r for r in reg.list()}


@pytest.mark.slow
def test_missing_then_satisfied_the_runs_go_in_order_and_each_starts_from_the_previous(chain, tmp_path, cli):
    ws = tmp_path / "ws"
    # missing: asking for r3 launches r1 and r2 first, on a queue of 3 slots; each waits for the previous
    out = json.loads(cli("run", "chain", "--arm", "r3", "--executor", "local", "--array-parallelism", "3",
                         "--workdir", str(ws), "--json", check=True).stdout)
    assert [(r["run_id"].split("_")[1], r["state"]) for r in out["submitted"]] == [
        ("r1", "COMPLETED"), ("r2", "COMPLETED"), ("r3", "COMPLETED")]
    recs = _records(ws)
    assert recs["r1"].ended_at <= recs["r2"].started_at and recs["r2"].ended_at <= recs["r3"].started_at
    space = Workspace(ws)
    for child, parent in (("r2", "r1"), ("r3", "r2")):
        init = json.loads((space.run_dir(recs[child].run_id) / "init.json").read_text())
        assert init == {"run_id": recs[parent].run_id, "step": 4}
    assert not (space.run_dir(recs["r1"].run_id) / "init.json").exists()
    # satisfied: a new round from a completed one starts at once; the completed ones are skipped
    (chain / "experiments" / "chain.yaml").write_text(
        CHAIN + "  r4: [algo=grpo, prior=base, optim.lr=4e-6, trainer.init_from=r3]\n")
    again = json.loads(cli("run", "chain", "--executor", "local", "--workdir", str(ws), "--json", check=True).stdout)
    assert [r["run_id"].split("_")[1] for r in again["submitted"]] == ["r4"]
    assert sorted(s["reason"] for s in again["skipped"]) == ["completed (use --force to rerun)"] * 3
    r4 = _records(ws)["r4"]
    assert json.loads((space.run_dir(r4.run_id) / "init.json").read_text())["run_id"] == recs["r3"].run_id
    status = cli("status", "chain", "--workdir", str(ws), check=True).stdout
    assert "4 run(s): 4 completed" in status


@pytest.mark.slow
def test_a_failed_run_fails_the_runs_that_start_from_it_without_starting_them(chain, tmp_path, cli):
    ws = tmp_path / "ws"
    out = cli("run", "chain", "--arm", "r3", "--executor", "local", "--workdir", str(ws),
              env={"ARCTL_TEST_FAIL_ARM": "r1"})
    assert out.returncode == 1
    recs = _records(ws)
    assert {a: r.state for a, r in recs.items()} == {"r1": "FAILED", "r2": "FAILED", "r3": "FAILED"}
    assert "fails on purpose" in recs["r1"].error
    assert recs["r2"].error == f"starts from run {recs['r1'].run_id}, which ended FAILED: `arctl run` again relaunches both"
    assert recs["r3"].error.startswith(f"starts from run {recs['r2'].run_id}, which ended FAILED")
    space = Workspace(ws)
    for arm in ("r2", "r3"):  # never started: no step, no job
        assert not (space.run_dir(recs[arm].run_id) / "steps.log").exists()
        assert read_status(space.run_dir(recs[arm].run_id))["state"] == "failed"
    # fixed, the same command resumes r1 and then runs r2 and r3 from it
    fixed = json.loads(cli("run", "chain", "--arm", "r3", "--executor", "local", "--workdir", str(ws), "--json",
                           check=True).stdout)
    assert [(r["action"], r["state"]) for r in fixed["submitted"]] == [("resume", "COMPLETED")] * 3


def test_a_run_whose_start_is_not_in_the_workspace_is_refused_at_resume(chain, tmp_path, cli):
    """`arctl resume` of a run whose run to start from is gone: one line, exit 2, nothing submitted."""
    ws = tmp_path / "ws"
    items = _items("chain", ["r2"])
    space = Workspace.open(str(ws))
    from arctl.launch.launcher import launch

    launch(items, space, executor="debug")
    recs = _records(ws)
    assert {a: r.state for a, r in recs.items()} == {"r1": "COMPLETED", "r2": "COMPLETED"}
    with Registry(space.registry_path) as reg:  # r2 failed later, and r1 was removed from the registry
        reg.update(recs["r2"].run_id, state="FAILED")
        with reg.transaction() as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (recs["r1"].run_id,))
    out = cli("resume", recs["r2"].run_id, "--workdir", str(ws))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert f"starts from run {recs['r1'].run_id}, which is not in this workspace" in out.stderr


def test_the_job_refuses_to_start_from_a_run_that_did_not_complete(chain, tmp_path):
    from arctl.launch.job import JobError, check_init_run

    parent = tmp_path / "runs" / "p"
    parent.mkdir(parents=True)
    (parent / "status.json").write_text(json.dumps({"state": "preempted", "updated_at": time.time()}))
    with pytest.raises(JobError, match="starts from run p, which is preempted"):
        check_init_run({"init_dir": str(parent)})
    (parent / "status.json").write_text(json.dumps({"state": "completed", "updated_at": time.time()}))
    check_init_run({"init_dir": str(parent)})


def test_plan_says_after_only_while_the_run_it_starts_from_is_not_done(chain, tmp_path):
    items = plan(_items("chain", ["r2"]), Workspace(tmp_path / "none"))
    assert items[1].reason.endswith(f"after {items[0].run_id}")


@pytest.mark.slow
def test_status_says_what_a_waiting_run_waits_for(chain, tmp_path, cli, waiter, monkeypatch):
    gate = tmp_path / "go"  # r1 waits before its first step until this exists: it runs while the status calls look
    monkeypatch.setenv("ARCTL_TEST_GATE", str(gate))
    ws = tmp_path / "ws"
    out = json.loads(cli("run", "chain", "--arm", "r2", "--executor", "local", "--no-wait", "--workdir", str(ws),
                         "--json", check=True).stdout)
    r1, r2 = (r["run_id"] for r in out["submitted"])

    def waiting():
        status = json.loads(cli("status", "chain", "--workdir", str(ws), "--json", check=True).stdout)
        by_id = {r["run_id"]: r for r in status}
        return by_id[r1]["state"] == "RUNNING" and by_id[r2]["state"] == "PENDING" and by_id[r2]["phase"]

    try:
        assert waiter(waiting, 60, "r1 running and r2 waiting") == f"waiting for {r1}"
        table = cli("status", "chain", "--workdir", str(ws), check=True).stdout
        assert f"waiting for {r1}" in table
    finally:
        gate.touch()
    waiter(lambda: {r.state for r in _records(ws).values()} == {"COMPLETED"}, 120, "both runs COMPLETED")
    assert _records(ws)["r2"].phase is None


def test_a_refused_waiting_run_is_left_as_it_was_not_waiting(chain, tmp_path, monkeypatch):
    """From a review: the launcher writes "waiting for <run>" (phase.json) just before it submits a run
    that waits for another; when sbatch then refused that run, the resumed run kept the phase, and
    `arctl status` showed a run no job would start as waiting. The refusal now puts phase.json back too."""
    import slurm_shims  # tests/support/slurm_shims.py

    from arctl.launch import states
    from arctl.launch.executors import LaunchError
    from arctl.launch.launcher import launch
    from arctl.launch.status_file import write_status
    from arctl.track.phase import read_phase, write_phase

    def sbatch(body: str) -> None:
        slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch=body, srun="exit 0\n",
                        scontrol="echo 'MaxArraySize            = 1001'\n")

    ws = Workspace(tmp_path / "ws")
    sbatch('echo "Submitted batch job 100"\n')
    launch(_items("chain", arms=["r2"]), ws, executor="slurm", members=["chain"])
    r1, r2 = (i.run_id for i in _items("chain", arms=["r2"]))
    assert read_phase(ws.run_dir(r2)) == f"waiting for {r1}"
    write_phase(ws.run_dir(r2), None)  # both jobs started, then failed
    with Registry(ws.registry_path) as reg:
        reg.update_many([(r, {"state": states.FAILED, "error": "node lost"}) for r in (r1, r2)])
    calls = tmp_path / "calls"
    sbatch(f'echo "$1" >> {calls}\nif [ "$(wc -l < {calls})" -eq 1 ]; then echo "Submitted batch job 101"; exit 0; fi\n'
           'echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; exit 1\n')
    with pytest.raises(LaunchError, match="QOSMaxSubmitJobPerUserLimit"):
        launch(_items("chain", arms=["r2"]), ws, executor="slurm", members=["chain"])
    assert read_phase(ws.run_dir(r2)) is None
    with Registry(ws.registry_path) as reg:
        assert (reg.get(r1).state, reg.get(r1).job_id) == (states.PENDING, "101")
        assert (reg.get(r2).state, reg.get(r2).error) == (states.FAILED, "node lost")
        reg.update_many([(r, {"state": states.COMPLETED, "error": None}) for r in (r1, r2)])
    for r in (r1, r2):  # both finished; a --force rerun of both, r2's refused: r2 is the finished run it was
        write_status(ws.run_dir(r), state="completed")
    calls.unlink()
    with pytest.raises(LaunchError, match="QOSMaxSubmitJobPerUserLimit"):
        launch(_items("chain", arms=["r1", "r2"]), ws, executor="slurm", force=True, members=["chain"])
    assert read_phase(ws.run_dir(r2)) is None and read_status(ws.run_dir(r2))["state"] == "completed"


def test_a_run_whose_start_another_launch_is_submitting_is_refused_not_made_to_wait_for_no_job(chain, tmp_path):
    """From a review of the launch layer: a run starting from one that another launch was still submitting
    (SUBMITTING, no job id of this attempt yet) was given `--dependency=afterok:None` (sbatch refuses it),
    or the previous attempt's job id (a dependency never satisfied). Now one line saying to launch it again
    once that run is PENDING; a parent this launch submits itself is waited for as before."""
    from arctl.launch.launcher import LaunchError, _waits
    from arctl.launch.registry import RunRecord, new_claim_token

    ws = tmp_path / "ws"
    r1, r2 = plan(_items("chain", ["r1", "r2"]), Workspace(ws))
    assert r2.after == r1.run_id
    space = Workspace.open(str(ws))
    with Registry(space.registry_path) as reg:
        reg.claim([RunRecord(run_id=i.run_id, experiment=i.experiment, arm=i.arm, seed=i.seed) for i in (r1,)],
                  new_claim_token())  # another launch's claim: SUBMITTING
        assert reg.get(r1.run_id).state == "SUBMITTING"
        with pytest.raises(LaunchError, match="another launch is submitting now"):
            _waits(reg, [r2], "slurm")
        assert set(_waits(reg, [r1, r2], "slurm")) == {r2.run_id}  # submitted by this launch: waited for


def test_force_reruns_the_run_asked_for_not_the_completed_run_it_starts_from(chain, tmp_path):
    """From a review of sweeps: `arctl run baselines-l1 --arm l1-max --force` reran L1-Exact too (brought
    along because L1-Max starts from it), retraining a completed run under the same id and overwriting
    the weights other runs and reports use. --force now applies to the runs asked for; a completed
    run brought along is kept, and the forced run starts from it."""
    from arctl.launch.launcher import launch

    ws = Workspace(tmp_path / "ws")
    launch(_items("chain", arms=["r2"]), ws, executor="debug")
    recs = _records(ws.root)
    assert {a: r.state for a, r in recs.items()} == {"r1": "COMPLETED", "r2": "COMPLETED"}
    planned = plan(_items("chain", arms=["r2"]), ws, force=True)
    assert [(i.action, i.reason.split(";")[0]) for i in planned] == [("skip", "completed"), ("rerun", "completed, --force")]
    result = launch(_items("chain", arms=["r2"]), ws, executor="debug", force=True)
    again = _records(ws.root)
    assert (again["r1"].generation, again["r1"].attempts) == (recs["r1"].generation, recs["r1"].attempts)  # kept
    assert again["r2"].generation == recs["r2"].generation + 1 and again["r2"].state == "COMPLETED"
    assert [(i.arm, why) for i, why in result.skipped] == [("r1", "completed")]
    forced_both = plan(_items("chain", arms=["r1", "r2"]), ws, force=True)  # both asked for: both rerun
    assert [i.action for i in forced_both] == ["rerun", "rerun"]


def test_the_dry_run_shows_what_the_launch_does_with_stale_states_and_running_parents(chain, tmp_path, monkeypatch):
    """From a review of sweeps: the dry run read the registry as last written: a run whose job had died
    was "already running" there, and the launch (which refreshes first) resubmitted it; and a run starting
    from one under way from an earlier launch got no --dependency in the preview, which the launch gives
    it (_waits). The dry run refreshes (read-only) and shows the dependency on that job."""
    import subprocess
    import sys

    import slurm_shims  # tests/support/slurm_shims.py

    from arctl.launch import states
    from arctl.launch.launcher import dry_run_scripts
    from arctl.launch.registry import new_claim_token

    ws = Workspace.open(str(tmp_path / "ws"))
    ws.root.mkdir(parents=True)
    r1, r2 = plan(_items("chain", ["r2"]), ws)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    with Registry(ws.registry_path) as reg:
        reg.claim([r1.record()], new_claim_token())
        reg.update_many([(r1.run_id, {"state": states.RUNNING, "executor": "local", "job_id": f"queue:{dead}",
                                      "claim": None, "before_claim": None})])
    got = plan(_items("chain", ["r2"]), ws)
    assert [(i.arm, i.action) for i in got] == [("r1", "resume"), ("r2", "new")]  # was ("r1", "active")
    with Registry(ws.registry_path) as reg:
        assert reg.get(r1.run_id).state == states.RUNNING  # a dry run writes nothing
        reg.update_many([(r1.run_id, {"executor": "slurm", "job_id": "4242", "submitted_at": time.time()})])
    slurm_shims.use(tmp_path / "bin", monkeypatch, squeue="printf '4242|RUNNING|None\\n'\n",
                    sacct="printf 'JobID|State\\n4242|RUNNING\\n'\n")
    got = plan(_items("chain", ["r2"]), ws)
    assert [(i.arm, i.action, i.job) for i in got] == [("r1", "active", "4242"), ("r2", "new", None)]
    (title, script), = dry_run_scripts([got[1]], ws, "slurm", None, {got[0].run_id: got[0].job})
    assert "#SBATCH --dependency=afterok:4242" in script and "job 4242, under way" in title
    with Registry(ws.registry_path) as reg:  # another launch is resubmitting it: 4242 is its previous attempt's
        reg.update_many([(r1.run_id, {"state": states.SUBMITTING, "claim": new_claim_token()})])
    assert [i.job for i in plan(_items("chain", ["r2"]), ws)] == [None, None]  # no dependency on an old job

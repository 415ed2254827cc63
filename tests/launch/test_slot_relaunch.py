"""The slots of ``cluster.array_parallelism`` (P) across launches and between a launch's Ray jobs and its arrays
(review r7, F1 and "mixed Ray and plain launches"). After sbatch refused part of a launch, the relaunch arctl
advises ("run the same command again") sent the runs that start from runs still under way with no slot
(``afterany``): beside the earlier launch's array, 4 jobs at once under P=2. And the arrays took no slot of the
Ray jobs submitted before them: R Ray jobs and an array at ``%P`` ran R+P at once. The jobs under way of the launch's
runs now come first in its slot chain (oldest first, an array holding min(its %p, its tasks under way) slots under
its id), and the arrays take their slots in it too."""

from __future__ import annotations

import json
import random
import re
import textwrap
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.compose import resolve_experiment
from arctl.launch import launcher, states
from arctl.launch.executors import LaunchError
from arctl.launch.registry import Registry, RunRecord
from arctl.launch.workspace import Workspace

# two plain arms and one that starts from the first, three seeds (the review's spec)
MIX = textwrap.dedent(
    """\
    description: two plain arms, one dependent
    seeds: [0, 1, 2]
    overrides: [trainer.total_steps=4, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      p: [algo=grpo, prior=base]
      q: [algo=grpo, prior=base, optim.lr=2e-6]
      r: [algo=grpo, prior=base, optim.lr=3e-6, trainer.init_from=p]
    """
)


# two plain arms, three seeds: one array (review r8's spec ``two``)
TWO = textwrap.dedent(
    """\
    description: two plain arms
    seeds: [0, 1, 2]
    overrides: [trainer.total_steps=4, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      p: [algo=grpo, prior=base]
      q: [algo=grpo, prior=base, optim.lr=2e-6]
    """
)


@pytest.fixture
def mix(specs) -> Path:
    (specs / "experiments" / "mix.yaml").write_text(MIX)
    return specs


@pytest.fixture
def two(specs) -> Path:
    (specs / "experiments" / "two.yaml").write_text(TWO)
    return specs


@pytest.fixture
def sbatch_shims(tmp_path, monkeypatch):
    """``sbatch_shims(refuse=None)``: SLURM's programs shimmed; sbatch answers jobs 5, 6, ... in turn and keeps
    each one's script as ``scripts/<job id>.sh`` (the folder returned), its ``refuse``-th submission (1-based)
    refused as a full QOS refuses it; no job is ever found by squeue, nor by sacct unless a test writes its answer
    (``JobID|State`` lines) into ``sacct.txt``. Each sacct call appends its arguments to ``sacct-calls``."""

    def use(refuse: int | None = None) -> Path:
        scripts, count = tmp_path / "scripts", tmp_path / "sbatch-calls"
        scripts.mkdir()
        refusal = (f'if [ "$n" = {4 + refuse} ]; then echo "sbatch: error: Batch job submission failed: Job violates '
                   'accounting/QOS policy (job submit limit, user\'s size and/or time limits)" >&2; exit 1; fi\n'
                   if refuse else "")
        slurm_shims.use(tmp_path / "bin", monkeypatch,
                        sbatch=(f'echo x >> {count}\nn=$((4 + $(wc -l < {count})))\n{refusal}'
                                f'cp "$1" {scripts}/$n.sh\necho "Submitted batch job $n"\n'),
                        scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                        squeue="exit 0\n", sacct=(f'echo "$*" >> {tmp_path}/sacct-calls\n'
                                                    f"[ -f {tmp_path}/sacct.txt ] && cat {tmp_path}/sacct.txt\nexit 0\n"),
                        srun="exit 0\n")
        return scripts

    return use


def _sbatch_lines(scripts: Path) -> dict[str, dict[str, str]]:
    """Job id -> the ``#SBATCH --KEY=VALUE`` lines of its script."""
    return {path.stem: dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", path.read_text(), re.M))
            for path in sorted(scripts.glob("*.sh"), key=lambda p: int(p.stem))}


def test_the_same_command_again_after_a_refused_sbatch_keeps_to_array_parallelism(mix, tmp_path, sbatch_shims, cli):
    """F1, end to end with shimmed sbatch (its third submission refused, as a full QOS refuses it): the launch of mix
    at P=2 sent the array of p and q (job 5) and r_s0 (job 6), not r_s1 and r_s2. The same command again sends them
    each with a slot, as the launch that went through in one piece does (``afterok:5_1,afterany:5``,
    ``afterok:5_2,afterany:6``): with the earlier array (2 at once) and job 6, never more than 2 at once. The dry
    run before it says so."""
    scripts = sbatch_shims(refuse=3)
    ws = tmp_path / "ws"
    runs = {f"{i.arm}{i.seed}": i.run_id for i in launcher.items_from_resolved(resolve_experiment("mix", []))}
    args = ("run", "mix", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    first = cli(*args)
    assert first.returncode != 0 and "run the same command again" in first.stderr, first.stderr
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"] and lines["5"]["array"] == "0-5%2", lines
    assert lines["6"]["dependency"] == "afterok:5_0,afterany:5"
    with Registry(Workspace(ws).registry_path) as reg:
        assert {f"{r.arm}{r.seed}": r.job_id for r in reg.list() if r.state == states.PENDING} == {
            "p0": "5_0", "p1": "5_1", "p2": "5_2", "q0": "5_3", "q1": "5_4", "q2": "5_5", "r0": "6"}

    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    assert [s["title"] for s in dry] == [
        f"sbatch script for {runs['r1']} (after the job of {runs['p1']}: job 5_1, under way; at most 2 at once: it "
        "waits for the end of job 5, under way (an array: all its tasks))",
        f"sbatch script for {runs['r2']} (after the job of {runs['p2']}: job 5_2, under way; at most 2 at once: it "
        f"waits for the end of {runs['r0']}'s job 6, under way)"]
    assert ["--dependency=afterok:5_1,afterany:5" in dry[0]["script"],
            "--dependency=afterok:5_2,afterany:6" in dry[1]["script"]] == [True, True]

    again = cli(*args, check=True)
    assert "2 run(s) submitted as SLURM jobs 8, 9" in again.stdout, again.stdout
    lines = _sbatch_lines(scripts)
    assert (lines["8"]["dependency"], lines["9"]["dependency"]) == ("afterok:5_1,afterany:5", "afterok:5_2,afterany:6")
    assert _most_at_once(_jobs_of(lines), random.Random(0)) <= 2


def test_the_retry_of_a_failed_source_never_waits_for_its_own_dependents_job(mix, tmp_path, sbatch_shims, cli):
    """Review r8, F1: after p_s1 (task 5_1) failed while r_s1, which starts from it, waits (afterok:5_1) in job 7,
    the same command again sent p_s1's retry with ``afterany:7``: job 7 cannot start before p_s1 has completed
    (under SLURM's defaults, never: its afterok failed), so the retry waited for ever. A run that starts from a run
    being launched holds no slot: the retry waits for nothing of its dependent's, in the launch and its dry run."""
    scripts = sbatch_shims()
    ws = tmp_path / "ws"
    runs = {f"{i.arm}{i.seed}": i.run_id for i in launcher.items_from_resolved(resolve_experiment("mix", []))}
    args = ("run", "mix", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert lines["5"]["array"] == "0-5%2" and lines["7"]["dependency"].startswith("afterok:5_1,"), lines
    with Registry(Workspace(ws).registry_path) as reg:
        reg.update(runs["p1"], state=states.FAILED)
        assert reg.get(runs["r1"]).job_id == "7" and reg.get(runs["r1"]).state == states.PENDING

    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    assert len(dry) == 1 and "afterany:7" not in dry[0]["script"], dry
    again = cli(*args, check=True)
    assert "1 run(s) submitted as SLURM job 9" in again.stdout, again.stdout
    assert "afterany:7" not in _sbatch_lines(scripts)["9"].get("dependency", ""), _sbatch_lines(scripts)["9"]


def _p2_of_array_5_failed(scripts: Path, ws: Path, spec: str, cli) -> dict[str, str]:
    """``spec`` launched at P=2 (its plain arms: array 5, ``%2``), then p_s1 (task 5_1) FAILED, p_s0 and p_s2
    RUNNING, the others as sent (PENDING): review r8's state. Returns the run ids (``p1``: arm p, seed 1)."""
    runs = {f"{i.arm}{i.seed}": i.run_id for i in launcher.items_from_resolved(resolve_experiment(spec, []))}
    cli("run", spec, "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws), check=True)
    assert _sbatch_lines(scripts)["5"]["array"] == "0-5%2", _sbatch_lines(scripts)
    with Registry(Workspace(ws).registry_path) as reg:
        assert reg.get(runs["p1"]).job_id == "5_1"
        reg.update(runs["p1"], state=states.FAILED)
        for run in ("p0", "p2"):
            reg.update(runs[run], state=states.RUNNING)
    return runs


@pytest.mark.parametrize("command", ["run", "resume"])
def test_a_failed_tasks_retry_takes_the_slot_of_the_arrays_last_task_under_way(two, tmp_path, sbatch_shims, cli,
                                                                               command):
    """Review r8, F3, end to end with shimmed sbatch: after task 5_1 of two's array (``--array=0-5%2``) failed, its
    retry (the same command again, or `arctl resume RUN`, which `status` advises) depends on the array's last task
    under way, 5_5 (``afterany:5_5``: under ``%2`` the tasks start in index order, so once 5_5 has ended at most
    one of them runs, and none starts again), not on the whole array (``afterany:5``: it always ended last, ~1 task
    length after the slot the array's last round left free), nor on nothing (resume: 3 at once under P=2). Over
    SLURM's rules from that state: never more than 2 at once, and never later than waiting for the whole array,
    sooner where 5_5 is not the array's last to end."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _p2_of_array_5_failed(scripts, ws, "two", cli)
    args = (*(("run", "two") if command == "run" else ("resume", runs["p1"])),
            "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"], lines

    under_way = ("5", [0, 2, 3, 4, 5], 2, "")  # what is left of the array
    sooner = 0
    for draw in range(10):
        most, ends = _schedule([under_way, ("6", 1, 1, lines["6"].get("dependency", ""))], random.Random(draw))
        _, whole = _schedule([under_way, ("6", 1, 1, "afterany:5")], random.Random(draw))
        assert most <= 2 and ends["6"] <= whole["6"], (draw, most, ends, whole, lines["6"])
        sooner += ends["6"] < whole["6"]
    assert sooner, f"the retry never ended sooner than after the whole array: {lines['6']}"
    assert lines["6"]["dependency"] == "afterany:5_5", lines
    assert [s["title"] for s in dry] == ["sbatch script (1 run; it starts once job 5_5, under way (array 5's last "
                                         "task: none of its tasks starts after it) has ended)"], dry
    assert "\n#SBATCH --dependency=afterany:5_5\n" in dry[0]["script"], dry[0]["script"]


@pytest.mark.parametrize("narrowed", [("--arm", "p", "--seeds", "1"), ("--arm", "p"), ("--seeds", "0,1"), ()],
                         ids=["arm-seed", "arm", "seeds", "resume"])
def test_a_narrowed_launch_counts_its_experiments_other_runs_under_way(two, tmp_path, sbatch_shims, cli, narrowed):
    """Review r9, F1: after task 5_1 of two's array (``--array=0-5%2``) failed, `arctl run two --arm p --seeds 1`
    (the failed run alone) counted none of the experiment's other runs under way and sent the retry with no
    dependency, beside the array's 2 tasks (3 at once under P=2, 4 for two retries); ``--arm p`` and ``--seeds 0,1``
    counted only their own items' tasks and waited for the whole array. Each now counts every run of the experiment
    under way, as `arctl resume RUN` does: it waits for the array's last task under way (5_5), in the dry run and
    the launch alike, and over SLURM's rules never more than 2 run at once."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _p2_of_array_5_failed(scripts, ws, "two", cli)
    args = (*(("run", "two", *narrowed) if narrowed else ("resume", runs["p1"])),
            "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"], lines
    assert lines["6"].get("dependency") == "afterany:5_5", lines["6"]
    assert [s for s in dry[0]["script"].splitlines() if "--dependency" in s] == ["#SBATCH --dependency=afterany:5_5"]
    for draw in range(10):
        most = _most_at_once([("5", [0, 2, 3, 4, 5], 2, ""), ("6", 1, 1, lines["6"]["dependency"])],
                             random.Random(draw))
        assert most <= 2, (draw, lines["6"])


# two's arms, then one's: a sweep, one array of 9 tasks (two's 5_0-5_5, one's 5_6-5_8)
ONE = TWO.replace("two plain arms", "one plain arm").replace("  p: [algo=grpo, prior=base]\n", "").replace("  q:", "  r:")


@pytest.fixture
def sweep2(two) -> Path:
    (two / "experiments" / "one.yaml").write_text(ONE)
    (two / "sweeps" / "sw2.yaml").write_text("description: two then one\nexperiments: [two, one]\n")
    return two


def _sweep_task_1_failed(scripts: Path, ws: Path, cli) -> dict[str, str]:
    """sw2 launched at P=2 (array 5, ``--array=0-8%2``), then two's p_s1 (task 5_1) FAILED, p_s0 and p_s2 RUNNING.
    Returns the run ids (``two/p1``: experiment two, arm p, seed 1)."""
    cli("sweep", "sw2", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws), check=True)
    assert _sbatch_lines(scripts)["5"]["array"] == "0-8%2", _sbatch_lines(scripts)
    with Registry(Workspace(ws).registry_path) as reg:
        runs = {f"{r.experiment}/{r.arm}{r.seed}": r.run_id for r in reg.list()}
        assert reg.get(runs["two/p1"]).job_id == "5_1" and reg.get(runs["one/r2"]).job_id == "5_8"
        reg.update(runs["two/p1"], state=states.FAILED)
        for run in ("two/p0", "two/p2"):
            reg.update(runs[run], state=states.RUNNING)
    return runs


@pytest.mark.parametrize("command", [("sweep", "sw2", "--seeds", "1"), ("resume", "two/p1")], ids=["sweep", "resume"])
def test_a_sweeps_narrowed_launch_counts_the_sweeps_other_runs_under_way(sweep2, tmp_path, sbatch_shims, cli,
                                                                         command):
    """Review r9, F1, for `arctl sweep`: after task 5_1 of sw2's array failed, `arctl sweep sw2 --seeds 1` counts
    every run of the sweep under way (not only its own items', which left it waiting for the whole array): its
    retry waits for the array's last task under way (5_8), as `arctl resume RUN` of it does."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _sweep_task_1_failed(scripts, ws, cli)
    args = (*(command if command[0] == "sweep" else ("resume", runs[command[1]])),
            "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"] and lines["6"].get("dependency") == "afterany:5_8", lines
    assert "\n#SBATCH --dependency=afterany:5_8\n" in dry[0]["script"], dry[0]["script"]
    for draw in range(10):
        most = _most_at_once([("5", [0, *range(2, 9)], 2, ""), ("6", 1, 1, lines["6"]["dependency"])],
                             random.Random(draw))
        assert most <= 2, (draw, lines["6"])


def _retry_of_two(scripts, ws, cli, tasks_left: list[int]):
    """`arctl run two` (dry run, then the launch) beside sw2's array 5 with ``tasks_left`` of it under way: the dry
    run's scripts and the sbatch lines sent, checked to be the array and the retry's job 6, never more than 2 at once
    over SLURM's rules (10 draws)."""
    args = ("run", "two", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"], lines
    for draw in range(10):
        most = _most_at_once([("5", tasks_left, 2, ""), ("6", 1, 1, lines["6"].get("dependency", ""))],
                             random.Random(draw))
        assert most <= 2, (draw, lines["6"])
    return dry, lines


def test_a_retry_beside_tasks_it_does_not_count_waits_for_the_whole_array(sweep2, tmp_path, sbatch_shims, cli):
    """The retry of task 5_1 by `arctl run two` (which counts its experiment's runs, not the sweep's) beside sw2's
    array waits for the whole array, as before: one's tasks 5_6-5_8, under way too, start after the last task it
    counts (5_5), so that one's end frees no slot (after 5_5, 5_8 may run beside 5_7: 3 at once)."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    _sweep_task_1_failed(scripts, ws, cli)
    dry, lines = _retry_of_two(scripts, ws, cli, [0, *range(2, 9)])
    assert lines["6"]["dependency"] == "afterany:5" and "\n#SBATCH --dependency=afterany:5\n" in dry[0]["script"]


def test_an_array_counted_at_all_holds_the_slots_of_all_its_tasks_under_way(sweep2, tmp_path, sbatch_shims, cli):
    """The re-read of the slot chain: `arctl run two` after `arctl sweep sw2` counted the tasks of sw2's array that
    are two's runs, not one's beside them. With two's q_s2 (5_5) its one task left under way and one's r_s0 (5_6)
    running, the array held 1 slot (min(%2, two's 1 task)), so the retry of p_s1 went out with no dependency and ran
    beside 5_5 and 5_6: 3 at once under P=2. An array counted at all is counted whole (min(its %p, all its tasks
    under way), whatever their experiment): the retry waits for the array, in the dry run and the launch, and over
    SLURM's rules never more than 2 run at once."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _sweep_task_1_failed(scripts, ws, cli)
    with Registry(Workspace(ws).registry_path) as reg:  # two's tasks ended but q_s2; one's r_s0 started
        for run in ("two/p0", "two/p2", "two/q0", "two/q1"):
            reg.update(runs[run], state=states.COMPLETED)
        for run in ("two/q2", "one/r0"):
            reg.update(runs[run], state=states.RUNNING)
    dry, lines = _retry_of_two(scripts, ws, cli, [5, 6, 7, 8])
    assert lines["6"].get("dependency") == "afterany:5", lines["6"]
    assert [s for s in dry[0]["script"].splitlines() if "--dependency" in s] == ["#SBATCH --dependency=afterany:5"]


def test_held_slots_count_an_arrays_tasks_of_other_runs_found_under_way(tmp_path):
    """An array holds min(its %p, all its tasks under way) slots: those of the runs counted and the others the caller
    found under way (``tasks``: another experiment's tasks of a sweep's array), not only the runs counted."""
    ws = Workspace(tmp_path / "ws")
    (ws.jobs_dir / "9").mkdir(parents=True)
    (ws.jobs_dir / "9" / "9_submission.sh").write_text("#!/bin/bash\n#SBATCH --array=0-8%3\n")
    run, pend = states.RUNNING, states.PENDING

    def held(tasks):
        return [(u.job, u.runs, u.slots, u.last) for u in launcher.held_slots({"a": "9_5"}, ws, tasks=tasks)]

    assert held({"9_5": run}) == [("9", 1, 1, "9_5")]
    assert held({"9_5": run, "9_6": run}) == [("9", 2, 2, None)]  # 9_6 not counted: all of the array frees a slot
    assert held({"9_5": run, "9_6": run, "9_7": pend, "9_8": pend}) == [("9", 4, 3, None)]  # at most its %3
    assert held({"9_5": run, "8_1": run}) == [("9", 1, 1, "9_5")]  # another array's task: not counted


def _sacct_calls(tmp_path: Path) -> int:
    calls = tmp_path / "sacct-calls"
    n = len(calls.read_text().splitlines()) if calls.exists() else 0
    calls.unlink(missing_ok=True)
    return n


@pytest.mark.parametrize(("command", "calls"), [(("run", "two"), [1, 2]),
                                               (("run", "two", "--arm", "p", "--seeds", "1"), [1, 1]),
                                               (("resume",), [1, 1])], ids=["run", "narrowed", "resume"])
def test_the_states_a_launch_or_its_dry_run_found_are_not_asked_again(two, tmp_path, sbatch_shims, cli, command, calls):
    """The re-read of the slot chain: a SLURM launch refreshed the runs it skipped as under way twice (before its
    claim, then again to find the states of the array tasks under way), and the dry run asked sacct again for the
    runs its plan had just found under way (it was handed their job ids only): `arctl run two` asked 2 and 3 times.
    Now the dry run asks once (its plan), the launch twice (its plan's read-only view before anything is written,
    its refresh before the claim; none after it); a narrowed launch or a resume, whose own run has ended, once (for
    the experiment's other runs). Each waits for what it waited for (``afterany:5_5``), the dry run's ``#SBATCH``
    lines those the launch sends."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _p2_of_array_5_failed(scripts, ws, "two", cli)
    args = (*(command if command[0] == "run" else ("resume", runs["p1"])),
            "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    _sacct_calls(tmp_path)
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    asked = [_sacct_calls(tmp_path)]
    cli(*args, check=True)
    asked.append(_sacct_calls(tmp_path))
    assert asked == calls, "sacct calls of the dry run, of the launch"
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"] and lines["6"].get("dependency") == "afterany:5_5", lines
    sent = (scripts / "6.sh").read_text()
    assert _own_lines(dry[0]["script"]) == _own_lines(sent), (dry[0]["script"], sent)


def _own_lines(script: str) -> list[str]:
    """A script's ``#SBATCH`` lines but the launch's own mechanics: ``--hold`` (it submits held, then releases the
    job once its run folders link it), submitit's ``--wckey``, and where the logs go."""
    return [line for line in script.splitlines() if line.startswith("#SBATCH")
            and not re.match(r"#SBATCH --(output|error|wckey)=|#SBATCH --hold$", line)]


def test_a_requeued_task_makes_the_retry_wait_for_the_whole_array(two, tmp_path, sbatch_shims, cli):
    """Review r9, F2: a requeued task (a preemption, submitit's requeue at the time limit) starts again after the
    array's highest index, so the retry waiting for the last task under way (``afterany:5_5``) ran beside it and the
    array's other task: 3 at once under P=2. Its mark (5_2 PENDING below 5_3 RUNNING) makes the retry wait for the
    whole array, in the dry run and the launch; over SLURM's rules, with 5_2 restarting last, never more than 2 at
    once, where waiting for 5_5 runs 3 at once in some draws."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _p2_of_array_5_failed(scripts, ws, "two", cli)
    with Registry(Workspace(ws).registry_path) as reg:  # p_s0 ended, p_s2 requeued, q_s0 started
        reg.update(runs["p0"], state=states.COMPLETED)
        reg.update(runs["p2"], state=states.PENDING)
        reg.update(runs["q0"], state=states.RUNNING)
    args = ("run", "two", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)["sbatch"]
    cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"] and lines["6"].get("dependency") == "afterany:5", lines
    assert "\n#SBATCH --dependency=afterany:5\n" in dry[0]["script"], dry[0]["script"]
    requeued = ("5", [3, 4, 5, 2], 2, "")  # 5_3 running, 5_2 restarting after 5_5
    overran = 0
    for draw in range(10):
        assert _most_at_once([requeued, ("6", 1, 1, lines["6"]["dependency"])], random.Random(draw)) <= 2, draw
        overran += _most_at_once([requeued, ("6", 1, 1, "afterany:5_5")], random.Random(draw)) > 2
    assert overran, "waiting for the last task never overran P: the simulation does not requeue"


@pytest.mark.parametrize("narrowed", [("run", "two", "--arm", "p", "--seeds", "1"), ("resume",)],
                         ids=["run", "resume"])
def test_the_dry_run_on_a_stale_registry_waits_for_what_the_launch_waits_for(two, tmp_path, sbatch_shims, cli,
                                                                             narrowed):
    """Review r9, F3: with no refresh since 5_0-5_2 ended (the registry has them PENDING; 5_3 and 5_4 running, 5_5
    pending), the dry run waited for the whole array (``afterany:5``: the tasks
    counted from a refreshed view, checked against the registry's stored rows), the launch for its last task under
    way (``afterany:5_5``). Both now count from the states found now."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = {f"{i.arm}{i.seed}": i.run_id for i in launcher.items_from_resolved(resolve_experiment("two", []))}
    cli("run", "two", "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws), check=True)
    with Registry(Workspace(ws).registry_path) as reg:  # as the last refresh left them
        for run in ("q0", "q1"):
            reg.update(runs[run], state=states.RUNNING)
    (tmp_path / "sacct.txt").write_text("JobID|State\n5_0|FAILED\n5_1|FAILED\n5_2|FAILED\n")  # ended since
    args = (*(narrowed if narrowed[0] == "run" else ("resume", runs["p1"])),
            "--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))
    dry = json.loads(cli(*args, "--dry-run", "--json", check=True).stdout)
    out = cli(*args, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6"] and lines["6"].get("dependency") == "afterany:5_5", (lines, out.stdout, dry)
    dry = dry["sbatch"]
    assert [s for s in dry[0]["script"].splitlines() if "--dependency" in s] == ["#SBATCH --dependency=afterany:5_5"]


def test_resume_counts_the_runs_under_way_that_the_same_run_command_counts(mix, tmp_path, sbatch_shims, cli):
    """Review r8, F3: `arctl resume RUN` holds the slots the jobs of its sweep's (experiment's) other runs under way
    hold, as `arctl run` of it does (its items): the resumed p_s1 of mix (task 5_1 failed) waits for what the same
    run command's retry waits for, in the dry run and the launch; and, as there, for nothing of r_s1's job 7, which
    waits for p_s1's (afterok: never starts before p_s1 has completed)."""
    scripts, ws = sbatch_shims(), tmp_path / "ws"
    runs = _p2_of_array_5_failed(scripts, ws, "mix", cli)
    assert sorted(_sbatch_lines(scripts)) == ["5", "6", "7", "8"]
    common = ("--executor", "slurm", "--array-parallelism", "2", "--workdir", str(ws))

    def dependencies(*args: str) -> list[str]:
        dry = json.loads(cli(*args, *common, "--dry-run", "--json", check=True).stdout)["sbatch"]
        return [line for s in dry for line in s["script"].splitlines() if line.startswith("#SBATCH --dependency=")]

    assert dependencies("resume", runs["p1"]) == dependencies("run", "mix") == ["#SBATCH --dependency=afterany:6"]
    cli("resume", runs["p1"], *common, check=True)
    lines = _sbatch_lines(scripts)
    assert sorted(lines) == ["5", "6", "7", "8", "9"] and lines["9"]["dependency"] == "afterany:6", lines


# --- the plan alone: its peak over SLURM's semantics, simulated --------------------------------------------------

def _most_at_once(jobs: list[tuple[str, int | list[int], int, str]], rnd: random.Random) -> int:
    """The most tasks at once when SLURM runs ``jobs`` (:func:`_schedule`)."""
    return _schedule(jobs, rnd)[0]


def _schedule(jobs: list[tuple[str, int | list[int], int, str]], rnd: random.Random) -> tuple[int, dict[str, int]]:
    """``(the most tasks at once, each task's end)`` when SLURM runs ``jobs`` ((job id, its tasks, its ``%p``, its
    ``--dependency``): an array's tasks ``ID_i``, of a count of tasks more than 1 or a list of the indices of the
    tasks still to run, started in index order (a list: in its order, a requeued task after the array's highest
    index, as SLURM restarts it); ``afterok:ID_i``/``afterany:ID_i`` waits for a task,
    ``afterok:ID``/``afterany:ID`` for all of a job's tasks) with task lengths drawn from ``rnd``, each started as
    soon as SLURM may. AssertionError where some never can (a dependency waits for ever)."""
    units: dict[str, dict] = {}
    for job, tasks, _at_once, dependency in jobs:
        needs = [j for dep in dependency.split(",") if dep for j in dep.split(":")[1:]]
        for i in tasks if isinstance(tasks, list) else range(tasks):
            name = f"{job}_{i}" if isinstance(tasks, list) or tasks > 1 else job
            units[name] = {"job": job, "needs": needs, "length": rnd.randint(1, 20)}
    throttle = {job: at_once for job, _, at_once, _ in jobs}

    def ended(name: str, done: set[str]) -> bool:
        of = [u for u, unit in units.items() if u == name or unit["job"] == name]
        assert of, f"a dependency on {name}, a job nobody submitted"
        return all(u in done for u in of)

    done: set[str] = set()
    running: dict[str, int] = {}
    ends: dict[str, int] = {}
    now, most = 0, 0
    while len(done) < len(units):
        for name, unit in units.items():
            if name in done or name in running or not all(ended(n, done) for n in unit["needs"]):
                continue
            if sum(units[r]["job"] == unit["job"] for r in running) < throttle[unit["job"]]:
                running[name] = now + unit["length"]
        most = max(most, len(running))
        assert running, f"never run: {sorted(set(units) - done)}"
        now = min(running.values())
        for name in [r for r, end in running.items() if end == now]:
            del running[name]
            done.add(name)
            ends[name] = now
    return most, ends


def _jobs_of(lines: dict[str, dict[str, str]]) -> list[tuple[str, int | list[int], int, str]]:
    """The jobs of :func:`_sbatch_lines` as :func:`_schedule` takes them."""
    return [(job, int(s["array"].split("-")[1].split("%")[0]) + 1 if "array" in s else 1,
             int(s["array"].split("%")[1]) if "array" in s else 1, s.get("dependency", "")) for job, s in lines.items()]


def _submitted(items, ws: Workspace, parallelism: int, first: int, job_ids: dict[str, str],
               under_way: dict[str, str], refuse_at: int | None = None) -> list[tuple[str, int, int, str]]:
    """What :func:`launcher._submit_slurm` sends for ``items`` (sbatch stubbed: ``_submit_chunk`` records each
    submission as job ``first``, ``first + 1``, ... and writes an array's script where the next launch reads its
    ``%p``); the submission ``refuse_at`` (0-based) refused, as a full queue refuses it. ``job_ids`` grows."""
    out: list[tuple[str, int, int, str]] = []

    def fake(params, chunk, workspace, ids):
        if len(out) == refuse_at:
            raise LaunchError("sbatch refused the job: QOSMaxSubmitJobPerUserLimit")
        job, at_once = str(first + len(out)), int(params["array_parallelism"])
        out.append((job, len(chunk), at_once, params.get("additional_parameters", {}).get("dependency", "")))
        if len(chunk) > 1:
            (workspace.jobs_dir / job).mkdir(parents=True, exist_ok=True)
            (workspace.jobs_dir / job / f"{job}_submission.sh").write_text(
                f"#!/bin/bash\n#SBATCH --array=0-{len(chunk) - 1}%{at_once}\n")
        ids.update({item.run_id: f"{job}_{i}" if len(chunk) > 1 else job for i, item in enumerate(chunk)})

    ours = {item.run_id for item in items}
    waits = {item.run_id: RunRecord(run_id=item.after, experiment="mix", arm="p", seed=0, state=states.PENDING,
                                    executor="slurm", job_id=job_ids.get(item.after))
             for item in items if item.after and (item.after in ours or item.after in under_way)}
    for item in items:
        ws.run_dir(item.run_id).mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(launcher, "_submit_chunk", fake)
        try:
            launcher._submit_slurm(items, ws, parallelism, job_ids, waits, under_way=under_way)
        except LaunchError:
            assert refuse_at is not None
    return out


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A shim scontrol with no array limit of its own (the conftest forgets the cached answer)."""
    slurm_shims.use(tmp_path / "bin", monkeypatch, scontrol="[ \"$1\" = show ] && echo 'MaxArraySize = 1001'\nexit 0\n")


@pytest.mark.parametrize("ray_arm", [None, "q"], ids=["plain", "q-ray"])
@pytest.mark.parametrize("max_array", [None, 1, 2])
@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_a_launch_refused_part_way_and_its_relaunch_keep_to_p_together(mix, site, tmp_path, monkeypatch, parallelism,
                                                                       max_array, ray_arm):
    """mix (p, q, r <- p, 3 seeds) submitted with sbatch refusing its k-th submission (every k, and none), then the
    runs not submitted launched again beside the jobs under way (their ``held_slots``), arm q a Ray job (verl) or
    not: over random task lengths (seeded), never more than P tasks at once, and every job runs."""
    if ray_arm:
        monkeypatch.setattr(launcher, "backend_job_setup",
                            lambda config, run_dir: "ray start" if f"_{ray_arm}_s" in str(run_dir) else None)
    overrides = [f"cluster.max_array_size={max_array}"] if max_array else []
    items = launcher.in_chain_order(launcher.items_from_resolved(resolve_experiment("mix", overrides)))
    ws = Workspace(tmp_path / "ws")
    whole = _submitted(items, ws, parallelism, 5, {}, {})
    for refuse_at in [*range(len(whole)), None]:
        ws = Workspace(tmp_path / f"ws{refuse_at}")
        job_ids: dict[str, str] = {}
        jobs = _submitted(items, ws, parallelism, 5, job_ids, {}, refuse_at)
        rest = [item for item in items if item.run_id not in job_ids]
        if rest:
            under_way = dict(job_ids)
            jobs += _submitted(rest, ws, parallelism, 100, job_ids, under_way)
        assert set(job_ids) == {item.run_id for item in items}
        for draw in range(6):
            most = _most_at_once(jobs, random.Random(draw))
            assert most <= parallelism, (refuse_at, draw, most, jobs)


@pytest.mark.parametrize("max_array", [None, 2])
@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_a_failed_runs_retry_beside_the_tasks_left_under_way_keeps_to_p_and_waits_less(two, site, tmp_path,
                                                                                      parallelism, max_array):
    """Review r8, F3, over the plan: two (p, q, 3 seeds) launched whole, then its run k failed while the runs before
    it (in the order submitted) have ended, for every k and every count of them (up to k), and its retry launched
    beside the tasks left under way (their ``held_slots``). Over random task lengths (seeded), SLURM's rules from
    that state: never more than P tasks at once, the retry never later than were it waiting for the whole array it
    was a task of, and with one array at ``%P`` (P > 1), sooner in some draws: it waits for the array's last task
    under way (``afterany:5_5``), not for all of them (``afterany:5``)."""
    overrides = [f"cluster.max_array_size={max_array}"] if max_array else []
    items = launcher.in_chain_order(launcher.items_from_resolved(resolve_experiment("two", overrides)))
    first_ids: dict[str, str] = {}
    first = _submitted(items, Workspace(tmp_path / "ws"), parallelism, 5, first_ids, {})
    sooner = 0
    for k, failed in enumerate(items):
        for ended in range(k + 1):
            ws, job_ids = Workspace(tmp_path / f"ws{k}-{ended}"), {}
            assert _submitted(items, ws, parallelism, 5, job_ids, {}) == first and job_ids == first_ids
            gone = {item.run_id for item in items[:ended]} | {failed.run_id}
            under_way = {run: job for run, job in job_ids.items() if run not in gone}
            [retry] = _submitted([failed], ws, parallelism, 100, job_ids, under_way)
            left = {job: [int(t.split("_")[1]) for t in under_way.values() if t.split("_")[0] == job]
                    for job, *_ in first}
            jobs = [(job, left[job], at_once,  # a dependency on what has ended: met
                     ",".join(d for d in dependency.split(",") if d and any(d.split(":")[1] in (j, f"{j}_{t}")
                                                                            for j in left for t in left[j])))
                    for job, _, at_once, dependency in first if left[job]]
            waited = [d.split(":")[1] for d in retry[3].split(",") if d]
            whole = (retry[0], 1, 1, ",".join(f"afterany:{job.split('_')[0]}" for job in waited))
            for draw in range(6):
                most, ends = _schedule([*jobs, retry], random.Random(draw))
                assert most <= parallelism, (k, ended, draw, most, jobs, retry)
                later = _schedule([*jobs, whole], random.Random(draw))[1][retry[0]]
                assert ends[retry[0]] <= later, (k, ended, draw, jobs, retry)
                sooner += ends[retry[0]] < later
    assert sooner or max_array or parallelism == 1, "the retry never ended sooner than after the whole array"


def test_held_slots_are_the_jobs_under_way_oldest_first_an_array_at_its_throttle(tmp_path):
    """An array under way holds min(its %p, its runs under way) slots under its id (its %p read from its script in
    jobs/; unreadable: its runs under way), a job of its own one; oldest first, 10 after 9."""
    ws = Workspace(tmp_path / "ws")
    (ws.jobs_dir / "9").mkdir(parents=True)
    (ws.jobs_dir / "9" / "9_submission.sh").write_text("#!/bin/bash\n#SBATCH --array=0-5%2\n#SBATCH --job-name=x\n")
    held = launcher.held_slots({"a": "10", "b": "9_3", "c": "9_1", "d": "9_4", "e": "11_0", "f": "11_1"}, ws)
    assert [(u.job, u.run, u.runs, u.slots, u.array, u.last) for u in held] == [
        ("9", "c", 3, 2, True, "9_4"), ("10", "a", 1, 1, False, None), ("11", "e", 2, 2, True, "11_1")]
    # the first of an array's slots is freed by its last task under way, the others by all its tasks
    assert [u.waited for u in held[0].units()] == ["9_4", "9"] and [u.waited for u in held[1].units()] == ["10"]


def test_an_arrays_last_task_is_waited_for_only_where_the_states_found_allow_it(tmp_path):
    """The states the caller found (``tasks``; nothing is read from the registry): the last task counted frees the
    first slot where no task of the array outside those counted is under way, and none counted is PENDING below
    one RUNNING (a requeue's mark, review r9 F2); else the whole array does."""
    ws = Workspace(tmp_path / "ws")
    run, pend = states.RUNNING, states.PENDING
    under_way = {"a": "9_2", "b": "9_3", "c": "9_4"}

    def last(tasks):
        return launcher.held_slots(under_way, ws, tasks=tasks)[0].last

    assert last(None) == last({"9_2": run, "9_3": run, "9_4": pend}) == "9_4"
    assert last({"9_2": pend, "9_3": run, "9_4": pend}) is None  # 9_2 requeued: it starts again after 9_4
    assert last({"9_2": run, "9_3": run, "9_4": pend, "9_5": pend}) is None  # 9_5 not counted: it starts after 9_4
    assert last({"9_2": run, "9_3": run, "9_4": pend, "8_7": pend}) == "9_4"  # another array's task


def test_an_array_task_and_its_array_master():
    """The one reading of a job id's shape (arctl.launch.job_ids) every count of the slot chain and the refresh use."""
    from arctl.launch.job_ids import array_master, is_array_task

    assert [array_master(j) for j in ("31_2", "31", "5_submission.sh")] == ["31", "31", "5"]
    assert [is_array_task(j) for j in ("31_2", "31", None, "")] == [True, False, False, False]

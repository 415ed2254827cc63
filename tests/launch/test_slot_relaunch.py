"""The slots of ``cluster.array_parallelism`` (P) across launches and between a launch's Ray jobs and its arrays
(review r7, F1 and "mixed Ray and plain launches"). After sbatch refused part of a launch, the relaunch arctl
advises ("run the same command again") sent the runs that start from runs still under way with no slot
(``afterany``): beside the earlier launch's array, 4 jobs at once under P=2. And the arrays took no slot of the
Ray jobs submitted before them: R Ray jobs and an array at ``%P`` ran R+P at once. The jobs under way of the launch's
runs now come first in its slot chain (oldest first, an array holding min(its %p, its runs under way) slots under
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


@pytest.fixture
def mix(specs) -> Path:
    (specs / "experiments" / "mix.yaml").write_text(MIX)
    return specs


def _sbatch_lines(scripts: Path) -> dict[str, dict[str, str]]:
    """Job id -> the ``#SBATCH --KEY=VALUE`` lines of its script."""
    return {path.stem: dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", path.read_text(), re.M))
            for path in sorted(scripts.glob("*.sh"), key=lambda p: int(p.stem))}


def test_the_same_command_again_after_a_refused_sbatch_keeps_to_array_parallelism(mix, tmp_path, monkeypatch, cli):
    """F1, end to end with shimmed sbatch (its third submission refused, as a full QOS refuses it): the launch of mix
    at P=2 sent the array of p and q (job 5) and r_s0 (job 6), not r_s1 and r_s2. The same command again sends them
    each with a slot, as the launch that went through in one piece does (``afterok:5_1,afterany:5``,
    ``afterok:5_2,afterany:6``): with the earlier array (2 at once) and job 6, never more than 2 at once. The dry
    run before it says so."""
    scripts, count = tmp_path / "scripts", tmp_path / "sbatch-calls"
    scripts.mkdir()
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo x >> {count}\nn=$((4 + $(wc -l < {count})))\n'
                            'if [ "$n" = 7 ]; then echo "sbatch: error: Batch job submission failed: Job violates '
                            'accounting/QOS policy (job submit limit, user\'s size and/or time limits)" >&2; exit 1; fi\n'
                            f'cp "$1" {scripts}/$n.sh\necho "Submitted batch job $n"\n'),
                    scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                    squeue="exit 0\n", sacct="exit 0\n", srun="exit 0\n")
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
    assert _most_at_once([(job, int(s["array"].split("-")[1].split("%")[0]) + 1 if "array" in s else 1,
                           int(s["array"].split("%")[1]) if "array" in s else 1,
                           s.get("dependency", "")) for job, s in lines.items()], random.Random(0)) <= 2


def test_the_retry_of_a_failed_source_never_waits_for_its_own_dependents_job(mix, tmp_path, monkeypatch, cli):
    """Review r8, F1: after p_s1 (task 5_1) failed while r_s1, which starts from it, waits (afterok:5_1) in job 7,
    the same command again sent p_s1's retry with ``afterany:7``: job 7 cannot start before p_s1 has completed
    (under SLURM's defaults, never: its afterok failed), so the retry waited for ever. A run that starts from a run
    being launched holds no slot: the retry waits for nothing of its dependent's, in the launch and its dry run."""
    scripts, count = tmp_path / "scripts", tmp_path / "sbatch-calls"
    scripts.mkdir()
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo x >> {count}\nn=$((4 + $(wc -l < {count})))\n'
                            f'cp "$1" {scripts}/$n.sh\necho "Submitted batch job $n"\n'),
                    scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                    squeue="exit 0\n", sacct="exit 0\n", srun="exit 0\n")
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


# --- the plan alone: its peak over SLURM's semantics, simulated --------------------------------------------------

def _most_at_once(jobs: list[tuple[str, int, int, str]], rnd: random.Random) -> int:
    """The most tasks at once when SLURM runs ``jobs`` ((job id, its tasks, its ``%p``, its ``--dependency``): an
    array's tasks ``ID_i``; ``afterok:ID_i`` waits for a task, ``afterok:ID``/``afterany:ID`` for all of a job's tasks)
    with task lengths drawn from ``rnd``, each started as soon as SLURM may. AssertionError where some never can
    (a dependency waits for ever)."""
    units: dict[str, dict] = {}
    for job, tasks, _at_once, dependency in jobs:
        needs = [j for dep in dependency.split(",") if dep for j in dep.split(":")[1:]]
        for i in range(tasks):
            units[f"{job}_{i}" if tasks > 1 else job] = {"job": job, "needs": needs, "length": rnd.randint(1, 20)}
    throttle = {job: at_once for job, _, at_once, _ in jobs}

    def ended(name: str, done: set[str]) -> bool:
        of = [u for u, unit in units.items() if u == name or unit["job"] == name]
        assert of, f"a dependency on {name}, a job nobody submitted"
        return all(u in done for u in of)

    done: set[str] = set()
    running: dict[str, int] = {}
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
    return most


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


def test_held_slots_are_the_jobs_under_way_oldest_first_an_array_at_its_throttle(tmp_path):
    """An array under way holds min(its %p, its runs under way) slots under its id (its %p read from its script in
    jobs/; unreadable: its runs under way), a job of its own one; oldest first, 10 after 9."""
    ws = Workspace(tmp_path / "ws")
    (ws.jobs_dir / "9").mkdir(parents=True)
    (ws.jobs_dir / "9" / "9_submission.sh").write_text("#!/bin/bash\n#SBATCH --array=0-5%2\n#SBATCH --job-name=x\n")
    held = launcher.held_slots({"a": "10", "b": "9_3", "c": "9_1", "d": "9_4", "e": "11_0", "f": "11_1"}, ws)
    assert [(u.job, u.run, u.runs, u.slots, u.array) for u in held] == [
        ("9", "c", 3, 2, True), ("10", "a", 1, 1, False), ("11", "e", 2, 2, True)]

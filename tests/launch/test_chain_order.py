"""The order and the slots of a SLURM launch's chained runs (``trainer.init_from``), against shimmed sbatch: each
run goes out after the run it starts from and waits for the job this launch submitted for it, whatever order the
runs were selected in; runs that start from another keep to ``cluster.array_parallelism`` with the arrays beside
them; the launch's summary names its jobs in numeric order (the "slurmchain" hunt: findings 1, 4 and 6)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.compose import resolve_experiment, resolve_sweep
from arctl.launch import states
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace

# a chain of three whose run ids sort dependent-first: x starts from y, y from z
CHAINREV = textwrap.dedent(
    """\
    description: three rounds, each from the previous one's final weights; the ids sort last round first
    seeds: [0]
    overrides: [trainer.total_steps=4, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1, cluster.time_min=10]
    arms:
      z: [algo=grpo, prior=base]
      y: [algo=grpo, prior=base, optim.lr=2e-6, trainer.init_from=z]
      x: [algo=grpo, prior=base, optim.lr=3e-6, trainer.init_from=y]
    """
)
CHAIN3 = CHAINREV.replace("x:", "c:").replace("y:", "b:").replace("z:", "a:").replace(
    "init_from=z", "init_from=a").replace("init_from=y", "init_from=b")


@pytest.fixture
def chains(specs) -> Path:
    (specs / "experiments" / "chainrev.yaml").write_text(CHAINREV)
    (specs / "experiments" / "chain3.yaml").write_text(CHAIN3)
    (specs / "sweeps" / "chainsw.yaml").write_text("description: chain3 x 3 seeds\nexperiments: [chain3]\n"
                                                   "seeds: [0, 1, 2]\n")
    return specs


@pytest.fixture
def sbatch(tmp_path, monkeypatch) -> Path:
    """sbatch accepts every submission as job 5, 6, 7, ... and keeps each script as ``<job>.sh`` in the folder it
    returns (the first ids one digit, the later two: a sort as text puts 10 before 8)."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    count = tmp_path / "sbatch-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch,
                    sbatch=(f'echo x >> {count}\nn=$((4 + $(wc -l < {count})))\ncp "$1" {scripts}/$n.sh\n'
                            'echo "Submitted batch job $n"\n'),
                    scontrol="[ \"$1\" = show ] && echo 'MaxArraySize            = 1001'\nexit 0\n",
                    squeue="exit 0\n", sacct="exit 0\n", srun="exit 0\n")
    return scripts


def _sbatch_lines(scripts: Path) -> dict[str, dict[str, str]]:
    """Job id -> the ``#SBATCH --KEY=VALUE`` lines of its script (array, dependency, job name...)."""
    out = {}
    for path in sorted(scripts.glob("*.sh"), key=lambda p: int(p.stem)):
        found = re.findall(r"^#SBATCH --([\w-]+)=(.*)$", path.read_text(), re.M)
        out[path.stem] = dict(found)
    return out


def _run_of(scripts: Path, job: str, ws: Workspace) -> str:
    """The run id job ``job`` (not an array) was submitted for: its run folder links the job."""
    return next(p.parent.parent.name for p in ws.runs_dir.glob(f"*/job/{job}"))


def test_resume_of_a_chain_whose_ids_sort_dependent_first_waits_for_each_sources_new_job(chains, tmp_path, sbatch, cli):
    """From the hunt (finding 1): `arctl resume` of a broken chain x <- y <- z submitted x first, with
    --dependency=afterok on y's previous job (never satisfied: SLURM cancelled x), or on no job at all where SLURM had
    forgotten it (x ran, and failed). Each run now goes out after the run it starts from, waiting for the job this
    launch submitted for it, and the dry run, the launch's lines and the summary say that order."""
    ws = Workspace(tmp_path / "ws")
    cli("run", "chainrev", "--executor", "slurm", "--workdir", str(ws.root), check=True)
    with Registry(ws.registry_path) as reg:
        recs = {r.arm: r for r in reg.list()}
        assert sorted(recs, key=lambda a: recs[a].run_id) == ["x", "y", "z"]  # the ids sort dependent-first
        assert {a: r.job_id for a, r in recs.items()} == {"z": "5", "y": "6", "x": "7"}
        # z preempted, y failed, x cancelled: the chain is broken
        reg.update_many([(r.run_id, {"state": states.FAILED, "error": "node lost"}) for r in recs.values()])
    x, y, z = (recs[a].run_id for a in "xyz")
    lines = _sbatch_lines(sbatch)
    assert (lines["6"]["dependency"], lines["7"]["dependency"]) == ("afterok:5", "afterok:6")

    dry = json.loads(cli("resume", "chainrev", "--workdir", str(ws.root), "--dry-run", "--json", check=True).stdout)
    assert [r["run_id"] for r in dry["runs"]] == [z, y, x]
    titles = [s["title"] for s in dry["sbatch"]]
    assert titles[0] == "sbatch script (1 run)" and "dependency" not in dry["sbatch"][0]["script"]
    assert titles[1].startswith(f"sbatch script for {y} (after the job of {z}: its job id replaces PARENT_JOB")
    assert titles[2].startswith(f"sbatch script for {x} (after the job of {y}: its job id replaces PARENT_JOB")

    out = cli("resume", x, y, z, "--workdir", str(ws.root), check=True).stdout  # the user's order: x first
    said = [line.split()[:2] + line.split()[-1:] for line in out.splitlines() if line.strip().startswith("resume")]
    assert said == [["resume", z, "8"], ["resume", y, "9"], ["resume", x, "10"]], out
    assert "3 run(s) submitted as SLURM jobs 8, 9, 10;" in out, out  # (finding 6: was "10, 8, 9")
    lines = _sbatch_lines(sbatch)
    assert [_run_of(sbatch, j, ws) for j in ("8", "9", "10")] == [z, y, x]
    assert "dependency" not in lines["8"]
    assert lines["9"]["dependency"] == "afterok:8" and lines["10"]["dependency"] == "afterok:9"  # the NEW jobs
    with Registry(ws.registry_path) as reg:
        assert {reg.get(r).job_id for r in (z, y, x)} == {"8", "9", "10"}


def test_a_launch_given_a_chain_dependent_first_submits_each_source_first(chains, tmp_path, sbatch):
    """The launcher itself, given the runs in any order (a resume's, the user's, a sweep's), submits each after the
    run it starts from; `arctl run` of the chain does the same."""
    items = items_from_resolved(resolve_experiment("chainrev", []))
    assert [i.arm for i in items] == ["z", "y", "x"]
    ws = Workspace(tmp_path / "ws")
    result = launch(list(reversed(items)), ws, executor="slurm")
    assert [i.arm for i in result.submitted] == ["z", "y", "x"]
    assert [result.job_ids[i.run_id] for i in items] == ["5", "6", "7"]
    lines = _sbatch_lines(sbatch)
    assert ("dependency" not in lines["5"], lines["6"]["dependency"], lines["7"]["dependency"]) == (
        True, "afterok:5", "afterok:6")


def test_a_run_submitted_before_the_source_it_waits_for_is_an_internal_error_not_its_old_job(chains, tmp_path, sbatch,
                                                                                              monkeypatch):
    """Where the source is one of the launch's runs, its previous job is never the one waited for: a plan that
    would submit a run first is an internal error (the launch is undone), not a dependency on an old job."""
    from arctl.launch import launcher
    from arctl.launch.executors import LaunchError

    items = items_from_resolved(resolve_experiment("chainrev", []))
    ws = Workspace(tmp_path / "ws")
    launch(items, ws, executor="slurm")
    with Registry(ws.registry_path) as reg:
        reg.update_many([(i.run_id, {"state": states.FAILED}) for i in items])
    # a broken plan: the runs that wait in the order of their ids (x before y)
    monkeypatch.setattr(launcher, "in_chain_order", lambda runs: sorted(runs, key=lambda i: i.run_id))
    z, y, x = (i.run_id for i in items)
    with pytest.raises(LaunchError, match=rf"internal error: {x} was to be submitted before {y}, the run it starts "
                                          r"from, had a job; submitted before it: 1 run\(s\) \(job\(s\) 8\)"):
        launch(items_from_resolved(resolve_experiment("chainrev", [])), ws, executor="slurm")
    assert "dependency" not in _sbatch_lines(sbatch)["8"] and not (tmp_path / "scripts" / "9.sh").exists()
    with Registry(ws.registry_path) as reg:  # y and x undone; z went out
        assert [reg.get(r).state for r in (z, y, x)] == [states.PENDING, states.FAILED, states.FAILED]


def _most_at_once(lines: dict[str, dict[str, str]]) -> tuple[int, bool]:
    """The most jobs (array tasks count one each) that can run at once, over every order in which SLURM could start
    and end them that their sbatch lines allow (``--array=0-N%P``, ``--dependency=afterok:J,afterany:K``: J, K a job,
    an array task ``J_i``, or an array's id, all its tasks), each ending as it may (a success: afterok holds); and
    whether every job can run (no dependency waits for ever)."""
    units: dict[str, tuple[str, list[str]]] = {}  # unit -> (its array or itself, the units it waits for)
    arrays: dict[str, int] = {}  # an array's job id -> its tasks at once
    for job, sbatch in lines.items():
        needs = [j for dep in sbatch.get("dependency", "").split(",") if dep for j in dep.split(":")[1:]]
        if "array" in sbatch:
            span, _, at_once = sbatch["array"].partition("%")
            arrays[job] = int(at_once) if at_once else 10**6
            last = int(span.split("-")[-1])
            units.update({f"{job}_{i}": (job, needs) for i in range(last + 1)})
        else:
            units[job] = (job, needs)
    names = sorted(units)

    def ended(state: dict, job: str) -> bool:
        parts = [u for u in names if u == job or u.startswith(f"{job}_")]
        assert parts, f"a dependency on {job}, no job of this launch"
        return all(state[u] == 2 for u in parts)

    seen: set[tuple] = set()
    most, done = 0, False
    todo = [tuple(0 for _ in names)]  # 0 pending, 1 running, 2 ended
    while todo:
        now = todo.pop()
        if now in seen:
            continue
        seen.add(now)
        state = dict(zip(names, now))
        most = max(most, sum(v == 1 for v in now))
        done = done or all(v == 2 for v in now)
        for k, unit in enumerate(names):
            if now[k] == 1:  # it ends
                todo.append(now[:k] + (2,) + now[k + 1:])
            elif now[k] == 0:
                array, needs = units[unit]
                if array in arrays and sum(state[u] == 1 for u in names if units[u][0] == array) >= arrays[array]:
                    continue
                if all(ended(state, j) for j in needs):
                    todo.append(now[:k] + (1,) + now[k + 1:])
    return most, done


def test_runs_that_start_from_another_keep_to_array_parallelism_beside_the_array(chains, tmp_path, sbatch, cli):
    """From the hunt (finding 4): a sweep of chain3 (a, b <- a, c <- b) over 3 seeds with
    cluster.array_parallelism=2 went out as the a's array (%2) and six b's and c's with afterok alone: 3 jobs ran at
    once. Now they take slots (afterany) in one chain with the array, which holds its slots until its tasks have
    ended, and no order SLURM may run them in has more than 2 at once."""
    items = items_from_resolved(resolve_sweep("chainsw", ["cluster.array_parallelism=2"]))
    assert len(items) == 9
    ws = Workspace(tmp_path / "ws")
    launch(items, ws, executor="slurm", members=["chainsw"])
    lines = _sbatch_lines(sbatch)
    assert len(lines) == 7 and lines["5"]["array"] == "0-2%2"
    assert _most_at_once(lines) == (2, True), lines
    by_run = {i.run_id: i for i in items}
    for job in map(str, range(6, 12)):  # each still waits for the job of the run it starts from
        source = by_run[_run_of(sbatch, job, ws)].after
        job_of_source = next(j for j in [*lines, *(f"5_{k}" for k in range(3))]
                             if (ws.run_dir(source) / "job" / j).is_symlink())
        assert f"afterok:{job_of_source}" in lines[job]["dependency"].split(","), (job, lines[job])
    assert lines["6"]["dependency"].endswith(",afterany:5")  # the array's slot, once all its tasks have ended
    # the arrays alone, or several arrays beside the runs that wait, keep to it too
    assert _most_at_once({"1": {"array": "0-4%2"}}) == (2, True)
    # the dry run shows the same slots
    dry = json.loads(cli("sweep", "chainsw", "cluster.array_parallelism=2", "--executor", "slurm", "--workdir",
                         str(tmp_path / "ws2"), "--dry-run", "--json", check=True).stdout)["sbatch"]
    slots = ["afterany:SLOT_JOB" in s["script"] for s in dry]
    assert slots == [False] + [True] * 6, [s["title"] for s in dry]
    assert "it waits for the end of the array of 3 runs, all its tasks, whose id replaces SLOT_JOB" in dry[1]["title"]
    first_b = next(i for i in items if i.arm == "b")
    assert f"it waits for the end of {first_b.run_id}'s job" in dry[3]["title"], dry[3]["title"]


def test_several_arrays_and_the_runs_that_wait_keep_to_the_bound_together(chains, tmp_path, sbatch):
    """The a's in arrays of one task (cluster.max_array_size=1: three arrays, P=2, the third after the first), and
    the b's and c's after them: at most 2 at once still."""
    items = items_from_resolved(resolve_sweep("chainsw", ["cluster.array_parallelism=2", "cluster.max_array_size=1"]))
    launch(items, Workspace(tmp_path / "ws"), executor="slurm", members=["chainsw"])
    lines = _sbatch_lines(sbatch)
    assert len(lines) == 9 and lines["7"]["dependency"] == "afterany:5"
    assert _most_at_once(lines) == (2, True), lines


def test_job_ids_sort_as_numbers():
    """Finding 6: the launch summary sorted its job ids as text ("10, 8, 9")."""
    from arctl.launch.launcher import job_id_order

    assert sorted(["10", "8", "9", "31_10", "31_2", "debug", "100"], key=job_id_order) == [
        "8", "9", "10", "31_2", "31_10", "100", "debug"]

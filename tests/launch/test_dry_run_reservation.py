"""What a launch's SLURM jobs ask of the cluster, said by its dry run before any GPU hour is spent: jobs, GPUs, CPUs,
the time limit and the GPU-hours every job would hold if it ran to its time limit (``--json``: ``reservation``).
Before, a paper sweep's preview printed 27 configs and sbatch scripts and never the 10,368 GPU-hours they reserve."""

from __future__ import annotations

import json

from arctl.launch.executors import MAX_REQUEUES, reservation, reservation_line


def _config(nodes: int, gpus: int, cpus: int, minutes: int) -> dict:
    return {"cluster": {"nodes": nodes, "gpus_per_node": gpus, "cpus_per_task": cpus, "time_min": minutes}}


def test_the_reservation_adds_every_jobs_nodes_gpus_and_time_limit():
    asked = reservation([_config(1, 8, 64, 2880), _config(2, 8, 32, 600), _config(1, 0, 4, 60)])
    # GPUs 8 + 16 + 0; CPUs 64 + 64 + 4; GPU-hours 8 x 48 + 16 x 10; CPU-hours 64 x 48 + 64 x 10 + 4 x 1
    assert asked == {"jobs": 3, "gpus": 24, "cpus": 132, "max_hours": 48.0, "gpu_hours": 544.0,
                     "cpu_hours": 3716.0, "requeues": MAX_REQUEUES}
    assert reservation([]) is None
    line = reservation_line(asked)
    assert line.startswith("asks SLURM for 3 job(s): 24 GPUs, 132 CPUs, each job for up to 48 h (cluster.time_min): "
                           "at most 544 GPU-hours if every job runs to its time limit"), line
    assert f"(up to {MAX_REQUEUES} times)" in line
    cpu_only = reservation_line(reservation([_config(1, 0, 1, 90)] * 3))
    assert "3 CPUs, no GPU, each job for up to 1.5 h" in cpu_only and "at most 4.5 CPU-hours" in cpu_only, cpu_only


def test_a_paper_runs_dry_run_says_the_gpu_hours_it_reserves(sandbox):
    """3 new verl runs of 2 nodes x 8 GPUs for 48 h: 48 GPUs, at most 2,304 GPU-hours (the SLURM programs are shims:
    nothing is asked of a real cluster)."""
    args = ["run", "main-grpo", "--scale", "paper", "--seeds", "0-2", "cluster=slurm", "cluster.nodes=2",
            "verl.rehearsal_steps=2", "--dry-run",
            "--workdir", str(sandbox.ws)]
    result = sandbox.run(*args, "--json")
    assert result.crash is None and result.code == 0, result.err + (result.crash or "")
    doc = json.loads(result.out)
    starting = [r for r in doc["runs"] if r["action"] == "new"]
    clusters = [r["config"]["cluster"] for r in starting]
    hours = sum(c["nodes"] * c["gpus_per_node"] * c["time_min"] / 60 for c in clusters)
    assert doc["reservation"]["jobs"] == len(starting) == 3 and doc["reservation"]["gpus"] == 48, doc["reservation"]
    assert doc["reservation"]["gpu_hours"] == hours == 2304, doc["reservation"]
    text = sandbox.run(*args)
    assert text.code == 0, text.err
    assert reservation_line(doc["reservation"]) in text.out.replace("\n", " "), text.out[-800:]
    local = sandbox.run("run", "main-grpo", "--scale", "tiny", "--executor", "local", "--dry-run", "--json",
                        "--workdir", str(sandbox.ws))
    assert json.loads(local.out)["reservation"] is None  # no SLURM job: nothing asked of a cluster


def test_a_cluster_without_requeues_is_said_to_end_at_its_time_limit():
    """From a review: the line said "requeued (up to 20 times)" where ``cluster.sbatch_extra`` has ``--no-requeue``
    (what the jobs are submitted with), and the time limit's default was the reservation's own (0 h, where the jobs
    ask for 60 minutes)."""
    no_requeue = {"cluster": {**_config(1, 8, 64, 600)["cluster"], "sbatch_extra": ["--no-requeue"]}}
    asked = reservation([no_requeue])
    assert asked["requeues"] == 0 and asked["gpu_hours"] == 80.0, asked
    line = reservation_line(asked)
    assert "requeued" not in line and line.endswith("a run still training then ends there "
                                                    "(cluster.sbatch_extra has --no-requeue)"), line
    assert reservation([no_requeue, _config(1, 8, 64, 600)])["requeues"] == MAX_REQUEUES  # one job that requeues
    unset = reservation([{"cluster": {"gpus_per_node": 1}}])
    assert unset["max_hours"] == 1.0 and unset["gpu_hours"] == 1.0, unset  # slurm_parameters' 60 minutes

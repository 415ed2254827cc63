"""The tiny backend trains on the CPU: a SLURM request for GPUs is refused before anything is written or submitted.

From a hunt: ``arctl run ablation-vr --scale tiny cluster=slurm --dry-run`` showed ``#SBATCH --gpus-per-node=8`` for
each array task and exited 0 without a word; the shipped ``slurm`` and ``slurm-a100`` profiles (and a site profile
copied from them for the paper scale) ask for 8 GPUs per run, which a tiny run never uses. Through the CLI, in-process,
with every SLURM command a shim that records its calls (``sandbox``: tests/support/bad_input.py)."""

from __future__ import annotations

import json

import pytest

TINY = ["--scale", "tiny"]


def _launch(sandbox, *args: str) -> list[str]:
    return [*args, "--workdir", str(sandbox.ws)]


@pytest.mark.parametrize("dry_run", [False, True], ids=["launch", "dry-run"])
@pytest.mark.parametrize("command, profile, gpus, nodes", [
    (["run", "ablation-vr"], ["cluster=slurm"], 8, 1),
    (["run", "ablation-vr"], ["cluster=slurm-a100"], 8, 1),
    (["sweep", "paper"], ["cluster=slurm"], 8, 1),
    (["run", "main-grpo"], ["--executor", "slurm", "cluster.gpus_per_node=2", "cluster.nodes=2"], 2, 2),
], ids=["slurm", "slurm-a100", "sweep", "two-nodes"])
def test_a_tiny_run_that_asks_slurm_for_gpus_is_refused_in_one_line(sandbox, command, profile, gpus, nodes, dry_run):
    err = sandbox.check_refused(*_launch(sandbox, *command, *TINY, *profile, *(["--dry-run"] if dry_run else []))).err
    assert "the tiny backend uses no GPU" in err, err
    assert f"cluster.gpus_per_node={gpus} would reserve {gpus * nodes} GPU(s) per run" in err, err
    # the way out is the tiny scale's own request, not a GPU profile with gpus_per_node=0 (its 64 CPUs, 512 GB, and
    # tiny.threads following its cpus: other runs; from a review)
    assert "submit it with the tiny scale's own request: --executor slurm, without a GPU cluster profile" in err, err
    assert "pass cluster=<profile>" not in err, err  # not the advice of a GPU run that asks for none
    # a profile with sbatch lines (slurm-a100: --exclusive) is told where else a GPU request may hide
    assert ("cluster.sbatch_extra" in err) == ("slurm-a100" in profile[0]), err


@pytest.mark.parametrize("flag, count", [
    ("--gres=gpu:a100:4", 4), ("--gpus=2", 2), ("--gpus-per-node=4", 4), ("--gpus-per-task=a100:4", 4), ("-G 2", 2),
])
@pytest.mark.parametrize("with_count", [False, True], ids=["gpus_per_node=0", "gpus_per_node=N"])
def test_a_gpu_request_in_sbatch_extra_is_refused_too(sandbox, flag, count, with_count):
    """One written in cluster.sbatch_extra: with cluster.gpus_per_node=0 the launch refuses a count that differs from
    it (arctl.launch.executors, the one reader of sbatch GPU options); with the same count, the tiny backend does."""
    gpus = count if with_count else 0
    err = sandbox.check_refused(*_launch(sandbox, "run", "main-grpo", *TINY, "cluster=slurm", "--dry-run",
                                         f"cluster.gpus_per_node={gpus}", f"cluster.sbatch_extra=['{flag}']")).err
    assert "cluster.sbatch_extra" in err, err
    if with_count:
        assert "the tiny backend uses no GPU" in err, err


def _dry_run_scripts(sandbox, *args: str) -> list[str]:
    result = sandbox.run(*_launch(sandbox, *args, "--dry-run", "--json"))
    assert result.crash is None and result.code == 0, result.err + (result.crash or "")
    return [s["script"] for s in json.loads(result.out)["sbatch"]]


def test_a_tiny_run_that_asks_slurm_for_no_gpu_still_plans(sandbox):
    scripts = _dry_run_scripts(sandbox, "run", "ablation-vr", *TINY, "cluster=slurm", "cluster.gpus_per_node=0")
    assert scripts and not any("--gpus" in s or "--gres" in s for s in scripts), scripts
    # a GRES that is no GPU is the site's business
    (script,) = _dry_run_scripts(sandbox, "run", "main-grpo", *TINY, "cluster=slurm", "cluster.gpus_per_node=0",
                                 "cluster.sbatch_extra=['--gres=nvme:1']")
    assert "#SBATCH --gres=nvme:1" in script and "--gpus" not in script


@pytest.mark.parametrize("executor", ["local", "debug"])
def test_the_local_and_debug_executors_request_no_gpu_so_they_ignore_it(sandbox, executor):
    result = sandbox.run(*_launch(sandbox, "run", "ablation-vr", *TINY, "cluster=slurm", "--executor", executor,
                                  "--dry-run"))
    assert result.crash is None and result.code == 0, result.err + (result.crash or "")
    assert "tiny backend uses no GPU" not in result.err + result.out


def test_a_verl_run_still_asks_slurm_for_its_gpus(sandbox):
    (script,) = _dry_run_scripts(sandbox, "run", "main-grpo", "--scale", "paper", "cluster=slurm",
                                 "verl.rehearsal_steps=2")
    assert "#SBATCH --gpus-per-node=8" in script

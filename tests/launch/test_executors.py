"""sbatch options from the cluster section, executor choice, and the rendered sbatch script."""

from __future__ import annotations

import os
import re
from fractions import Fraction

import pytest

from arctl.launch.executors import (
    JOB_RUNNER,
    JOB_RUNNER_LINES,
    LaunchError,
    available_memory_gb,
    choose_executor,
    local_parallelism,
    render_sbatch,
    shared_makespan,
    slurm_parameters,
    with_ray_setup,
)

CLUSTER = {
    "executor": "slurm", "partition": "gpu", "account": "proj", "qos": "high", "nodes": 2, "gpus_per_node": 8,
    "cpus_per_task": 96, "mem_gb": 900, "time_min": 2880, "constraint": "a100-80gb", "array_parallelism": 8,
    "max_array_size": 1000, "sbatch_extra": ["--exclusive", "#SBATCH --reservation=paper"],
    "setup": ["module load cuda/12.4"], "preempt_warning_s": 1800,
}


def test_slurm_parameters_carry_the_cluster_profile():
    params = slurm_parameters(CLUSTER, "priors sweep")
    assert params["partition"] == "gpu" and params["account"] == "proj" and params["qos"] == "high"
    assert params["nodes"] == 2 and params["gpus_per_node"] == 8 and params["cpus_per_task"] == 96
    assert params["mem"] == "900GB" and params["time"] == 2880 and params["constraint"] == "a100-80gb"
    assert params["job_name"] == "priors-sweep"
    assert params["additional_parameters"] == {"exclusive": True, "reservation": "paper", "signal": "USR1@1800",
                                              "requeue": True}
    assert params["setup"] == ["export SUBMITIT_PREEMPT_SIGNAL=USR1", "module load cuda/12.4"]


def test_the_preemption_warning_is_the_cluster_setting_within_the_time_limit():
    from arctl.launch.executors import warning_seconds

    assert warning_seconds(CLUSTER) == 1800
    assert warning_seconds({**CLUSTER, "preempt_warning_s": 90000, "time_min": 3000}) == 65535  # sbatch's maximum
    assert warning_seconds({**CLUSTER, "preempt_warning_s": 700, "time_min": 10}) == 599  # always before the limit
    assert slurm_parameters({**CLUSTER, "preempt_warning_s": 300}, "x")["additional_parameters"]["signal"] == "USR1@300"


@pytest.mark.parametrize("entry, use", [
    ("--array=0-3", "cluster.array_parallelism"), ("--output=/x", "`arctl logs`"), ("--wrap=hostname", "a script"),
    ("--time=10", "cluster.time_min"), ("-t 10", "cluster.time_min"), ("#SBATCH --signal=B:USR2@30", "preempt_warning_s"),
    ("--job-name=x", "names each job"), ("--dependency=afterok:1", "chains"), ("-J x", "names each job"),
    # from a hunt: these replaced arctl's line while the job body kept its own count (Ray on one node of two)
    ("--nodes=3", "cluster.nodes"), ("-N 3", "cluster.nodes"), ("-c 16", "cluster.cpus_per_task"),
    ("--cpus-per-task=16", "cluster.cpus_per_task"), ("--ntasks-per-node=8", "one task per node"),
    ("--ntasks=2", "one task per node"),
])
def test_an_sbatch_extra_option_arctl_sets_itself_is_refused_with_the_key_that_sets_it(entry, use):
    """From a review: `--time=10` replaced cluster.time_min (the preemption warning is placed before that),
    `--output` the logs `arctl logs` reads, `--array` made an array of a single job, `--signal` was dropped;
    all passed and failed (or misbehaved) only on the cluster."""
    with pytest.raises(LaunchError, match=f"sets what arctl sets itself — .*{re.escape(use)}"):
        slurm_parameters({**CLUSTER, "sbatch_extra": [entry]}, "x")
    # resources replace arctl's line, as a user may need: typed GPUs, a non-GPU gres, the whole node's memory
    allowed = ["--exclusive", "--mail-type=END", "--gres=nvme:1", "--gpus-per-node=a100:8", "--mem=0", "-p gpu"]
    extra = slurm_parameters({**CLUSTER, "sbatch_extra": allowed}, "x")["additional_parameters"]
    assert {k: extra[k] for k in ("gres", "gpus_per_node", "mem", "partition")} == {
        "gres": "nvme:1", "gpus_per_node": "a100:8", "mem": "0", "partition": "gpu"}


@pytest.mark.parametrize("entry, gpus, nodes, says", [
    ("--gpus-per-node=a100:4", 8, 2, "asks SLURM for 4 GPU(s) per node, but cluster.gpus_per_node=8"),
    ("--gres=gpu:a100:4", 8, 1, "asks SLURM for 4 GPU(s) per node, but cluster.gpus_per_node=8"),
    ("--gres=gpu:2,nvme:1", 8, 1, "asks SLURM for 2 GPU(s) per node"),
    ("--gpus=8", 8, 2, "asks SLURM for 8 GPU(s) in all (4 per node of 2), but cluster.gpus_per_node=8"),
    ("--gpus-per-node=a100:8", 0, 1, "asks SLURM for 8 GPU(s) per node, but cluster.gpus_per_node=0"),
    ("-G 16", 4, 2, "asks SLURM for 16 GPU(s) in all (8 per node of 2), but cluster.gpus_per_node=4"),
])
def test_an_sbatch_extra_gpu_request_other_than_the_clusters_count_is_refused(entry, gpus, nodes, says):
    """From a hunt: `--gpus-per-node=a100:4` beside the default 8 replaced arctl's line, while the job's Ray
    (`--num-gpus=8`) and verl (`trainer.n_gpus_per_node=8`) kept 8: Ray refuses more GPUs than it sees, after
    the job had queued for them; `a100:8` beside 4 billed 8 GPUs and used 4."""
    with pytest.raises(LaunchError, match=re.escape(says) + ".*set cluster.gpus_per_node to the same number"):
        slurm_parameters({**CLUSTER, "gpus_per_node": gpus, "nodes": nodes, "sbatch_extra": [entry]}, "x")


@pytest.mark.parametrize("entry, gpus, nodes", [
    ("--gpus-per-node=a100:8", 8, 2), ("--gres=gpu:a100:8", 8, 2), ("--gres=gpu:4(S:0-1),nvme:1", 4, 1),
    ("--gres=gpu", 1, 1), ("--gpus=a100:16", 8, 2), ("--gpus-per-task=h100:8", 8, 1)])
def test_an_sbatch_extra_gpu_request_of_the_clusters_count_is_the_scripts_only_gpu_line(entry, gpus, nodes, tmp_path):
    """A typed or GRES request replaces arctl's `--gpus-per-node` line: SLURM refuses `--gres=gpu` beside
    `--gpus-per-node` (mutually exclusive), and two requests would each have to be right."""
    params = slurm_parameters({**CLUSTER, "gpus_per_node": gpus, "nodes": nodes, "sbatch_extra": [entry]}, "x")
    lines = render_sbatch(params, tmp_path / "%j", 1).splitlines()
    gpu_lines = [line.replace("'", "") for line in lines if re.match(r"#SBATCH --(gpus|gres)", line)]  # unquoted
    assert gpu_lines == [f"#SBATCH {entry}"], gpu_lines
    # without one, arctl's own line; a GRES without a GPU keeps it
    for extra in ([], ["--gres=nvme:1"]):
        lines = render_sbatch(slurm_parameters({**CLUSTER, "gpus_per_node": gpus, "nodes": nodes, "sbatch_extra": extra},
                                               "x"), tmp_path / "%j", 1).splitlines()
        assert f"#SBATCH --gpus-per-node={gpus}" in lines


def test_bad_sbatch_extra_is_one_clear_error():
    with pytest.raises(LaunchError, match="sbatch_extra"):
        slurm_parameters({**CLUSTER, "sbatch_extra": ["exclusive; rm -rf /"]}, "x")


@pytest.mark.parametrize("key", ["partition", "account", "qos", "constraint"])
def test_an_option_with_a_line_break_cannot_add_script_lines(key, tmp_path):
    evil = f"gpu\ntouch {tmp_path}/PWNED"
    with pytest.raises(LaunchError, match=f"cluster.{key}.*line break"):
        slurm_parameters({**CLUSTER, key: evil}, "x")
    with pytest.raises(LaunchError, match="line break"):
        slurm_parameters({**CLUSTER, "sbatch_extra": ["--comment=a\nrm -rf /"]}, "x")


def test_option_values_with_shell_characters_are_quoted(tmp_path):
    params = slurm_parameters({**CLUSTER, "constraint": "a100&$(touch x)", "sbatch_extra": ["--comment=\"a; b 'c'\""]}, "x")
    script = render_sbatch(params, tmp_path / "%j", 1)
    assert "#SBATCH --constraint='a100&$(touch x)'" in script
    assert "#SBATCH --comment='a; b '\"'\"'c'\"'\"''" in script


def test_sbatch_script_is_one_array_with_parallelism(tmp_path):
    params = slurm_parameters({**CLUSTER, "gpus_per_node": 0, "nodes": 1}, "lt3", array_parallelism=2)
    script = render_sbatch(params, tmp_path / "%j", 3)
    lines = script.splitlines()
    assert "#SBATCH --array=0-2%2" in lines
    assert "#SBATCH --signal=USR1@1800" in lines and "#SBATCH --exclusive" in lines
    assert "#SBATCH --partition=gpu" in lines and "#SBATCH --account=proj" in lines
    assert not any("gpus-per-node" in line for line in lines)
    assert lines.index("module load cuda/12.4") < next(i for i, line in enumerate(lines) if line.startswith("srun "))


def test_jobs_are_submitted_requeueable_unless_the_profile_says_otherwise(tmp_path):
    """From a review of the GPU path: submitit requeues a job after SLURM's warning with `scontrol requeue`,
    which a site whose slurm.conf has JobRequeue=0 refuses for a job not submitted with --requeue: the run
    would have checkpointed and then ended at its time limit instead of going on."""
    lines = render_sbatch(slurm_parameters(CLUSTER, "x"), tmp_path / "%j", 1).splitlines()
    assert "#SBATCH --requeue" in lines
    lines = render_sbatch(slurm_parameters({**CLUSTER, "sbatch_extra": ["--no-requeue"]}, "x"), tmp_path / "%j",
                          1).splitlines()
    assert "#SBATCH --no-requeue" in lines and "#SBATCH --requeue" not in lines


def test_ray_setup_runs_the_script_then_our_job_as_the_batch_shell(tmp_path):
    ray = "\n".join([
        "#!/bin/bash",
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
        'srun --nodes=1 -w "${nodes[0]}" \\',
        "  python -m ray.scripts.scripts start --head --block &",
    ])
    params = with_ray_setup(slurm_parameters(CLUSTER, "r1"), ray)
    script = render_sbatch(params, tmp_path / "%j", 1)
    assert 'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))' in script and "#!/bin/bash\nnodes" not in script
    assert 'srun --nodes=1 -w "${nodes[0]}" \\\n  python -m ray.scripts.scripts start --head --block &' in script
    last = script.strip().splitlines()[-1]
    # no srun: the job entry is a child of the batch shell, through the runner function defined in the setup
    assert last.startswith(f"{JOB_RUNNER} ") and "-m submitit.core._submit" in last
    assert script.index(f"{JOB_RUNNER}() {{") < script.index("# command")
    assert "#SBATCH --signal=B:USR1@1800" in script
    assert script.index("ray.scripts.scripts start") < script.index("submitit.core._submit")


def test_the_verl_backends_ray_body_plugs_in(tmp_path, monkeypatch):
    ray_job = pytest.importorskip("arctl.backends.verl.ray_job")
    from arctl.compose import resolve_experiment
    from arctl.launch.executors import backend_job_setup

    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    (run,) = resolve_experiment("ablation-vr", ["cluster=slurm-a100", "cluster.nodes=2"], scale="paper", arms=["grpo"])
    body = backend_job_setup(run.config, tmp_path / "run")
    assert body == ray_job.job_setup(run.config, tmp_path / "run")
    # the standalone body is the setup, then the trainer on the head node
    whole = ray_job.job_script(run.config, tmp_path / "run")
    assert whole.startswith(body) and whole[len(body):].strip().endswith(f"-m arctl.backends.verl.trainer {tmp_path / 'run'}")
    script = render_sbatch(with_ray_setup(slurm_parameters(run.config["cluster"], "ablation-vr"), body), tmp_path / "%j", 1)
    assert 'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))' in script
    assert "#SBATCH --nodes=2" in script and "#SBATCH --gpus-per-node=8" in script
    assert "-m arctl.backends.verl.trainer" not in script  # our job entry runs the trainer instead
    assert script.strip().splitlines()[-1].startswith(f"{JOB_RUNNER} ")
    # one node: the same body (a Ray head sized to the allocation, no workers)
    single = {**run.config, "cluster": {**run.config["cluster"], "nodes": 1}}
    assert backend_job_setup(single, tmp_path / "run") == ray_job.job_setup(single, tmp_path / "run")
    assert backend_job_setup({**single, "backend": "tiny"}, tmp_path / "run") is None


def test_the_job_runner_passes_signals_on_and_the_exit_trap_runs_after_the_job(tmp_path):
    """The batch shell of a Ray job: USR1/TERM reach the job entry, then the EXIT trap (stop Ray) runs."""
    import shutil
    import signal
    import subprocess
    import time

    log = tmp_path / "log"
    child = tmp_path / "child.sh"
    # the "job entry": records the signals it gets, exits 3 after TERM
    child.write_text(
        f"trap 'echo child-usr1 >> {log}' USR1\n"
        f"trap 'echo child-term >> {log}; exit 3' TERM\n"
        f"echo child-started >> {log}\n"
        "while :; do sleep 0.05; done\n"
    )
    script = "\n".join([
        "set -euo pipefail",
        f"trap 'echo exit-trap rc=$? >> {log}' EXIT",
        *JOB_RUNNER_LINES,
        f"{JOB_RUNNER} bash {child}",
        f"echo not-reached >> {log}",
    ])
    shell = subprocess.Popen([shutil.which("bash"), "-c", script])

    def lines():
        return log.read_text().split("\n")[:-1] if log.exists() else []

    def wait_for(text):
        end = time.monotonic() + 20
        while text not in lines() and time.monotonic() < end:
            time.sleep(0.05)
        assert text in lines(), lines()

    wait_for("child-started")
    shell.send_signal(signal.SIGUSR1)  # SLURM's B:USR1 before the time limit goes to the batch shell
    wait_for("child-usr1")
    assert shell.poll() is None  # the job goes on (submitit checkpoints and requeues from there)
    shell.send_signal(signal.SIGTERM)
    assert shell.wait(timeout=20) == 3  # the job's exit code
    assert lines() == ["child-started", "child-usr1", "child-term", "exit-trap rc=3"]


def test_choose_executor(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    assert choose_executor(None, "auto")[0] == "local"
    assert choose_executor("debug", "slurm")[0] == "debug"
    with pytest.raises(LaunchError, match="sbatch"):
        choose_executor("slurm", None)
    with pytest.raises(LaunchError, match="unknown executor"):
        choose_executor("kubernetes", None)
    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))  # configless: trust sbatch
    name, note = choose_executor(None, "auto")
    assert name == "slurm" and "sbatch" in note


def test_auto_falls_back_to_local_when_the_controller_of_slurm_conf_is_down(monkeypatch, tmp_path):
    import socket

    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with socket.socket() as listener:  # a port that answers ...
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        conf = tmp_path / "slurm.conf"
        conf.write_text(f"ClusterName=x\nSlurmctldHost=head(127.0.0.1)\nSlurmctldPort={port}\n")
        monkeypatch.setenv("SLURM_CONF", str(conf))
        assert choose_executor(None, "auto")[0] == "slurm"
    name, note = choose_executor(None, "auto")  # ... and the same port, closed
    assert name == "local" and "no SLURM controller answers" in note


def test_local_parallelism_fits_the_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("arctl.launch.executors.available_memory_gb", lambda: 7.9)  # room for one 4 GB run
    assert local_parallelism({"cpus_per_task": 2, "array_parallelism": 64}, 3) == 1
    assert local_parallelism({"cpus_per_task": 1, "array_parallelism": 64, "mem_gb": 4}, 3) == 2
    assert local_parallelism({"cpus_per_task": 2, "array_parallelism": 64}, 3, requested=3) == 3
    assert local_parallelism({"cpus_per_task": 1, "array_parallelism": 64, "mem_gb": 4}, 1) == 1


def test_one_thread_runs_share_the_cores_where_the_last_ends_sooner_and_the_memory_holds_them(monkeypatch):
    """3 runs on 2 cores: side by side each gets 2/3 of a core and all end at 1.5 run-lengths; two at
    a time the third runs alone after them, to 2 (measured: 253 s against 319 s, docs/benchmarks.md)."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    memory = {"gb": 64.0}
    monkeypatch.setattr("arctl.launch.executors.available_memory_gb", lambda: memory["gb"])
    one = {"cpus_per_task": 1, "array_parallelism": 64, "mem_gb": 4}
    # by hand: ceil(n/p) rounds of max(1, p/2) run-lengths, the fewest runs at once among the shortest
    assert shared_makespan(3, 2, 2) == 2 and shared_makespan(3, 3, 2) == Fraction(3, 2)
    assert shared_makespan(27, 2, 2) == 14 and shared_makespan(27, 3, 2) == Fraction(27, 2)
    # a last round of fewer runs is shorter: 5 = 3 + 2 runs, 1.5 + 1
    assert shared_makespan(5, 3, 2) == Fraction(5, 2) and shared_makespan(27, 4, 2) == Fraction(27, 2)
    expected = {1: 1, 2: 2, 3: 3, 4: 2, 5: 3, 6: 2, 8: 2, 9: 3, 27: 3, 30: 2}
    assert {n: local_parallelism(one, n) for n in expected} == expected
    memory["gb"] = 11.9  # two 4 GB runs fit, not three: the cores' two, as before
    assert local_parallelism(one, 3) == 2
    memory["gb"] = 12.1
    assert local_parallelism(one, 3) == 3 and local_parallelism({**one, "mem_gb": 8}, 3) == 2
    assert local_parallelism(one, 5) == 3  # room for 3: 2.5 run-lengths, not 3 two at a time
    assert local_parallelism({k: v for k, v in one.items() if k != "mem_gb"}, 3) == 2  # no memory said: the cores
    assert local_parallelism({**one, "array_parallelism": 2}, 3) == 2  # the profile's bound holds
    assert local_parallelism({**one, "cpus_per_task": 2}, 3) == 1  # several threads a run: never more than fit
    assert local_parallelism(one, 3, requested=2) == 2
    memory["gb"] = 0.0  # unknown: the cores' count
    assert local_parallelism(one, 3) == 2


def test_available_memory_is_read_from_the_machine():
    gb = available_memory_gb()
    assert 0 < gb < 2**20  # a real number of GiB on any machine the tests run on


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_cgroup_memory_limit_bounds_the_available_memory(tmp_path, version):
    """From a review: in a container (docker --memory=8g on a 64 GB host) MemAvailable is the host's, and
    three 4 GB runs would start where two fit. The process's own cgroup's limit minus its use bounds it."""
    from arctl.launch.executors import _cgroup_room_gb

    if version == "v2":
        membership = "0::/job/1\n"
        folder, limit, used = tmp_path / "job" / "1", "memory.max", "memory.current"
    else:
        membership = "5:cpu:/\n4:memory:/job/1\n0::/\n"
        folder, limit, used = tmp_path / "memory" / "job" / "1", "memory.limit_in_bytes", "memory.usage_in_bytes"
    (tmp_path / "cgroup").write_text(membership)
    folder.mkdir(parents=True)
    (folder / limit).write_text(f"{8 * 2**30}\n")
    (folder / used).write_text(f"{2**30}\n")
    assert _cgroup_room_gb(tmp_path, tmp_path / "cgroup") == 7.0
    (folder / limit).write_text("max\n" if version == "v2" else "9223372036854771712\n")  # no limit
    assert _cgroup_room_gb(tmp_path, tmp_path / "cgroup") is None
    assert _cgroup_room_gb(tmp_path, tmp_path / "nowhere") is None


def test_on_a_mac_the_available_memory_is_what_vm_stat_counts_free():
    """From a review: with no /proc/meminfo (macOS) the total memory stood for the free one, so a 64 GB
    Mac with 40 GB in use would start ten 4 GB runs at once. vm_stat's free, inactive and speculative
    pages count (psutil's sum); its other lines do not (purgeable pages are inside active and inactive);
    other text is unknown (None: the cores only)."""
    from arctl.launch.executors import vm_stat_available_gb

    sample = """Mach Virtual Memory Statistics: (page size of 16384 bytes)
Pages free:                                65536.
Pages active:                             500000.
Pages inactive:                           131072.
Pages speculative:                         65536.
Pages throttled:                               0.
Pages wired down:                         200000.
Pages purgeable:                           32768.
"Translation faults":                  123456789.
Pages occupied by compressor:             300000.
"""
    assert vm_stat_available_gb(sample) == (65536 + 131072 + 65536) * 16384 / 2**30 == 4.0
    assert vm_stat_available_gb("") is None and vm_stat_available_gb("Pages free: 12.\n") is None


@pytest.mark.parametrize("shell", ["3,5", None], ids=["set", "unset"])
def test_a_local_job_sees_the_gpus_of_the_shell_it_was_launched_from(tmp_path, monkeypatch, shell):
    """From a review: submitit's local controller sets CUDA_VISIBLE_DEVICES to its own gpus_per_node, none: "",
    so a verl run on a GPU workstation (--executor local) saw no GPU in its job. The job entry puts the
    launching shell's value (or its absence) back."""
    from arctl.launch.executors import local_executor
    from arctl.launch.job import restore_gpus

    if shell is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", shell)
    monkeypatch.delenv("ARCTL_LOCAL_CUDA_VISIBLE_DEVICES", raising=False)
    executor = local_executor(tmp_path / "job", {"time_min": 5})
    blanked = executor.submit(os.getenv, "CUDA_VISIBLE_DEVICES")  # a module function: the job's own environment
    restored = executor.submit(restore_gpus)
    assert blanked.result() == ""  # submitit's doing, without the entry's restore
    assert restored.result() == shell


def test_a_local_job_has_no_time_limit_of_the_schedulers(tmp_path):
    """From a review: the local controller stopped a job every cluster.time_min (checkpoint, restart, the step
    in progress lost) and gave up after six restarts: a run past 6 h (the default 60 min) ended FAILED."""
    from arctl.launch.executors import local_executor

    executor = local_executor(tmp_path / "job", {"time_min": 60})
    assert executor.parameters["timeout_min"] >= 365 * 24 * 60

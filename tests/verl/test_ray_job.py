"""The Ray-on-SLURM job body: valid bash, Ray only on the allocated nodes, every user value quoted."""

from __future__ import annotations

import copy
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from arctl.backends.verl.ray_job import job_script

BASH = shutil.which("bash")


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run(script: str, tmp_path: Path, nodelist: str, hosts: list[str], extra_env=None):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "srun.log"
    _stub(bin_dir, "scontrol", 'if [ "$1 $2" = "show hostnames" ]; then printf "%s\\n" ' + " ".join(hosts) + "; fi\n")
    # srun records its arguments (one line per call) and, for the head's address lookup, prints an IP;
    # for the trainer it also records the environment the trainer would see.
    _stub(
        bin_dir,
        "srun",
        # ignore the job's EXIT-trap kill of background ray starts so every call gets recorded
        "trap '' TERM\n"
        f'printf "%s\\x1f" "$@" >> {log}; printf "\\n" >> {log}\n'
        'for a in "$@"; do case "$a" in --ip-address) echo "${STUB_HOST_IP:-10.0.0.1 fe80::1}";;\n'
        '  --all-ip-addresses) echo "10.0.0.9 fd00::9";; esac; done\n'
        f'for a in "$@"; do if [ "$a" = arctl.backends.verl.trainer ]; then env > {tmp_path}/trainer.env; fi; done\n',
    )
    script_path = tmp_path / "job.sh"
    script_path.write_text(script)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_CPUS_PER_TASK": "4",
        "ARCTL_RAY_HEAD_WAIT_S": "0.2",
        "ARCTL_RAY_WORKER_WAIT_S": "0.2",
        "HOME": str(tmp_path),
        **(extra_env or {}),
    }
    proc = subprocess.run([BASH, str(script_path)], env=env, capture_output=True, text=True, timeout=60)
    calls = [line.split("\x1f")[:-1] for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def _run_with_srun(script: str, tmp_path: Path, hosts: list[str], srun_body: str, env: dict[str, str]):
    """Run the job body with ``scontrol`` listing ``hosts`` and an ``srun`` of the test's own (``srun_body``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "scontrol", 'if [ "$1 $2" = "show hostnames" ]; then printf "%s\\n" ' + " ".join(hosts) + "; fi\n")
    _stub(bin_dir, "srun", srun_body)
    (tmp_path / "job.sh").write_text(script)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_CPUS_PER_TASK": "4", "ARCTL_RAY_HEAD_WAIT_S": "0.2",
           "ARCTL_RAY_STOP_WAIT_S": "2", "HOME": str(tmp_path), **env}
    return subprocess.run([BASH, str(tmp_path / "job.sh")], env=env, capture_output=True, text=True, timeout=60)


def _node_of(call: list[str]) -> str:
    return call[call.index("-w") + 1]


@pytest.fixture
def config(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["cluster"]["nodes"] = 3
    cfg["cluster"]["gpus_per_node"] = 8
    return cfg


def test_job_body_is_valid_bash(config, tmp_path):
    script = job_script(config, tmp_path / "run")
    proc = subprocess.run([BASH, "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert 'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))' in script


def test_the_script_lists_what_the_trainer_runs_in_eval_only_mode_too(paper_config, tmp_path):
    """The job body's comment lists the trainer's override list (verl_run_config's), eval-only mode's
    included: not the training run's resume_mode=auto alone."""
    from arctl.backends.verl.run_config import run_overrides

    cfg = copy.deepcopy(paper_config)
    cfg["verl"].update(eval_only=True, eval_checkpoint="/runs/a/checkpoints/global_step_7")
    listed = run_overrides(cfg, tmp_path / "run")
    assert listed == verl_run_config_overrides(cfg, tmp_path / "run")
    assert listed[-2:] == ["trainer.resume_mode=resume_path", "trainer.resume_from_path='/runs/a/checkpoints/global_step_7'"]
    script = job_script(cfg, tmp_path / "run")
    assert "#   trainer.val_only=true" in script and "#   trainer.resume_mode=resume_path" in script


def test_an_eval_only_run_is_named_and_typed_as_an_evaluation_in_wandb(paper_config, tmp_path):
    """From a hunt: an eval-only run took its cell's training run's W&B name (``{arm}-s{seed}``) in the same group,
    so W&B showed two runs of one name, one of them a single evaluation step. It is ``{arm}-s{seed}-eval``, job type
    ``eval``, in verl's experiment name and in the job's environment; a training run keeps its name, and a
    ``wandb.name`` given by hand wins."""
    from arctl.backends.verl.run_config import verl_run_config, wandb_env

    cfg = copy.deepcopy(paper_config)
    name = f"{cfg['arm']}-s{cfg['seed']}"
    assert verl_run_config(cfg, tmp_path / "run")[1].trainer.experiment_name == name
    assert "WANDB_JOB_TYPE" not in wandb_env(cfg, tmp_path / "run")
    cfg["verl"].update(eval_only=True, eval_checkpoint="/runs/a/checkpoints/global_step_7")
    assert verl_run_config(cfg, tmp_path / "run")[1].trainer.experiment_name == name + "-eval"
    assert wandb_env(cfg, tmp_path / "run")["WANDB_JOB_TYPE"] == "eval"
    script = job_script(cfg, tmp_path / "run")
    assert "WANDB_JOB_TYPE=eval" in script and f"WANDB_NAME={name}-eval" in script
    cfg["wandb"]["name"] = "mine"
    assert verl_run_config(cfg, tmp_path / "run")[1].trainer.experiment_name == "mine"


def verl_run_config_overrides(cfg, run_dir):
    from arctl.backends.verl.run_config import verl_run_config

    return list(verl_run_config(cfg, run_dir)[0])


def test_ray_starts_only_on_listed_nodes_and_trainer_on_head(config, tmp_path):
    run_dir = tmp_path / "run"
    config["wandb"]["id"] = "run-id-1"
    proc, calls = _run(job_script(config, run_dir, python="python3"), tmp_path, "gpu[07-09]",
                       ["gpu07", "gpu08", "gpu09"])
    assert proc.returncode == 0, proc.stderr
    heads = [c for c in calls if "--head" in c]
    workers = [c for c in calls if "start" in c and "--head" not in c and "ray.scripts.scripts" in c]
    trainers = [c for c in calls if "arctl.backends.verl.trainer" in c]
    assert [_node_of(c) for c in heads] == ["gpu07"]
    assert sorted(_node_of(c) for c in workers) == ["gpu08", "gpu09"]
    assert [_node_of(c) for c in trainers] == ["gpu07"]
    assert {_node_of(c) for c in calls} <= {"gpu07", "gpu08", "gpu09"}
    assert all("--address=10.0.0.1:6379" in c for c in workers)
    assert trainers[0][-1] == str(run_dir)
    env = dict(line.split("=", 1) for line in (tmp_path / "trainer.env").read_text().splitlines() if "=" in line)
    assert env["RAY_ADDRESS"] == "10.0.0.1:6379"
    assert env["WANDB_DIR"] == str(run_dir / "wandb")
    assert env["WANDB_RUN_ID"] == "run-id-1" and env["WANDB_RESUME"] == "allow"
    assert (run_dir / "checkpoints").is_dir()


def test_single_node_starts_no_workers(config, tmp_path):
    config["cluster"]["nodes"] = 1
    proc, calls = _run(job_script(config, tmp_path / "run", python="python3"), tmp_path, "solo", ["solo"])
    assert proc.returncode == 0, proc.stderr
    assert [c for c in calls if "ray.scripts.scripts" in c and "--head" not in c] == []


def test_every_user_value_is_quoted(config, tmp_path):
    evil = "x'; touch {p}/pwned; echo '$(touch {p}/pwned2)`touch {p}/pwned3`"
    p = tmp_path
    config["wandb"]["name"] = evil.format(p=p)
    config["wandb"]["project"] = "proj $(touch " + str(p) + "/pwned4)"
    config["wandb"]["entity"] = "ent\nexport WANDB_API_KEY=leaked"
    config["wandb"]["tags"] = ["a b", "c;touch " + str(p) + "/pwned5"]
    config["experiment"] = "exp\ntouch " + str(p) + "/pwned6"
    run_dir = tmp_path / "run dir $(touch pwned7)"
    script = job_script(config, run_dir, python="python3")
    proc, calls = _run(script, tmp_path, "n1,n2", ["n1", "n2"], extra_env={"WANDB_MODE": "offline"})
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    env = dict(
        line.split("=", 1) for line in (tmp_path / "trainer.env").read_text().split("\n") if "=" in line
    )
    assert env["WANDB_NAME"] == evil.format(p=p)
    assert env["ARCTL_RUN_DIR"] == str(run_dir)
    assert "WANDB_API_KEY" not in env


def test_api_key_never_written(config, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "secret-key-123")
    config["wandb"]["mode"] = "online"
    script = job_script(config, tmp_path / "run")
    assert "secret-key-123" not in script
    assert "WANDB_API_KEY=" not in script.replace("${WANDB_API_KEY:-}", "")


def _env_of_trainer(tmp_path: Path) -> dict:
    return dict(line.split("=", 1) for line in (tmp_path / "trainer.env").read_text().splitlines() if "=" in line)


def test_a_host_name_on_loopback_falls_back_to_an_interface_address(config, tmp_path):
    """/etc/hosts mapping the host name to 127.x must not give workers (or the trainer) a loopback head."""
    script = job_script(config, tmp_path / "run", python="python3")
    proc, calls = _run(script, tmp_path, "n1,n2", ["n1", "n2"], extra_env={"STUB_HOST_IP": "127.0.1.1"})
    assert proc.returncode == 0, proc.stderr
    workers = [c for c in calls if "start" in c and "--head" not in c and "ray.scripts.scripts" in c]
    assert [c for c in calls if "--head" in c][0].count("--node-ip-address=10.0.0.9") == 1
    assert workers and all("--address=10.0.0.9:6379" in c for c in workers)
    assert _env_of_trainer(tmp_path)["RAY_ADDRESS"] == "10.0.0.9:6379"


def test_ray_is_sized_to_the_allocation_with_a_per_job_token(config, tmp_path):
    config["verl"]["ray_start_args"] = ["--object-store-memory=100000000", "--labels=a b;touch pwned"]
    script = job_script(config, tmp_path / "run", python="python3")
    proc, calls = _run(script, tmp_path, "n1,n2", ["n1", "n2"], extra_env={"SLURM_JOB_ID": "4242"})
    assert proc.returncode == 0, proc.stderr
    starts = [c for c in calls if "ray.scripts.scripts" in c]
    assert len(starts) == 2 and not list(tmp_path.glob("pwned*"))
    for call in starts:  # head and worker alike
        assert "--num-cpus=4" in call and "--num-gpus=8" in call  # SLURM_CPUS_PER_TASK, cluster.gpus_per_node
        # and the step has those CPUs (srun inherits no --cpus-per-task since Slurm 22.05: a step of one CPU
        # confined Ray and every worker it starts to one core; from a review)
        assert "--cpus-per-task=4" in call[:call.index("-w")]
        assert "--temp-dir=/tmp/arctl-ray-4242" in call and "--disable-usage-stats" in call
        assert call[-3:] == ["--object-store-memory=100000000", "--labels=a b;touch pwned", "--block"]
    env = _env_of_trainer(tmp_path)
    head = next(c for c in starts if "--head" in c)
    assert "--port=6621" in head and "--dashboard-port=8507" in head  # 6379/8265 + 4242 % 1000
    assert env["RAY_ADDRESS"] == "10.0.0.1:6621"
    assert env["ARCTL_RAY_TMP"] == "/tmp/arctl-ray-4242" and env["RAY_AUTH_MODE"] == "token"
    token = env["RAY_AUTH_TOKEN"]
    assert len(token) == 64 and int(token, 16) >= 0 and token not in script  # made at run time, never written
    _run(script, tmp_path, "n1", ["n1"])
    assert _env_of_trainer(tmp_path)["RAY_AUTH_TOKEN"] != token  # a fresh token per job


def test_without_a_gpu_request_ray_counts_the_gpus_itself(config, tmp_path):
    config["cluster"]["gpus_per_node"] = 0
    proc, calls = _run(job_script(config, tmp_path / "run", python="python3"), tmp_path, "n1", ["n1"])
    assert proc.returncode == 0, proc.stderr
    (head,) = [c for c in calls if "--head" in c]
    assert not any(a.startswith("--num-gpus") for a in head)


def test_the_jobs_ray_stops_on_sigterm_without_draining_its_node(config, tmp_path):
    """Ray 2.60's `ray start --block` drains its node on SIGTERM for up to 30 s (for Serve) before it stops
    its processes: at a requeue or scancel SLURM's TERM reaches every step, and the drain held the job
    until KillWait's SIGKILL (a requeue of verl's CPU loop waited 35 s, 15 s for a tiny job's). Every Ray
    step gets the drain's timeout 0, under the name the installed Ray reads."""
    from extras import NO_VERL, verl_missing  # tests/support/extras.py

    from arctl.backends.verl.ray_job import NO_DRAIN

    script = job_script(config, tmp_path / "run", python="python3")
    assert script.index(f"export {NO_DRAIN}=0") < script.index("ray.scripts.scripts start")
    proc, _ = _run(script, tmp_path, "n1,n2", ["n1", "n2"])
    assert proc.returncode == 0, proc.stderr
    assert _env_of_trainer(tmp_path)[NO_DRAIN] == "0"  # srun passes the job's environment to every step
    if verl_missing():
        pytest.skip(NO_VERL)
    import sys

    read = subprocess.run([sys.executable, "-c", "from ray._private import ray_constants as c; "
                           "print(c.RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S)"],
                          env={**os.environ, NO_DRAIN: "0"}, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0 and float(read.stdout) == 0, read.stdout + read.stderr  # the name Ray reads


def test_ray_steps_ignore_the_preemption_signals():
    """`scancel --signal=USR1 JOB` (no --batch) signals every step: Ray must survive it; TERM still stops it."""
    import signal
    import sys
    import time

    from arctl.backends.verl.ray_job import IGNORE_PREEMPT

    proc = subprocess.Popen([BASH, "-c", f"{IGNORE_PREEMPT} {sys.executable} -c 'import time; time.sleep(60)'"])
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        python = sys.executable.encode() + b"\0"

        def execd():  # the wrapper bash exec'd python (the same pid; argv[0] is python now)
            return cmdline.read_bytes().startswith(python)

        end = time.monotonic() + 20
        while not execd() and time.monotonic() < end:
            time.sleep(0.02)
        assert execd()
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            proc.send_signal(sig)
        time.sleep(0.5)
        assert proc.poll() is None  # ignored (python's default for USR1 is to die)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("layout", ["flex", "duplicate"])
def test_the_job_states_its_preemption_warning_routing_and_strategy(config, tmp_path, layout):
    """What `arctl run EXP --scale paper --dry-run` shows a cluster user before any GPU hour."""
    config["cluster"]["preempt_warning_s"] = 1200
    config["verl"]["tree_attention"] = layout
    script = job_script(config, tmp_path / "run")
    assert "# preemption: SLURM sends USR1 1200 s before the time limit (cluster.preempt_warning_s)" in script
    assert "finishes its step within 600 s and checkpoints, else abandons it" in script
    assert "# rollout: one sticky request id per tree" in script
    if layout == "flex":
        assert "# tree attention: flex on verl's FSDP engine (fsdp/fsdp2; other strategies are refused)" in script
        assert "every actor worker proves the tree-attention patch before the first update" in script
    else:
        assert "# tree attention: duplicate (one row per branch, plain attention)" in script


def test_head_only_ray_flags_reach_the_head_alone(config, tmp_path):
    # Ray's `ray start --address=...` refuses --include-dashboard, --port and --redis-shard-ports
    # ("should only be specified when starting head node"); the other flags go to every node
    config["verl"]["ray_start_args"] = ["--include-dashboard=false", "--object-store-memory=100000000"]
    proc, calls = _run(job_script(config, tmp_path / "run", python="python3"), tmp_path, "gpu[07-09]",
                       ["gpu07", "gpu08", "gpu09"])
    assert proc.returncode == 0, proc.stderr
    heads = [c for c in calls if "--head" in c]
    workers = [c for c in calls if "start" in c and "--head" not in c and "ray.scripts.scripts" in c]
    assert len(heads) == 1 and len(workers) == 2
    assert "--include-dashboard=false" in heads[0] and "--object-store-memory=100000000" in heads[0]
    for worker in workers:
        assert "--include-dashboard=false" not in worker and "--object-store-memory=100000000" in worker


def test_a_worker_whose_ray_start_fails_fails_the_job_at_once_naming_its_node(config, tmp_path):
    # srun as before, but the worker's `ray start` on gpu09 exits 1 at once (as Ray does on a refused flag)
    proc = _run_with_srun(job_script(config, tmp_path / "run", python="python3"), tmp_path, ["gpu07", "gpu08", "gpu09"],
                          'for a in "$@"; do case "$a" in --ip-address) echo 10.0.0.1;; esac; done\n'
                          'case " $* " in *" gpu09 "*"--address="*) echo "ray: refused" >&2; exit 1;; esac\n'
                          'case " $* " in *" start "*) exec sleep 30;; esac\n'
                          f'for a in "$@"; do [ "$a" = arctl.backends.verl.trainer ] && touch {tmp_path}/trainer-ran; done; '
                          'exit 0\n', {"SLURM_JOB_NODELIST": "gpu[07-09]", "ARCTL_RAY_WORKER_WAIT_S": "2"})
    assert proc.returncode == 1, proc.stderr
    assert "arctl: the Ray worker on gpu09 failed (exit code 1) before the run started" in proc.stderr
    assert not (tmp_path / "trainer-ran").exists()  # the trainer never started


@pytest.mark.parametrize(("trainer_rc", "kept"), [(0, False), (75, False), (1, True)])
def test_the_ray_directory_goes_unless_the_job_failed(config, tmp_path, trainer_rc, kept):
    """The EXIT trap drops the head's Ray directory after a job that ran to its end and after one that stopped
    unfinished with no requeue after it (exit PREEMPTED_EXIT_CODE: preempted, cancelled as it started); a failed
    job keeps it for its logs. From a re-read: a preempted verl job kept its Ray sessions (logs, spilled objects) in
    the node's /tmp, one directory per preemption, "Ray logs kept" printed as if it had failed."""
    from arctl.launch.job import PREEMPTED_EXIT_CODE

    assert PREEMPTED_EXIT_CODE == 75  # os.EX_TEMPFAIL: the code the job entry exits with (tests/launch/test_chain_stops)
    # `ray start` makes its temp dir (as Ray does) and blocks; the trainer step ends with the code under test
    proc = _run_with_srun(job_script(config, tmp_path / "run", python="python3"), tmp_path, ["n1"],
                          'for a in "$@"; do case "$a" in --ip-address) echo 10.0.0.1; exit 0;; esac; done\n'
                          'case " $* " in *" start "*) mkdir -p "$ARCTL_RAY_TMP/session_1"; exec sleep 30;; esac\n'
                          f'for a in "$@"; do [ "$a" = arctl.backends.verl.trainer ] && exit {trainer_rc}; done\n'
                          'exit 0\n', {"SLURM_JOB_NODELIST": "n1", "SLURM_JOB_ID": "4242", "ARCTL_RAY_TMPDIR": str(tmp_path)})
    assert proc.returncode == trainer_rc, proc.stderr
    ray_dir = tmp_path / "arctl-ray-4242"
    assert (ray_dir / "session_1").is_dir() is kept, proc.stderr
    assert ("Ray logs kept in " + str(ray_dir)) in proc.stderr if kept else "Ray logs kept" not in proc.stderr

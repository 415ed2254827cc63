"""The Ray-on-SLURM job body that runs one arctl config on verl (one node or many).

Layout (verl's multi-node recipe, with its node-array bug fixed): the allocation's hosts come from
``nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))`` (one array element per host); the Ray
head starts on ``nodes[0]``, one Ray worker on each other listed node (none on a single node), and
the trainer (``python -m arctl.backends.verl.trainer RUN_DIR``) runs on the head and connects
through ``RAY_ADDRESS``.

The head's port is ``6379 + SLURM_JOB_ID % 1000`` (dashboard ``8265 + ...``), so single-node
jobs sharing a node do not collide. Ray is sized to the allocation: ``--num-cpus`` = the task's CPUs, ``--num-gpus`` =
``cluster.gpus_per_node`` when the job requests GPUs (else Ray counts the GPUs it can see), plus
``verl.ray_start_args`` (extra flags for every ``ray start``, e.g. ``--object-store-memory=N``; the head-only
ones, :data:`RAY_HEAD_ONLY_FLAGS`, for the head only). A `ray start` step that failed before the run
starts (a refused flag, an unreachable head) fails the job at once, naming the node.
Ray's files go to a short per-job directory ``${ARCTL_RAY_TMPDIR:-/tmp}/arctl-ray-$SLURM_JOB_ID``
(Ray's socket paths must stay under ~107 characters, so not the run directory), exported as
``ARCTL_RAY_TMP``. Ray's token authentication uses a fresh random token per job, exported as
``RAY_AUTH_TOKEN`` with ``RAY_AUTH_MODE=token`` (environment only, never in the script or on
disk): Ray 2.60's ``ray start --head`` turns token auth on by itself when ``~/.ray/auth_token``
exists, while a driver given ``RAY_AUTH_MODE`` unset and an explicit address does not, so without
this the trainer cannot join its own head. The EXIT trap stops the ``ray start --block`` steps (Ray then stops its own
processes, at once: its drain on SIGTERM, :data:`NO_DRAIN`, is off, so a requeue or ``scancel`` does not wait out
SLURM's KillWait) and, after a successful job or one that stopped unfinished with no requeue
(:data:`arctl.backends.base.PREEMPTED_EXIT_CODE`), removes the head's Ray directory (kept for its logs when the job
failed: a preempted job's Ray sessions would pile up in the node's ``/tmp``, one per preemption). Ray's steps ignore USR1/USR2 (arctl's preemption signals, for the job entry only). W&B settings come from the config; ``WANDB_API_KEY`` is only ever read from the
job's environment (``sbatch`` exports it where the run names it in ``cluster.secrets``), never written into the
script; without it an online run's job logs in with the W&B login of its ``~/.netrc``, and with neither it fails
at once (:data:`NO_WANDB_KEY`).
Checkpoints go to ``RUN_DIR/checkpoints``; verl's ``trainer.resume_mode`` (``auto``: resume from
the newest checkpoint there) makes a requeued job continue where it stopped.
Every user value is quoted with :func:`shlex.quote`.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from arctl.backends.base import PREEMPTED_EXIT_CODE

RAY_PORT = 6379  # + SLURM_JOB_ID % PORT_SPREAD: two jobs sharing a node get different ports
RAY_DASHBOARD_PORT = 8265
PORT_SPREAD = 1000  # 6379..7378 and 8265..9264: below Ray's worker port range (10002..19999)
# `ray start` flags a worker's start refuses (Ray's scripts.py: "should only be specified when starting
# head node"): verl.ray_start_args reach the head with them and every worker without them
RAY_HEAD_ONLY_FLAGS = ("--port", "--redis-shard-ports", "--include-dashboard")
# Ray's steps ignore arctl's preemption signals (USR1/USR2, meant for the job entry): `scancel
# --signal=USR1 JOB` without --batch signals every step, and Python's default would kill Ray.
# An ignored signal stays ignored across exec, in Ray's own processes too.
IGNORE_PREEMPT = "bash -c 'trap \"\" USR1 USR2; exec \"$@\"' arctl-ray"
# Ray 2.60's `ray start --block` drains its node on SIGTERM for up to this many seconds (for Ray
# Serve's proxies) before it stops its processes; a job's private Ray has nothing to drain to, and
# SLURM's TERM (a requeue after the checkpoint, scancel) reaches every process of the job at once
NO_DRAIN = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
# an online run's job without WANDB_API_KEY (arctl exports it to SLURM only where cluster.secrets names it) logs
# with the W&B login of the job's ~/.netrc; with neither it fails at once. From a hunt: it fell back to offline
# whenever the key was not exported, a login in ~/.netrc or not, while verl's TaskRunner, told WANDB_MODE=online by
# Ray's runtime env (run_config.with_wandb_env), logged online regardless (or failed without a key)
NETRC_LOGIN_CHECK = ("import os, sys; from arctl.track.identity import netrc_secrets; "
                     "sys.exit(0 if netrc_secrets(os.environ) else 1)")
NO_WANDB_KEY = ("wandb.mode=online, but this job has neither WANDB_API_KEY nor a W&B login in ${NETRC:-$HOME/.netrc}: "
                "run \\`wandb login\\` on the cluster, or pass the key with cluster.secrets=[WANDB_API_KEY]")


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _comment(text: str) -> str:
    """One comment line: control characters escaped so a value can never end the comment."""
    return "# " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


# the job's CPUs for each step that runs Ray (or the trainer): since Slurm 22.05 srun inherits no
# --cpus-per-task from sbatch, and a step of one CPU confines Ray's raylet and every worker it starts
# (the FSDP ranks, vLLM, the agent and reward loops) to one core under task/affinity or task/cgroup (from a
# review; the test clusters run task/none, where nothing showed it)
STEP_CPUS = '${SLURM_CPUS_PER_TASK:+--cpus-per-task="$SLURM_CPUS_PER_TASK"}'


def job_script(config: dict, run_dir: Path, python: str | None = None) -> str:
    """The bash body of the SLURM job (no ``#SBATCH`` header): :func:`job_setup`, then the trainer on
    the head node. The launcher uses the setup only and runs arctl's job entry in the trainer's place."""
    py = python or sys.executable or "python"
    return job_setup(config, run_dir, python) + "\n".join([
        "",
        "# the trainer runs on the head node and joins the Ray cluster through RAY_ADDRESS",
        f'srun --overlap --nodes=1 --ntasks=1 {STEP_CPUS} -w "$head_node" \\',
        f"  {_q(py)} -m arctl.backends.verl.trainer {_q(Path(run_dir))}",
    ]) + "\n"


def job_setup(config: dict, run_dir: Path, python: str | None = None) -> str:
    """The part of the job body before the trainer: the run's environment, a Ray head on the first
    node and a worker on every other node, ``RAY_ADDRESS`` exported, an EXIT trap that stops Ray."""
    from arctl.backends.verl.history import VERL_LOG
    from arctl.backends.verl.overrides import cpu_ray_resources, on_cpu, verl_setting, wandb_identity
    from arctl.backends.verl.run_config import run_overrides
    run_dir = Path(run_dir)
    cluster = config.get("cluster") or {}
    requested_gpus = int(cluster.get("gpus_per_node") or 0)
    nodes = int(cluster.get("nodes") or 1)
    # GPUs SLURM gave each node; without a GPU request Ray counts the visible GPUs itself
    gpu_flag = f" --num-gpus={requested_gpus}" if requested_gpus > 0 else ""
    cpus_line = 'cpus="${SLURM_CPUS_PER_TASK:-$(nproc)}"'
    device_lines: list[str] = []
    if on_cpu(config):  # verl.device=cpu: logical resources, as verl's resource pools and TransferQueue count them
        resources = cpu_ray_resources(config)
        gpu_flag = f" --num-gpus={resources['num_gpus']}"
        cpus_line += f"; cpus=$(( cpus > {resources['num_cpus']} ? cpus : {resources['num_cpus']} ))"
        device_lines = ["# verl.device=cpu: FSDP ranks on logical Ray GPUs (Ray refuses them beside an empty",
                        "# CUDA_VISIBLE_DEVICES)", "unset CUDA_VISIBLE_DEVICES"]
    extra_args = verl_setting(config, "ray_start_args") or []
    if isinstance(extra_args, str):
        extra_args = [extra_args]
    ray_args = "".join(" " + _q(a) for a in extra_args)
    worker_args = "".join(" " + _q(a) for a in extra_args if str(a).split("=", 1)[0] not in RAY_HEAD_ONLY_FLAGS)
    py = python or sys.executable or "python"
    overrides = run_overrides(config, run_dir)  # eval-only mode's too: what the trainer runs

    identity = wandb_identity(config, run_dir)
    env = {
        "ARCTL_RUN_DIR": str(run_dir),
        **identity.env(extra={"VERL_FILE_LOGGER_PATH": str(run_dir / VERL_LOG), "TOKENIZERS_PARALLELISM": "false"}),
    }

    from arctl.backends.verl.overrides import TREE_STRATEGIES
    from arctl.backends.verl.trainer import STEP_GRACE_FRACTION

    layout = verl_setting(config, "tree_attention")
    warning = int(cluster.get("preempt_warning_s") or 0)
    lines = [
        "set -euo pipefail",
        _comment(f"arctl verl job: experiment {config.get('experiment')} arm {config.get('arm')} seed {config.get('seed')}"),
        _comment(f"preemption: SLURM sends USR1 {warning} s before the time limit (cluster.preempt_warning_s); the "
                 f"trainer finishes its step within {STEP_GRACE_FRACTION * warning:g} s and checkpoints, else abandons "
                 "it and keeps the last checkpoint (at once on TERM); the job requeues and resumes there"),
        "# rollout: one sticky request id per tree, so every summary request reaches the vLLM replica that",
        "#   generated the thinking and reuses its KV from the prefix cache",
        _comment(f"tree attention: {layout}" + (
            f" on verl's FSDP engine ({'/'.join(TREE_STRATEGIES)}; other strategies are refused); every actor "
            "worker proves the tree-attention patch before the first update" if layout != "duplicate" else
            " (one row per branch, plain attention)")),
        "# verl overrides (checked against verl's config at the launch and by the trainer before it starts):",
        *[_comment("  " + shlex.quote(line)) for line in overrides],
        "",
    ]
    lines += [f"export {k}={_q(v)}" for k, v in env.items()]
    # an offline (disabled) run's W&B sends nothing, unless the job's environment says otherwise, and no run takes
    # from it an entity, tags or notes its config does not give (arctl.track.identity.QUIET_DEFAULTS, SHELL_FALLBACKS)
    lines += [f'export {k}="${{{k}:-{v}}}"' for k, v in identity.quiet_defaults().items()]
    lines += [f"unset {' '.join(identity.unset_env())}"] if identity.unset_env() else []
    lines += [
        "# an online run's W&B key: WANDB_API_KEY where its run names it in cluster.secrets (never written here),",
        "# else the login `wandb login` stored in ~/.netrc; with neither, fail now, not after Ray and the model load",
        'if [ "${WANDB_MODE}" = online ] && [ -z "${WANDB_API_KEY:-}" ] \\',
        f"  && ! {_q(py)} -c {_q(NETRC_LOGIN_CHECK)}; then",
        f'  echo "arctl: {NO_WANDB_KEY}" >&2',
        "  exit 1",
        "fi",
        f"mkdir -p {_q(run_dir / 'checkpoints')} {_q(run_dir / 'wandb')}",
        "",
        "# one array element per allocated host",
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
        'if [ "${#nodes[@]}" -lt 1 ]; then echo "arctl: empty SLURM_JOB_NODELIST" >&2; exit 1; fi',
        f'if [ "${{#nodes[@]}}" -ne {nodes} ]; then',
        f'  echo "arctl: expected {nodes} nodes, SLURM gave ${{#nodes[@]}}" >&2',
        "fi",
        'head_node="${nodes[0]}"',
        'head_ip="$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk \'{print $1}\')"',
        "# a host name mapped to loopback in /etc/hosts: use the head's first interface address instead",
        'case "$head_ip" in 127.*|::1|"")',
        '  head_ip="$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --all-ip-addresses | awk \'{print $1}\')";;',
        "esac",
        "# ports from the job id: single-node jobs that share a node must not share a Ray port",
        f"port_offset=$(( ${{SLURM_JOB_ID:-0}} % {PORT_SPREAD} ))",
        f"ray_port=$(( {RAY_PORT} + port_offset ))",
        'export RAY_ADDRESS="${head_ip}:${ray_port}"',
        cpus_line,
        *device_lines,
        "# Ray token authentication with a fresh token per job, in the environment only (never on disk):",
        "# every `ray start` and the trainer get it through srun; a stale ~/.ray/auth_token cannot split them",
        "export RAY_AUTH_MODE=token",
        "export RAY_AUTH_TOKEN=\"$(od -An -tx1 -N32 /dev/urandom | tr -d ' \\n')\"",
        "# Ray's files: a short per-job path (socket paths have a length limit)",
        'export ARCTL_RAY_TMP="${ARCTL_RAY_TMPDIR:-/tmp}/arctl-ray-${SLURM_JOB_ID:-$$}"',
        "# the job's Ray is its own: on SIGTERM (a requeue, scancel, the EXIT trap) stop at once, not drain",
        "# the node for Serve's sake (Ray 2.60: up to 30 s, held until SLURM's KillWait sends SIGKILL)",
        f"export {NO_DRAIN}=0",
        "",
        "# on exit: stop the ray steps (ray start --block stops its own processes on SIGTERM),",
        "# wait for them, and drop the head's Ray directory unless the job failed (its logs): a job that ran to its",
        f"# end (0) or stopped unfinished with no requeue ({PREEMPTED_EXIT_CODE}: preempted, cancelled) leaves none",
        "cleanup() {",
        "  local rc=$? pid t",
        '  for pid in "${ray_pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done',
        '  for pid in "${ray_pids[@]:-}"; do',
        '    for ((t = 0; t < 2 * ${ARCTL_RAY_STOP_WAIT_S:-60}; t++)); do',
        '      { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; } || break',
        "      sleep 0.5",
        "    done",
        "  done",
        f'  if [ "$rc" -eq 0 ] || [ "$rc" -eq {PREEMPTED_EXIT_CODE} ]; then rm -rf "$ARCTL_RAY_TMP"',
        '  else echo "arctl: Ray logs kept in ${ARCTL_RAY_TMP} on ${head_node:-the head}" >&2; fi',
        "}",
        "ray_pids=()",
        "trap cleanup EXIT",
        "# a `ray start` step that already failed (a refused flag, an unreachable head): fail now, not after",
        "# the trainer's wait for every node",
        "ray_step_alive() {",
        '  local pid="${ray_pids[-1]}" rc=0',
        '  kill -0 "$pid" 2>/dev/null && return 0',
        '  wait "$pid" || rc=$?',
        '  [ "$rc" -eq 0 ] && return 0',
        '  echo "arctl: $1 failed (exit code ${rc}) before the run started: its error is above in this log" >&2',
        "  exit 1",
        "}",
        "",
        'echo "arctl: ray head on ${head_node} (${RAY_ADDRESS})"',
        f'srun --overlap --nodes=1 --ntasks=1 {STEP_CPUS} -w "$head_node" \\',
        f'  {IGNORE_PREEMPT} {_q(py)} -m ray.scripts.scripts start --head --node-ip-address="$head_ip" --port="$ray_port" \\',
        f'  --dashboard-port=$(( {RAY_DASHBOARD_PORT} + port_offset )) --num-cpus="$cpus"{gpu_flag} --temp-dir="$ARCTL_RAY_TMP" \\',
        f"  --disable-usage-stats{ray_args} --block &",
        "ray_pids+=($!)",
        "sleep \"${ARCTL_RAY_HEAD_WAIT_S:-10}\"",
        'ray_step_alive "the Ray head on ${head_node}"',
        'for ((i = 1; i < ${#nodes[@]}; i++)); do',
        '  node="${nodes[$i]}"',
        '  echo "arctl: ray worker on ${node}"',
        f'  srun --overlap --nodes=1 --ntasks=1 {STEP_CPUS} -w "$node" \\',
        f'    {IGNORE_PREEMPT} {_q(py)} -m ray.scripts.scripts start --address="$RAY_ADDRESS" --num-cpus="$cpus"{gpu_flag} \\',
        f'    --temp-dir="$ARCTL_RAY_TMP" --disable-usage-stats{worker_args} --block &',
        "  ray_pids+=($!)",
        "  sleep \"${ARCTL_RAY_WORKER_WAIT_S:-5}\"",
        '  ray_step_alive "the Ray worker on ${node}"',
        "done",
    ]
    return "\n".join(lines) + "\n"

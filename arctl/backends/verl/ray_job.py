"""The multi-node Ray-on-SLURM job body that runs one arctl config on verl.

Layout (verl's multi-node recipe, with its node-array bug fixed): the allocation's hosts come from
``nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))`` (one array element per host); the Ray
head starts on ``nodes[0]``, one Ray worker on each other listed node, and the trainer
(``python -m arctl.backends.verl.trainer RUN_DIR``) runs on the head and connects through
``RAY_ADDRESS``. W&B settings come from the config; ``WANDB_API_KEY`` is only ever read from the
job's environment (``sbatch`` exports the submitter's), never written into the script.
Checkpoints go to ``RUN_DIR/checkpoints``; verl's ``trainer.resume_mode`` (``auto``: resume from
the newest checkpoint there) makes a requeued job continue where it stopped.
Every user value is quoted with :func:`shlex.quote`.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

RAY_PORT = 6379
RAY_DASHBOARD_PORT = 8265


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _comment(text: str) -> str:
    """One comment line: control characters escaped so a value can never end the comment."""
    return "# " + "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def job_script(config: dict, run_dir: Path, python: str | None = None) -> str:
    """The bash body of the SLURM job (no ``#SBATCH`` header: the launcher writes that)."""
    from arctl.backends.verl.overrides import verl_overrides, verl_setting

    run_dir = Path(run_dir)
    cluster = config.get("cluster") or {}
    wandb = config.get("wandb") or {}
    gpus = int(cluster.get("gpus_per_node") or 0) or int(verl_setting(config, "n_gpus_per_node"))
    nodes = int(cluster.get("nodes") or 1)
    py = python or sys.executable or "python"
    overrides = verl_overrides(config, run_dir)

    env = {
        "ARCTL_RUN_DIR": str(run_dir),
        "WANDB_DIR": str(run_dir / "wandb"),
        "WANDB_PROJECT": wandb.get("project") or "arctl",
        "WANDB_RUN_GROUP": wandb.get("group") or config.get("experiment") or "arctl",
        "WANDB_NAME": wandb.get("name") or f"{config.get('arm')}-s{config.get('seed', 0)}",
        "WANDB_MODE": wandb.get("mode") or "offline",
        "VERL_FILE_LOGGER_PATH": str(run_dir / "verl_metrics.jsonl"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    if wandb.get("entity"):
        env["WANDB_ENTITY"] = wandb["entity"]
    if wandb.get("tags"):
        env["WANDB_TAGS"] = ",".join(str(t) for t in wandb["tags"])
    if wandb.get("id"):
        env["WANDB_RUN_ID"] = wandb["id"]
        env["WANDB_RESUME"] = "allow"

    lines = [
        "set -euo pipefail",
        _comment(f"arctl verl job: experiment {config.get('experiment')} arm {config.get('arm')} seed {config.get('seed')}"),
        "# verl overrides (checked against verl's config by the trainer before it starts):",
        *[_comment("  " + shlex.quote(line)) for line in overrides],
        "",
    ]
    lines += [f"export {k}={_q(v)}" for k, v in env.items()]
    lines += [
        "# WANDB_API_KEY comes from the submitting environment only; it is never written here.",
        'if [ "${WANDB_MODE}" = online ] && [ -z "${WANDB_API_KEY:-}" ]; then',
        '  echo "arctl: WANDB_MODE=online but WANDB_API_KEY is not set; logging offline" >&2',
        "  export WANDB_MODE=offline",
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
        f"ray_port={RAY_PORT}",
        'export RAY_ADDRESS="${head_ip}:${ray_port}"',
        'cpus="${SLURM_CPUS_PER_TASK:-$(nproc)}"',
        f"gpus={gpus}",
        "",
        "cleanup() { for pid in \"${ray_pids[@]:-}\"; do kill \"$pid\" 2>/dev/null || true; done; }",
        "ray_pids=()",
        "trap cleanup EXIT",
        "",
        'echo "arctl: ray head on ${head_node} (${RAY_ADDRESS})"',
        'srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \\',
        f'  {_q(py)} -m ray.scripts.scripts start --head --node-ip-address="$head_ip" --port="$ray_port" \\',
        f'  --dashboard-port={RAY_DASHBOARD_PORT} --num-cpus="$cpus" --num-gpus="$gpus" --block &',
        "ray_pids+=($!)",
        "sleep \"${ARCTL_RAY_HEAD_WAIT_S:-10}\"",
        'for ((i = 1; i < ${#nodes[@]}; i++)); do',
        '  node="${nodes[$i]}"',
        '  echo "arctl: ray worker on ${node}"',
        '  srun --overlap --nodes=1 --ntasks=1 -w "$node" \\',
        f'    {_q(py)} -m ray.scripts.scripts start --address="$RAY_ADDRESS" --num-cpus="$cpus" --num-gpus="$gpus" --block &',
        "  ray_pids+=($!)",
        "  sleep \"${ARCTL_RAY_WORKER_WAIT_S:-5}\"",
        "done",
        "",
        "# the trainer runs on the head node and joins the Ray cluster through RAY_ADDRESS",
        'srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \\',
        f"  {_q(py)} -m arctl.backends.verl.trainer {_q(run_dir)}",
    ]
    return "\n".join(lines) + "\n"

"""`arctl repair` keeps what `arctl status` shows of a run, as far as its folder tells.

From a hunt (status --json before and after a repair of a healthy registry): a run cancelled while it waited in
the local queue lost its job id (``queue:N``), its W&B id and its attempt; a ``--force`` rerun's attempts went
2 -> 1 (status.json counts the current generation only; the earlier one's is under ``previous/``).
"""

from __future__ import annotations

import os
import socket

import yaml

from arctl.launch import states
from arctl.launch.control import cancel_runs
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.repair import rebuild_registry
from arctl.launch.status_file import mark_submitted, name_job_process, write_status
from arctl.launch.workspace import Workspace


def _folder(ws: Workspace, run_id: str, wandb_id: str):
    run_dir = ws.run_dir(run_id)
    (run_dir / "job").mkdir(parents=True)
    config = {"experiment": "exp", "arm": "a", "seed": 0, "run_id": run_id, "backend": "tiny",
              "scale": {"name": "tiny"}, "cluster": {"executor": "local"},
              "wandb": {"group": "exp", "mode": "offline", "id": wandb_id}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_dir


def test_a_run_cancelled_while_queued_keeps_its_job_wandb_id_and_attempt(tmp_path):
    ws = Workspace(tmp_path / "ws")
    run_id = "exp_a_s0_aaaa"
    run_dir = _folder(ws, run_id, run_id)
    queue = f"queue:{os.getpid()}"  # a live process: the queue the launch named
    with Registry(ws.registry_path) as reg:  # as the launcher leaves a run it gave the local queue
        reg.claim([RunRecord(run_id=run_id, experiment="exp", arm="a", seed=0)], new_claim_token())
        reg.update(run_id, state=states.PENDING, executor="local", job_id=queue, attempts=1, wandb_id=run_id,
                   claim=None, before_claim=None)
    mark_submitted(run_dir, (None, socket.gethostname()))
    name_job_process(run_dir, queue, os.getpid())
    with Registry(ws.registry_path) as reg:
        ((before, _),) = cancel_runs(reg, ws, [reg.get(run_id)])
    assert before.state == states.CANCELLED

    (rec,) = rebuild_registry(ws).runs
    assert (rec.state, rec.job_id, rec.wandb_id, rec.attempts) == (states.CANCELLED, queue, run_id, 1), rec
    with Registry(ws.registry_path) as reg:
        kept = reg.get(run_id)
    assert (kept.job_id, kept.wandb_id, kept.attempts) == (queue, run_id, 1)


def test_a_forced_rerun_keeps_the_attempts_of_its_earlier_generation(tmp_path):
    ws = Workspace(tmp_path / "ws")
    run_id = "exp_a_s0_bbbb"
    run_dir = _folder(ws, run_id, f"{run_id}-g1")
    earlier = run_dir / "previous" / "20261207-011338"
    earlier.mkdir(parents=True)
    write_status(earlier, state="completed", executor="local", job_id="9355", attempt=1, wandb_id=run_id)
    write_status(run_dir, state="completed", executor="local", job_id="11030", attempt=1, wandb_id=f"{run_id}-g1")

    (rec,) = rebuild_registry(ws).runs
    assert (rec.state, rec.attempts, rec.wandb_id, rec.generation) == (states.COMPLETED, 2, f"{run_id}-g1", 1), rec


def test_a_run_never_submitted_has_no_attempt(tmp_path):
    ws = Workspace(tmp_path / "ws")
    _folder(ws, "exp_a_s0_cccc", "exp_a_s0_cccc")  # a launch killed before it wrote the run's status
    (rec,) = rebuild_registry(ws).runs
    assert rec.attempts == 0 and rec.state == states.FAILED

"""verl's real training loop end to end on a CPU, through the production path, on the real local SLURM.

``arctl run`` of AnytimeReasoner (AR-uniform, 2 budgets x 2 summaries) at ``--scale paper`` with
``verl.device=cpu``: the launcher's sbatch script with the Ray job body (head started by ``ray start``,
per-job token), the job entry, the verl backend's ``train``, verl's ``run_ppo`` with the v1 trainer in
arctl's mode, TransferQueue, an FSDP2 actor worker on gloo whose forward carries arctl's tree mask
(proved by every actor worker before the first update), the ``arctl_cpu`` rollout server behind verl's
replica and router, the tree agent loop with the R1-Distill-shaped tokenizer (tests/support/r1_like.py:
no unk, DeepSeek specials, qwen2 model type), per-leaf rewards, arctl's advantage step and policy loss,
validation, checkpoints, and a KL term against verl's reference worker. Nothing of verl's loop is stubbed; the model is a tiny random Qwen2 whose
favourite tokens make rewards vary.

Then SLURM's time-limit warning (``scancel --batch --signal=USR1``) during step 2, where ``save_freq``
fires too: the step ends, is saved once, the job requeues and resumes from it with the same W&B id;
step 3 completes. The synced W&B history (the independent reader of tests/support) holds every step
once. Last, ``verl.eval_only=true`` from the step-3 checkpoint evaluates the anytime grid."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import r1_like  # tests/support/r1_like.py
from extras import NO_VERL, verl_missing  # tests/support/extras.py

from arctl.launch.status_file import read_status

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.verl, pytest.mark.usefixtures("slurm_cluster")]

if verl_missing():
    pytest.skip(NO_VERL, allow_module_level=True)

EXPERIMENT = r1_like.verl_experiment(
    "verl's real loop on a CPU (AR-uniform, 2 budgets x 2 summaries)",
    "eval.grid=[8,16,24,32]", "trainer.total_steps=3", "trainer.save_freq=2", "trainer.test_freq=3",
    "cluster.cpus_per_task=2", "cluster.mem_gb=8", "cluster.time_min=15", "cluster.preempt_warning_s=120",
    "verl.ray_start_args=['--object-store-memory=200000000','--include-dashboard=false']",
    # L1's KL term (no AR arm has one): verl's reference worker beside the actor, on the same trees
    "optim.kl_coef=0.001",
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A local R1-Distill-shaped model directory and verl parquet files written by `arctl data prepare`."""
    return r1_like.verl_inputs(tmp_path_factory.mktemp("verl-cpu"))


def _steps_logged(run_dir: Path) -> list[int]:
    try:
        lines = (run_dir / "verl_metrics.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _ray_processes(job_id: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", f"arctl-ray-{job_id}"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


# three starts of verl's loop (attempt 1, the requeued attempt 2, the eval-only run: Ray, the workers,
# the rollout server, ~2.5 min each on 2 cores) and the merger: 428 s alone, 498-515 s in CI beside the
# fresh-machine test, and once past the suite's 600 s there (the eval-only run ended 20 s after the
# limit). 900 s bounds a hang without failing a loop that is only slow.
@pytest.mark.timeout(900)
def test_verls_loop_trains_stops_resumes_and_evaluates_on_a_cpu(inputs, tmp_path, monkeypatch, cli, waiter, statuses):
    from wandb_reference import synced_history  # tests/support: the independent reader of .wandb files

    from arctl.backends.verl import checkpoints

    specs = tmp_path / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "experiments" / "vcpu.yaml").write_text(EXPERIMENT)
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)  # the real verl backend runs
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("ARCTL_RAY_HEAD_WAIT_S", "1")
    ws = tmp_path / "ws"
    # it trains on a file `arctl data prepare` made from an eval set (its rows say split "test"): the trainer's
    # mark, not the rows, tells the agent loop a training batch from a validation one (agent_loop.is_validation)
    where = [f"model.path={inputs / 'model'}", f"verl.data_dir={inputs / 'data'}",
             f"data.train_files={inputs / 'data' / 'aime24' / 'test.parquet'}", "trainer.total_epochs=4"]  # 1 step each
    started = time.monotonic()

    out = cli("run", "vcpu", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", *where,
              check=True)
    (run,) = json.loads(out.stdout)["submitted"]
    run_dir = Path(run["run_dir"])

    # step 1 logged: step 2 (a save_freq step) is running; SLURM's time-limit warning arrives now
    waiter(lambda: 1 in _steps_logged(run_dir) or read_status(run_dir).get("state") == "failed", 420,
           "step 1 of verl's loop")
    assert read_status(run_dir).get("state") != "failed", read_status(run_dir).get("error")
    subprocess.run(["scancel", "--signal=USR1", "--batch", run["job_id"]], check=True)
    waiter(lambda: read_status(run_dir).get("attempt") == 2, 240, "the requeued attempt to start")

    def done():
        (record,) = statuses(ws)
        return record["state"] in ("COMPLETED", "FAILED") and record

    record = waiter(done, 420, "the requeued attempt to finish")
    # every line: a requeued job appends to its log files, and the stop line of attempt 1 fell outside the last 200
    # (the default --tail) when attempt 2 wrote more progress-bar pieces (CI of 5cacb4e, 2026-12-06: 322 pieces in
    # the .err file, the stop line the 114th)
    logs = cli("logs", run["run_id"], "--workdir", str(ws), "--tail", "0").stdout
    if record["state"] != "COMPLETED":
        pytest.fail(f"{record['state']}: {record['error']}\n{logs[-4000:]}")
    assert record["job_id"] == run["job_id"] and record["step"] == 3  # requeued by SLURM, not resubmitted
    trained_s = time.monotonic() - started

    # the stop at step 2 ended the step and saved it once (save_freq and the stop met there); step 3 after
    ckpt = run_dir / "checkpoints"
    assert checkpoints.saved_steps(ckpt) == [3, 2]
    assert all(checkpoints.problem(ckpt, s) is None for s in (2, 3))
    assert (ckpt / checkpoints.TRACKER).read_text() == "3"
    assert "stop requested; saving a checkpoint at step 2" in logs
    # verl logged the last step (FINISHED: complete) and every validation's row (no record left to redo)
    assert (run_dir / "FINISHED").read_text().strip() == "3" and not (run_dir / "VALIDATION_SKIPPED").exists()
    # verl's save_freq save only, never a second save of step 2 (the checkpoint itself is checked above). At most
    # once, not exactly: in one CI run (2026-12-04) this line never reached the job log, while the checkpoint and
    # arctl's stop line, logged just before it by the same process, were there; the cause is not established (Ray
    # forwards worker output asynchronously and holds lines of a repeated pattern for up to 5 s); passed on rerun
    saves = re.findall(rf"Saving checkpoint to {re.escape(str(ckpt / 'global_step_2'))}(?![\w/])", logs)
    assert len(saves) <= 1, saves
    assert "tree-attention patch active in 1 actor workers" in logs
    assert "Draining for up to" not in logs  # the requeue's TERM stopped Ray at once (ray_job.NO_DRAIN)

    # W&B: one run, a fragment per attempt, every step exactly once
    ids, rows = synced_history(run_dir)
    assert ids == {record["wandb_id"]}
    assert [r["trainer/global_step"] for r in rows] == [0, 1, 2, 3]
    by_step = {r["trainer/global_step"]: r for r in rows}
    for step in (1, 2, 3):  # arctl's advantage step and verl's update ran on real trees
        row = by_step[step]
        assert {"train/score@16", "train/score@32", "train/adv_var/brpo", "actor/pg_loss"} <= set(row)
        assert row["train/think_len/mean"] > 0
        # thinking advantages that vary move the policy; not the converse: with every thinking
        # advantage 0 the decoupled summaries' own GRPO advantages can still be non-zero (seen in
        # CI: grad norm 0.019 at BRPO variance 0)
        assert row["actor/grad_norm"] > 0 or row["train/adv_var/brpo"] == 0
        assert 0 < row["perf/summary_prefix_cache_hit"] <= 1  # summaries reused the thinking's KV
    assert any(by_step[s]["actor/grad_norm"] > 0 for s in (1, 2, 3)), r1_like.update_record(by_step)  # the weights moved
    # the KL term: verl's reference worker scores the same packed trees with the tree mask (before the
    # first update it equals the actor: no KL), and it stays the weights the run started from across
    # the requeue (after two updates there is KL, though the resumed actor loaded step 2's weights)
    kl = [by_step[s]["train/kl"] for s in (1, 2, 3)]
    assert all("actor/kl_loss" in by_step[s] and "train/kl_loss" in by_step[s] for s in (1, 2, 3))
    assert kl[0] == 0, kl  # the same log-probs to the bit: same weights, same tree mask
    assert all(k >= 0 for k in kl) and (kl[2] > 0 or all(by_step[s]["actor/grad_norm"] == 0 for s in (1, 2))), kl
    for step in (0, 3):  # validation before training and at test_freq
        assert {"eval/aime24/acc@16", "eval/aime24/acc@32", "eval/aime24/anytime_acc"} <= set(by_step[step])

    # eval-only from the step-3 checkpoint: the anytime grid (submitted first: its job starts while the
    # merged model below is checked)
    out = cli("run", "vcpu", "--scale", "paper", "--executor", "slurm", "--workdir", str(ws), "--json", *where,
              "verl.eval_only=true", f"verl.eval_checkpoint={ckpt / 'global_step_3'}", check=True)
    (ev,) = json.loads(out.stdout)["submitted"]

    # trainer.init_from: a run that starts from this one gets its step-3 weights, merged by verl's own
    # model merger into a Hugging Face directory (its model.path); checked against the FSDP shard itself
    _check_init_model(run_dir, inputs / "model", tmp_path / "child")

    def eval_done():
        records = statuses(ws)
        rec = next(r for r in records if r["run_id"] == ev["run_id"])
        return rec["state"] in ("COMPLETED", "FAILED") and rec

    ev_record = waiter(eval_done, 300, "the eval-only run")
    if ev_record["state"] != "COMPLETED":
        pytest.fail(f"{ev_record['state']}: {ev_record['error']}\n{cli('logs', ev['run_id'], '--workdir', str(ws)).stdout[-4000:]}")
    _, ev_rows = synced_history(Path(ev["run_dir"]))
    assert [r["trainer/global_step"] for r in ev_rows] == [3]  # the checkpoint's step
    assert {f"eval/aime24/acc@{b}" for b in (8, 16, 24, 32)} | {"eval/aime24/grid_anytime_acc"} <= set(ev_rows[0])
    assert not any(k.startswith("train/") for k in ev_rows[0])

    waiter(lambda: not _ray_processes(run["job_id"]) and not _ray_processes(ev["job_id"]), 60,
           "the jobs' Ray processes to end")
    print(f"\nverl on CPU: train + stop + resume {trained_s:.0f} s, all {time.monotonic() - started:.0f} s")


def _check_init_model(parent: Path, original: Path, child: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arctl.backends.verl.init_model import INIT_RECORD, init_model_path

    merged = Path(init_model_path({"init_dir": str(parent)}, child))
    assert json.loads((child / INIT_RECORD).read_text())["step"] == 3
    model = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    before = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
    shard = torch.load(parent / "checkpoints" / "global_step_3" / "actor" / "model_world_size_1_rank_0.pt",
                       map_location="cpu", weights_only=False)
    local = {k: (v.to_local() if hasattr(v, "to_local") else v).float() for k, v in shard.items()}
    weights = {k: v.float() for k, v in model.state_dict().items()}
    assert set(local) <= set(weights), set(local) - set(weights)
    for key, value in local.items():  # the merged model is the checkpoint's weights, in bf16 (verl's merger)
        assert torch.equal(weights[key], value.bfloat16().float()), key
    assert any(not torch.equal(weights[k], v.bfloat16().float()) for k, v in before.state_dict().items())  # moved
    tok = AutoTokenizer.from_pretrained(merged)
    assert tok.encode("What is 1 + 1?") == AutoTokenizer.from_pretrained(original).encode("What is 1 + 1?")

"""The tiny trainer's loop, checkpoint and resume where no test looked (hunt "mutation7": each test here fails on
one mutant that survived the rest of the suite, and on the defect it stands for):

- a resume past a lost row goes back to a checkpoint *before* that step, never to the step's own (checkpoint.py
  ``newest_intact(below=)``): else the completed run lacks the step;
- ``trainer.test_freq=1`` (an evaluation every step) keeps its step-0 row, so a stopped run can resume;
- a run whose logits turned NaN ends with a failed W&B exit record (the reports: "failed", not "stopped");
- a stop that arrives during the last step changes nothing: the run completes (no extra attempt);
- ``perf/step_time_s`` and ``perf/step_cpu_s`` are the step's own time, not the process clock's."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
import wandb
from micro import MICRO  # tests/support/micro.py

from arctl.backends.tiny import trainer
from arctl.backends.tiny.checkpoint import newest_intact, save_checkpoint
from arctl.compose import resolve_experiment
from arctl.track import metrics_schema as ms
from arctl.track import writer
from arctl.track.phase import read_warning

PERF = (ms.PERF_STEP_TIME_S, ms.PERF_STEP_CPU_S)


def _stop_at(mp: pytest.MonkeyPatch, step: int) -> threading.Event:
    """A stop event set as the row of ``step`` is logged (after it, the step's checkpoint and the stop check):
    not by the warm-up's own stop checks, which a count of checks would take for the loop's."""
    real_log, stop = writer.log_row, threading.Event()

    def log_row(run, row):
        real_log(run, row)
        if row[ms.STEP_KEY] == step:
            stop.set()

    mp.setattr(writer, "log_row", log_row)
    return stop


def _config(name: str = "main-ar-uniform", *extra: str) -> dict:
    return resolve_experiment(name, overrides=[*MICRO, *extra])[0].config


def _rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / writer.METRICS_FILE).read_text().splitlines()]


def _steps(run_dir) -> list[int]:
    return [r[ms.STEP_KEY] for r in _rows(run_dir)]


# --- a resume past a lost row (checkpoint.py:183) -----------------------------------------------------------------

def test_newest_intact_below_a_step_leaves_that_steps_own_checkpoint_out(tmp_path):
    model = torch.nn.Linear(8, 8)
    optimizer, generator = torch.optim.AdamW(model.parameters()), torch.Generator().manual_seed(0)
    for step in (1, 2):
        save_checkpoint(tmp_path, step, model, optimizer, generator, "wb-id", keep=2)
    assert newest_intact(tmp_path).state["step"] == 2
    assert newest_intact(tmp_path, below=3).state["step"] == 2
    below_2 = newest_intact(tmp_path, below=2)
    assert below_2.state["step"] == 1 and below_2.path.name == "step_000001.pt" and not below_2.skipped
    below_1 = newest_intact(tmp_path, below=1)  # none before step 1: not "damaged", just none
    assert below_1.path is None and below_1.state is None and not below_1.skipped


def test_a_crash_that_lost_the_row_of_a_checkpointed_step_redoes_that_step(tmp_path, monkeypatch):
    """Checkpoints at steps 1 and 2 (save_freq=1), then the row of step 2 lost (a crash right after its checkpoint,
    W&B off): the resume goes back to step 1's checkpoint, not step 2's, and the completed run has every step."""
    config = _config("main-ar-uniform", "trainer.save_freq=1", "tiny.keep_checkpoints=3", "wandb.mode=disabled")
    run_dir = tmp_path / "run"
    stop, save = threading.Event(), trainer.save_checkpoint

    def saved(path, step, *args, **kwargs):  # (W&B off: no log_row to hook) the crash comes after step 2's save
        save(path, step, *args, **kwargs)
        if step == 2:
            stop.set()

    monkeypatch.setattr(trainer, "save_checkpoint", saved)
    assert trainer.train(config, run_dir, stop) == "preempted"
    monkeypatch.undo()
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) == ["step_000001.pt", "step_000002.pt"]
    rows = _rows(run_dir)
    assert [r[ms.STEP_KEY] for r in rows] == [0, 1, 2]
    (run_dir / writer.METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))  # row 2 lost
    assert trainer.train(config, run_dir, threading.Event()) == "completed"
    again = _rows(run_dir)
    assert [r[ms.STEP_KEY] for r in again] == [0, 1, 2, 3]
    for a, b in zip(rows, again[:3], strict=True):  # the redone step is the lost one (deterministic)
        a, b = ({k: v for k, v in r.items() if k not in PERF} for r in (a, b))
        assert a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a), a[ms.STEP_KEY]
    warning = read_warning(run_dir)
    assert "resumed from step_000001.pt, not step_000002.pt (steps 2..2 are trained again)" in warning, warning


# --- one run, evaluated every step, whose stop arrives during its last step ---------------------------------------

@pytest.fixture(scope="module")
def every_step(tmp_path_factory):
    """A micro run with trainer.test_freq=1 whose stop is set as its last step logs its row (a TERM while the
    final checkpoint is written): (run dir, what train returned, its rows, the wall and CPU seconds of train)."""
    config = _config("main-ar-uniform", "trainer.test_freq=1")
    run_dir = tmp_path_factory.mktemp("every-step") / "run"
    with pytest.MonkeyPatch.context() as mp:
        stop = _stop_at(mp, config["trainer"]["total_steps"])
        wall, cpu = time.perf_counter(), time.process_time()
        status = trainer.train(config, run_dir, stop)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert stop.is_set()  # (the stop did come)
    return run_dir, status, _rows(run_dir), wall, cpu


def test_a_stop_during_the_last_step_completes_the_run(every_step):
    """Its final checkpoint and evaluation are saved: "preempted" would requeue a run with nothing left to do."""
    run_dir, status, rows, _, _ = every_step
    assert status == "completed"
    assert [r[ms.STEP_KEY] for r in rows] == [0, 1, 2, 3]
    assert any(k.startswith("eval/") for k in rows[-1])


def test_an_evaluation_every_step_keeps_the_step_0_row_and_a_stopped_run_resumes(every_step, tmp_path, monkeypatch):
    """trainer.test_freq=1: the step-0 row (the warm-up's accuracy) is there, every step's row once; a run stopped
    after step 1 resumes (a resume expects the step-0 row) and equals the run that was not stopped."""
    _, _, full, _, _ = every_step
    assert [r[ms.STEP_KEY] for r in full] == [0, 1, 2, 3]
    assert all(any(k.startswith("eval/") for k in r) for r in full)  # every step evaluated, step 0 too
    cut = tmp_path / "cut"
    config = _config("main-ar-uniform", "trainer.test_freq=1")
    assert trainer.train(config, cut, _stop_at(monkeypatch, 1)) == "preempted"
    monkeypatch.undo()
    assert _steps(cut) == [0, 1]
    assert trainer.train(config, cut, threading.Event()) == "completed"
    again = _rows(cut)
    assert [r[ms.STEP_KEY] for r in again] == [0, 1, 2, 3]
    for a, b in zip(full, again, strict=True):
        a, b = ({k: v for k, v in r.items() if k not in PERF} for r in (a, b))
        assert a.keys() == b.keys(), a[ms.STEP_KEY]
        for key, va in a.items():
            vb = b[key]
            assert (va != va and vb != vb) or abs(va - vb) <= 1e-6, (a[ms.STEP_KEY], key, va, vb)


def test_a_steps_perf_times_are_its_own(every_step):
    """perf/step_time_s and perf/step_cpu_s: positive, and within the wall and CPU time of the whole run (the
    process clock's value, which a lost `- t0` logs, is not)."""
    _, _, rows, wall, cpu = every_step
    trained = [r for r in rows if r[ms.STEP_KEY] > 0]
    assert len(trained) == 3
    for row in trained:
        assert 0 < row[ms.PERF_STEP_TIME_S] < wall, (row[ms.STEP_KEY], row[ms.PERF_STEP_TIME_S], wall)
        assert 0 < row[ms.PERF_STEP_CPU_S] < cpu, (row[ms.STEP_KEY], row[ms.PERF_STEP_CPU_S], cpu)
    assert sum(r[ms.PERF_STEP_TIME_S] for r in trained) < wall
    assert sum(r[ms.PERF_STEP_CPU_S] for r in trained) < cpu
    assert ms.PERF_STEP_TIME_S not in rows[0] and ms.PERF_STEP_CPU_S not in rows[0]  # step 0 trains nothing


# --- a run whose weights diverged (trainer.py:238) ----------------------------------------------------------------

def _exit_codes(run_dir) -> list[int]:
    """The exit records of the run's .wandb files, read with the independent reader (tests/support)."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb_reference import records

    codes = []
    for path in sorted({p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")}):
        for data in records(path):
            rec = pb.Record()
            rec.ParseFromString(data)
            if rec.WhichOneof("record_type") == "exit":
                codes.append(rec.exit.exit_code)
    return codes


def test_a_run_whose_logits_are_not_finite_ends_failed_in_w_and_b_and_the_reports(tmp_path, nan_after_update):
    """Step 1's update leaves NaN weights, step 2's rollout fails (Diverged): the W&B exit record says failed
    (a clean one reads as "finished", and the reports took the run for one stopped before its last step)."""
    import yaml

    from arctl.launch.job import failure_line
    from arctl.report.cells import finished_run, unfinished
    from arctl.track.runs import load_runs

    config = _config("main-grpo", "trainer.total_steps=4")
    root = tmp_path / "ws"
    run_dir = root / "runs" / "diverged"
    run_dir.mkdir(parents=True)  # as a launch leaves it: the reader finds runs by their config.yaml
    (run_dir / "config.yaml").write_text(yaml.safe_dump({**config, "run_id": "diverged"}))
    with pytest.raises(Exception) as failed:
        trainer.train(config, run_dir, threading.Event())
    assert failure_line(failed.value, run_dir).startswith("Diverged: step 2: ")
    wandb.teardown()  # finish() can return before wandb-core has closed the file
    assert _exit_codes(run_dir) == [1]
    table = load_runs(root, progress=False, cache_dir=root / "cache").runs
    (rec,) = table.to_dict("records")
    assert rec["state"] == "failed" and not finished_run(rec)
    assert unfinished(table) == ["diverged (failed at step 1 of 4)"]

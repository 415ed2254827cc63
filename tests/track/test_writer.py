"""arctl.track.writer: the W&B conventions trainers rely on."""

import pytest

from arctl.track.writer import open_run, wandb_init_kwargs


def _config(**extra):
    return {"experiment": "ablation-vr", "arm": "grpo-vr", "seed": 2, "run_id": "r1",
            "wandb": {"project": "p", "mode": "offline"}, **extra}


def test_init_kwargs_follow_the_conventions(tmp_path):
    kw = wandb_init_kwargs(_config(), tmp_path)
    assert kw["project"] == "p" and kw["group"] == "ablation-vr" and kw["name"] == "grpo-vr-s2"
    assert kw["dir"] == str(tmp_path / "wandb") and kw["mode"] == "offline"
    assert kw["id"] == "r1" and kw["resume"] == "allow"
    assert kw["config"]["arm"] == "grpo-vr"
    sweep = _config(wandb={"project": "p", "group": "priors"})
    assert wandb_init_kwargs(sweep, tmp_path)["group"] == "priors"
    assert wandb_init_kwargs({"arm": "a", "seed": 0}, tmp_path)["mode"] == "offline"
    assert wandb_init_kwargs(_config(run_id="a/b c:d"), tmp_path)["id"] == "a-b-c-d"
    # the launcher's wandb.id (suffixed after a --force rerun) wins over the run id
    forced = _config(wandb={"project": "p", "id": "r1-g2"})
    assert wandb_init_kwargs(forced, tmp_path)["id"] == "r1-g2"
    with pytest.raises(ValueError, match="wandb.mode"):
        wandb_init_kwargs(_config(wandb={"mode": "cloud"}), tmp_path)


def test_open_run_sets_flush_interval_and_step_metric(tmp_path):
    from arctl.track.wandbfile import read_wandb_file

    run = open_run(_config(), tmp_path, flush_interval_s=1.5)
    try:
        assert run.settings.x_transaction_log_flush_interval == 1.5
        assert run.settings.mode == "offline"
        run.log({"trainer/global_step": 7, "train/loss": 0.25})
        run.summary["best/acc"] = 0.75  # a summary-only key, set explicitly
    finally:
        run.finish()
    import wandb

    wandb.teardown()
    (path,) = {p.resolve() for p in (tmp_path / "wandb").rglob("run-*.wandb")}
    data = read_wandb_file(path)
    assert data.name == "grpo-vr-s2" and data.group == "ablation-vr"
    assert data.column("train/loss").tolist() == [0.25]
    assert data.column("trainer/global_step").tolist() == [7]
    assert data.summary["best/acc"] == 0.75
    assert read_wandb_file(path, summary=False).summary["best/acc"] == 0.75  # from the summary tail


# --- resume: the synced W&B history holds every step exactly once (read by tests/support/wandb_reference.py) ---

def _row(step: int, attempt: int) -> dict:
    return {"trainer/global_step": step, "train/loss": step + attempt / 10}


def _attempt(tmp_path, steps, attempt, **kw):
    """One attempt of a job; it ends as a process would (W&B's service closes its file)."""
    import wandb

    run = open_run(_config(), tmp_path, **kw)
    for step in steps:
        run.log({**_row(step, attempt)}, step=step)
    run.finish()
    wandb.teardown()  # finish() can return before wandb-core has closed the file


def _synced(tmp_path):
    import wandb
    from wandb_reference import synced_history

    wandb.teardown()  # finish() can return before wandb-core has closed the file
    ids, rows = synced_history(tmp_path)
    return ids, [(r["trainer/global_step"], round(r["train/loss"] - r["trainer/global_step"], 3)) for r in rows]


def test_a_resume_past_the_checkpoint_rewinds_the_run_to_it(tmp_path):
    """kill -9 after step 6 was logged, checkpoint at 4: the next attempt rewinds to 4 and logs 5.."""
    from arctl.track.writer import last_logged_step

    _attempt(tmp_path, range(0, 7), attempt=1)
    assert last_logged_step(tmp_path) == 6
    history = [_row(s, 1) for s in range(0, 7)]
    _attempt(tmp_path, range(5, 9), attempt=2, resume_at=4, history=history)
    ids, rows = _synced(tmp_path)
    assert ids == {"r1"}
    assert rows == [(s, 0.1) for s in range(0, 5)] + [(s, 0.2) for s in range(5, 9)]
    assert last_logged_step(tmp_path) == 8  # arctl's own reader applies the rewind too


def test_rows_the_w_and_b_service_lost_are_relogged_from_the_run_history(tmp_path):
    """The W&B service died with the job's TERM after step 3; the checkpoint (and metrics.jsonl) reached 5."""
    _attempt(tmp_path, range(0, 4), attempt=1)
    history = [_row(s, 1) for s in range(0, 6)]
    _attempt(tmp_path, range(6, 8), attempt=2, resume_at=5, history=history)
    _, rows = _synced(tmp_path)
    assert rows == [(s, 0.1) for s in range(0, 6)] + [(s, 0.2) for s in range(6, 8)]


def test_a_restart_moves_the_files_of_an_attempt_that_kept_nothing_aside(tmp_path):
    _attempt(tmp_path, range(0, 3), attempt=1)
    _attempt(tmp_path, range(0, 2), attempt=2, restart=True)
    _, rows = _synced(tmp_path)
    assert rows == [(0, 0.2), (1, 0.2)]
    assert list((tmp_path / "wandb-discarded").rglob("run-*.wandb"))


def test_the_independent_reader_sees_duplicates_without_the_rewind(tmp_path):
    """The fault the rewind fixes, as every W&B reader but arctl's sees it: a plain resume logs 5..6 twice."""
    _attempt(tmp_path, range(0, 7), attempt=1)
    _attempt(tmp_path, range(5, 9), attempt=2)
    with pytest.raises(AssertionError, match="_step 5 logged twice"):
        _synced(tmp_path)


def test_a_first_attempt_whose_service_died_before_writing_any_row_is_relogged_whole(tmp_path):
    """Seen on the real SLURM: TERM at step 6 killed wandb-core before it wrote a single history row."""
    _attempt(tmp_path, [], attempt=1)  # a fragment with a run record and no history
    history = [_row(s, 1) for s in range(0, 7)]
    _attempt(tmp_path, range(7, 9), attempt=2, resume_at=6, history=history)
    _, rows = _synced(tmp_path)
    assert rows == [(s, 0.1) for s in range(0, 7)] + [(7, 0.2), (8, 0.2)]

"""arctl.track.writer: the W&B conventions trainers rely on."""

import json

import pytest

from arctl.track.writer import close_run, open_run, wandb_init_kwargs


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


def test_the_runs_notes_reach_wandb_in_both_renderings(tmp_path):
    """``wandb.notes`` (free text, several lines): ``wandb.init(notes=...)`` for the tiny backend, and
    ``WANDB_NOTES`` for verl's tracker; the run's .wandb file holds them."""
    from arctl.track.identity import WandbIdentity

    notes = "why: lam=0.7\nsecond line; $(not run)"
    config = _config(wandb={"project": "p", "mode": "offline", "notes": notes})
    assert wandb_init_kwargs(config, tmp_path)["notes"] == notes
    assert wandb_init_kwargs(_config(), tmp_path)["notes"] is None
    assert WandbIdentity.from_config(config, tmp_path).env()["WANDB_NOTES"] == notes
    assert "WANDB_NOTES" not in WandbIdentity.from_config(_config(), tmp_path).env()
    close_run(open_run(config, tmp_path))
    (path,) = {p.resolve() for p in (tmp_path / "wandb").rglob("run-*.wandb")}
    assert notes.encode() in path.read_bytes()


def test_an_evaluation_only_identity_is_named_and_typed_so_and_read_back_as_its_cell():
    """A run that evaluates a checkpoint only: ``{arm}-s{seed}-eval``, job type ``eval`` in both renderings (the
    schema's default name gets the suffix; a name of one's own does not); a W&B run without an arctl config whose
    name is such a name is still read as its (arm, seed)."""
    from arctl.track.identity import WandbIdentity
    from arctl.track.runs.discover import run_identity

    named = _config(wandb={"project": "p", "name": "grpo-vr-s2"})  # as every composed config holds it
    ident = WandbIdentity.from_config(named, "/r", evaluates=True)
    assert ident.name == "grpo-vr-s2-eval" and ident.env()["WANDB_JOB_TYPE"] == "eval"
    assert ident.init_kwargs({})["job_type"] == "eval" and ident.init_kwargs({})["name"] == "grpo-vr-s2-eval"
    train = WandbIdentity.from_config(named, "/r")
    assert train.name == "grpo-vr-s2" and "WANDB_JOB_TYPE" not in train.env() and train.init_kwargs({})["job_type"] == "train"
    own = _config(wandb={"project": "p", "name": "mine"})
    assert WandbIdentity.from_config(own, "/r", evaluates=True).name == "mine"
    assert run_identity({}, "grpo-vr-s2-eval")[1:] == ("grpo-vr", 2)
    assert run_identity({}, "grpo-vr-s2")[1:] == ("grpo-vr", 2)


def test_the_command_line_of_the_process_is_not_recorded_in_the_run(tmp_path, monkeypatch):
    """From an audit: W&B records ``sys.argv[1:]`` in the run's metadata, and a debug job trains inside the
    ``arctl`` command, whose arguments are what the user typed (a secret given in an override that a later one
    replaced). The arguments are kept from W&B and restored after."""
    import sys

    marker = "argvMARKER0123456789abcdef"
    monkeypatch.setattr(sys, "argv", ["arctl", "run", "x", f"wandb.notes={marker}", "wandb.notes=x"])
    close_run(open_run(_config(), tmp_path))
    assert sys.argv[3] == f"wandb.notes={marker}"
    files = [p for p in (tmp_path / "wandb").rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files)
    assert not [p for p in files if marker.encode() in p.read_bytes()]


def test_open_run_sets_flush_interval_and_step_metric(tmp_path):
    from arctl.track.wandbfile import read_wandb_file

    run = open_run(_config(), tmp_path, flush_interval_s=1.5)
    try:
        assert run.settings.x_transaction_log_flush_interval == 1.5
        assert run.settings.mode == "offline"
        run.log({"trainer/global_step": 7, "train/loss": 0.25})
        run.summary["best/acc"] = 0.75  # a summary-only key, set explicitly
    finally:
        close_run(run)
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
    """One attempt of a job, closed as trainers close theirs: its file is complete when this returns."""
    run = open_run(_config(), tmp_path, **kw)
    for step in steps:
        run.log({**_row(step, attempt)}, step=step)
    close_run(run)


def _synced(tmp_path):
    from wandb_reference import synced_history

    ids, rows = synced_history(tmp_path)
    return ids, [(r["trainer/global_step"], round(r["train/loss"] - r["trainer/global_step"], 3)) for r in rows]


def test_a_resume_past_the_checkpoint_rewinds_the_run_to_it(tmp_path):
    """kill -9 after step 6 was logged, checkpoint at 4: the next attempt rewinds to 4 and logs 5.."""
    _resume_past_the_checkpoint(tmp_path)


def test_the_rewind_works_under_a_verl_jobs_w_and_b_environment(tmp_path, monkeypatch):
    """A verl job exports WANDB_RESUME=allow (and WANDB_RUN_ID) for verl's own tracker; W&B refuses it
    beside ``resume_from`` (found when a two-node verl run was resumed after scancel): the rewind of
    arctl's repair goes through and the environment is left as it was."""
    monkeypatch.setenv("WANDB_RESUME", "allow")
    monkeypatch.setenv("WANDB_RUN_ID", "r1")
    _resume_past_the_checkpoint(tmp_path)
    import os

    assert os.environ["WANDB_RESUME"] == "allow"


def test_a_resume_on_a_slow_w_and_b_service_of_another_process_reads_complete_files(tmp_path, foreign_slow_service):
    """The CI failure of the test above, in the nested suite of tests/test_fresh_machine.py: that suite
    inherited the outer pytest's WANDB_SERVICE, so wandb.teardown() did not wait for wandb-core, which
    had not yet written the second attempt's file (7 bytes) when it was read."""
    _resume_past_the_checkpoint(tmp_path)


def _resume_past_the_checkpoint(tmp_path):
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


def _fragment(path, start, steps, attempt, rewind=None):
    """A .wandb file as wandb-core writes one attempt: its run record, then a history row per step."""
    import json

    from wandb.proto import wandb_internal_pb2 as pb
    from wandb_workspace import frame_records

    run = pb.Record()
    run.run.run_id, run.run.start_time.seconds = "r1", start
    if rewind is not None:
        run.run.branch_point.run, run.run.branch_point.metric, run.run.branch_point.value = "r1", "_step", rewind
    records = [run.SerializeToString()]
    for step in steps:
        rec = pb.Record()
        for key, value in {"_step": step, **_row(step, attempt)}.items():
            item = rec.history.item.add()
            item.key, item.value_json = key, json.dumps(value)
        records.append(rec.SerializeToString())
    path.parent.mkdir(parents=True)
    path.write_bytes(frame_records(records))


def test_attempts_with_the_same_start_time_are_read_in_w_and_b_s_order_not_the_path_s(tmp_path):
    """Two attempts started in one second: W&B names the second one's folder ``...-<id>-1``, which a path
    sort puts first ('-' < '/'). Were their start times equal, both readers still apply it second."""
    from arctl.track.runs import stitch_fragments
    from arctl.track.wandbfile import read_wandb_file

    first = "offline-run-20260101_120000-r1"
    _fragment(tmp_path / "wandb" / "wandb" / first / "run-r1.wandb", 1767268800, range(0, 7), attempt=1)
    _fragment(tmp_path / "wandb" / "wandb" / f"{first}-1" / "run-r1.wandb", 1767268800, range(5, 9), attempt=2,
              rewind=4)
    assert sorted(str(p) for p in tmp_path.rglob("run-*.wandb"))[0].endswith("-r1-1/run-r1.wandb")
    expected = [(s, 0.1) for s in range(0, 5)] + [(s, 0.2) for s in range(5, 9)]
    assert _synced(tmp_path)[1] == expected
    wide, _ = stitch_fragments([read_wandb_file(p) for p in tmp_path.rglob("run-*.wandb")])
    assert [(s, round(v - s, 3)) for s, v in wide["train/loss"].items()] == expected


def test_a_long_run_id_and_its_reruns_keep_distinct_w_and_b_ids_in_every_rendering(tmp_path):
    """W&B takes 64 characters: a run id of a long experiment name (or a large seed) and its --force reruns
    were cut to one id (``...-g`` for g1 and g2), and verl's ``WANDB_RUN_ID`` kept the uncut id (from a
    review). Now one id per run and generation, the same in wandb.init, verl's environment and the registry."""
    from arctl.launch.registry import RunRecord
    from arctl.launch.run_id import make_run_id
    from arctl.track.identity import ID_MAX_CHARS, WandbIdentity

    base = {"experiment": "budget-prior-ablation-uniform-vs-linear", "arm": "grpo-decoupled", "seed": 2**31 - 1}
    run_id = make_run_id(base)
    assert len(run_id) > ID_MAX_CHARS
    ids = []
    for generation in (0, 1, 2, 12):
        record = RunRecord(run_id=run_id, experiment="e", arm="a", seed=0, generation=generation)
        frozen = {**base, "run_id": run_id, "wandb": {"mode": "offline", "id": record.wandb_run_id}}
        kw = wandb_init_kwargs(frozen, tmp_path)
        assert kw["id"] == record.wandb_run_id == WandbIdentity.from_config(frozen, tmp_path).env()["WANDB_RUN_ID"]
        assert len(kw["id"]) <= ID_MAX_CHARS and kw["id"].startswith(run_id[:40])
        ids.append(kw["id"])
    assert len(set(ids)) == 4
    # without the launcher's wandb.id: the run id itself, shortened the same way, and two seeds stay apart
    other = make_run_id({**base, "seed": 2**31 - 2})
    assert (wandb_init_kwargs({**base, "run_id": run_id}, tmp_path)["id"]
            != wandb_init_kwargs({**base, "run_id": other}, tmp_path)["id"])
    assert wandb_init_kwargs({**base, "run_id": run_id}, tmp_path)["id"] == ids[0]


def test_an_online_resume_that_w_and_b_will_not_rewind_goes_on_without_the_rewind(tmp_path, monkeypatch):
    """W&B's rewind (``resume_from``) is a private preview, absent from self-managed servers (a review): an
    online run's resume failed at wandb.init on every requeue. It resumes without the rewind, with a warning;
    an offline run (arctl's default) still fails loudly on such an error."""
    import wandb

    calls = []

    def server_without_rewind(**kwargs):
        calls.append(kwargs)
        if "resume_from" in kwargs:
            raise wandb.errors.CommError("rewind is not enabled for this entity")
        return type("Run", (), {"define_metric": lambda *a, **k: None, "log": lambda *a, **k: None})()

    monkeypatch.setattr(wandb, "init", server_without_rewind)
    monkeypatch.setattr("arctl.track.writer.last_logged_step", lambda run_dir: 6)
    history = [{"trainer/global_step": s, "train/loss": float(s)} for s in range(5)]
    with pytest.warns(UserWarning, match="refused to rewind run r1 to step 4"):
        open_run(_config(wandb={"mode": "online"}), tmp_path, resume_at=4, history=history)
    assert [("resume_from" in c, c.get("resume")) for c in calls] == [(True, None), (False, "allow")]
    with pytest.raises(wandb.errors.CommError):
        open_run(_config(wandb={"mode": "offline"}), tmp_path, resume_at=4, history=history)


def test_the_generation_of_a_long_run_ids_w_and_b_id_is_recognised(tmp_path):
    """From a review of the shortened ids: `arctl repair` read the --force generation from `<run_id>-g<N>`, which a
    long run id's W&B id no longer ends in: rebuilt as generation 0, its next rerun reused g1's W&B id."""
    from arctl.launch.repair import rebuild_registry
    from arctl.launch.run_id import make_run_id
    from arctl.launch.workspace import Workspace
    from arctl.track.identity import wandb_generation, wandb_id

    long_id = make_run_id({"experiment": "budget-prior-ablation-uniform-vs-linear", "arm": "grpo-decoupled",
                           "seed": 2**31 - 1})
    for rid in (long_id, "r1"):
        assert [wandb_generation(rid, wandb_id(f"{rid}-g{n}" if n else rid)) for n in (0, 1, 2, 37)] == [0, 1, 2, 37]
    assert wandb_generation("r1", "r2-g1") is None
    ws = Workspace(tmp_path / "ws")
    ws.run_dir(long_id).mkdir(parents=True)
    (ws.run_dir(long_id) / "config.yaml").write_text(
        f"experiment: e\narm: a\nseed: 0\nrun_id: {long_id}\nwandb: {{id: {wandb_id(long_id + '-g2')}}}\n")
    (done,) = rebuild_registry(ws).runs
    assert done.generation == 2


def test_a_resume_that_turns_w_and_b_on_logs_the_kept_steps_first(tmp_path):
    """From a hunt: a verl run whose earlier attempts ran with wandb.mode=disabled (no W&B files), resumed at
    its step-4 checkpoint with W&B on (the launcher accepts it). repair_history returned on finding no files,
    and verl's tracker, resuming the run, logged from step 5: the history started after the checkpoint. The
    kept rows (metrics.jsonl) are logged first now."""
    from arctl.track.writer import repair_history

    history = [_row(s, 1) for s in range(1, 5)]
    repair_history(_config(), tmp_path, 4, history)
    _attempt(tmp_path, range(5, 7), attempt=2)  # verl's tracker: resume="allow", from the next step
    _, rows = _synced(tmp_path)
    assert rows == [(s, 0.1) for s in range(1, 5)] + [(5, 0.2), (6, 0.2)]
    repair_history(_config(), tmp_path / "fresh", None, ())  # a run starting over with no files: nothing written
    assert not list((tmp_path / "fresh").rglob("run-*.wandb"))


def test_a_resume_finds_the_first_step_its_records_lost(tmp_path):
    """history_gap: the first step up to the checkpoint that neither the W&B files (up to the rewind) nor the run's
    metrics file hold (from a hunt: a node lost after the step-4 checkpoint took rows 3..4 from both). verl's
    prepare_attempt still refuses a resume from that checkpoint in one line, writing no W&B fragment, should a caller
    ask for one (both backends choose an older checkpoint first: tests/tiny/test_crash_history.py,
    tests/verl/test_lost_rows_resume.py)."""
    from arctl.backends.verl.history import prepare_attempt
    from arctl.track.writer import METRICS_FILE, history_gap

    _attempt(tmp_path, range(0, 3), attempt=1)
    rows = [_row(s, 1) for s in range(0, 5)]
    assert history_gap(_config(), tmp_path, 4, rows[:3]) == 3
    assert history_gap(_config(), tmp_path, 4, rows[:3] + rows[4:]) == 3
    assert history_gap(_config(), tmp_path, 4, rows) is None
    assert history_gap(_config(), tmp_path, 4, rows[3:]) is None  # W&B holds 0..2, the file 3..4
    assert history_gap(_config(), tmp_path, 2, []) is None
    disabled = _config(wandb={"mode": "disabled"})  # the W&B files are not the run's record then
    assert history_gap(disabled, tmp_path, 4, rows[3:]) == 1
    assert history_gap(disabled, tmp_path, 4, rows[1:]) is None  # no step 0 anywhere: the run logs from 1
    assert history_gap(disabled, tmp_path, 4, rows[1:], first=0) == 0

    (tmp_path / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    files = sorted((tmp_path / "wandb").rglob("run-*.wandb"))
    with pytest.raises(ValueError) as refused:
        prepare_attempt(_config(), tmp_path, 4)
    line = str(refused.value)
    assert "\n" not in line and "step 3's row is in neither" in line and "global_step_4 aside" in line, line
    assert sorted((tmp_path / "wandb").rglob("run-*.wandb")) == files

"""End to end at micro scale: every experiment's arms train 3 steps and leave a readable offline W&B
run with the schema's keys; a run stopped after one step and resumed equals the uninterrupted run."""

import json
import threading
from functools import cache

import pytest
import wandb
from micro import MICRO, micro_for  # noqa: E402 - tests/support/micro.py (shared with the real-SLURM tests)
from resolved import arm_config, experiment_arms  # noqa: E402 - tests/support/resolved.py

from arctl.backends.tiny.trainer import train
from arctl.compose import resolve_experiment
from arctl.compose.experiment import list_experiments
from arctl.track import metrics_schema as ms
from arctl.track.wandbfile import read_wandb_file

TRAIN_KEYS = [ms.TRAIN_THINK_LEN_MEAN, ms.TRAIN_ANYTIME_SCORE, ms.TRAIN_FINAL_SCORE, ms.TRAIN_REWARD_MEAN,
              ms.TRAIN_LOSS, ms.TRAIN_ENTROPY, ms.PERF_STEP_TIME_S, ms.PERF_STEP_CPU_S] + [ms.train_adv_var(k) for k in ms.ADV_VAR_KINDS]
ALGO_SECTIONS = ("thinking", "summary", "reward", "rollout", "optim", "data", "eval", "budget_control")


@cache
def _distinct_runs() -> dict[tuple[str, str], tuple[str, str]]:
    """(experiment, arm) -> the first (experiment, arm) with the same algorithm config at micro scale
    (e.g. the `grpo` arm shared by several experiments runs once). Composed at the first test, not
    at collection."""
    seen, out = {}, {}
    for name, arm in experiment_arms():
        config = arm_config(name, arm, overrides=micro_for(name))
        key = json.dumps({k: config[k] for k in ALGO_SECTIONS}, sort_keys=True)
        out[(name, arm)] = seen.setdefault(key, (name, arm))
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return tmp_path_factory.mktemp("ws")


def test_every_experiment_has_a_micro_run():
    names = {first[0] for first in _distinct_runs().values()}
    assert set(list_experiments()) - names <= {n for n in list_experiments() if n.startswith("main-")}


@pytest.mark.parametrize("name,arm", [pytest.param(n, a, id=f"{n}/{a}") for n, a in experiment_arms()])
def test_micro_run_writes_schema_keys(name, arm, workspace):
    first = _distinct_runs()[(name, arm)]
    if first != (name, arm):
        pytest.skip(f"the same algorithm config as {first[0]}/{first[1]}, which runs")
    config = arm_config(name, arm, overrides=micro_for(name))
    run_dir = workspace / "runs" / f"{config['experiment']}-{config['arm']}"
    assert train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()  # finish() can return before wandb-core has closed the file
    files = sorted({p.resolve() for p in (run_dir / "wandb").rglob("run-*.wandb")})
    assert files, "no offline .wandb file written"
    data = read_wandb_file(files[0])
    assert data.state == "finished" and not data.warnings, (files, data.state, data.warnings, data.exit_code)
    assert data.name == f"{config['arm']}-s{config['seed']}" and data.group == config["experiment"]
    assert data.config["thinking"]["budgets"] == config["thinking"]["budgets"]
    steps = list(data.column(ms.STEP_KEY))
    assert steps == [0, 1, 2, 3]
    budgets = config["thinking"]["budgets"]
    for key in TRAIN_KEYS + [ms.train_score(b) for b in budgets]:
        col = data.column(key)
        assert (col[1:] == col[1:]).all(), f"{key} missing at a training step"  # not NaN
    grid = config["eval"]["grid"]
    for key in [ms.eval_acc("toy", b) for b in grid] + [ms.eval_anytime_acc("toy"), ms.eval_final_acc("toy"),
                                                       ms.eval_think_len("toy"), ms.eval_chance_acc("toy")]:
        col = data.column(key)
        assert col[0] == col[0] and col[3] == col[3], f"{key} missing at an evaluation"
    # the final evaluation (step 3) covers the grid: both anytime accuracies, by their definitions
    last = {k: data.column(k)[3] for k in data.keys}
    assert last[ms.eval_grid_anytime_acc("toy")] == pytest.approx(
        sum(last[ms.eval_acc("toy", b)] for b in grid) / len(grid))
    eval_budgets = config["eval"]["budgets"]
    assert last[ms.eval_anytime_acc("toy")] == pytest.approx(
        sum(last[ms.eval_acc("toy", b)] for b in eval_budgets) / len(eval_budgets))
    # the score-curve summaries over the grid, from the logged acc@b: flat at acc(b_1) on [0, b_1],
    # trapezoids between grid budgets, divided by b_m; acc_at_frac interpolates at f * b_m
    acc = [last[ms.eval_acc("toy", b)] for b in grid]
    area = grid[0] * acc[0] + sum((b1 - b0) * (a0 + a1) / 2 for b0, b1, a0, a1 in zip(grid, grid[1:], acc, acc[1:]))
    assert last[ms.eval_curve_auc("toy")] == pytest.approx(area / grid[-1])
    for f in ms.ACC_FRACTIONS:
        x = f * grid[-1]
        j = next(j for j, b in enumerate(grid) if b >= x)
        want = acc[0] if j == 0 else acc[j - 1] + (x - grid[j - 1]) / (grid[j] - grid[j - 1]) * (acc[j] - acc[j - 1])
        assert last[ms.eval_acc_at_frac("toy", f)] == pytest.approx(want)
    # a summary of the grid: logged by the step-0 evaluation (of eval.budgets) only if that covers the grid
    covered = set(grid) <= set(eval_budgets)
    for key in [ms.eval_curve_auc("toy")] + [ms.eval_acc_at_frac("toy", f) for f in ms.ACC_FRACTIONS]:
        assert (data.column(key)[0] == data.column(key)[0]) == covered, key  # NaN where not logged
    for key in [ms.eval_corr(k, "toy", grid[-1]) for k in ms.CORR_KINDS] + [
        ms.eval_nvar(k, "toy", grid[-1]) for k in ms.NVAR_KINDS
    ]:
        assert key in data.keys
    if config["budget_control"]["method"] == "thinkprune":  # the round's limit, logged at every step
        limits, round_k = config["budget_control"]["thinkprune_limits"], config["budget_control"]["thinkprune_round"]
        rounds = [round_k - 1] * 3 if round_k else [0, 1, 2]  # a run of one round, or three rounds in 3 steps
        assert list(data.column(ms.TRAIN_THINK_LIMIT)[1:]) == [float(limits[k]) for k in rounds]
    if config["optim"]["kl_coef"] > 0:  # L1's arms: the KL to the weights the run started from
        kl = list(data.column(ms.TRAIN_KL)[1:])
        assert kl[0] == 0.0 and all(v >= 0 for v in kl), kl  # step 1 samples with the reference's own weights
        assert all(v == v for v in data.column(ms.TRAIN_KL_LOSS)[1:])
    else:
        assert ms.TRAIN_KL not in data.keys
    assert (run_dir / "checkpoints").is_dir()
    # what the run started from: the warm-up's weights hash and accuracy per eval budget, on disk and in W&B
    warm = json.loads((run_dir / "warmup.json").read_text())
    assert len(warm["weights_sha256"]) == 64 and warm["key"]
    assert sorted(int(b) for b in warm["accuracy_per_budget"]) == sorted(eval_budgets)
    assert warm["accuracy"] == warm["accuracy_per_budget"][str(max(eval_budgets))]
    assert data.config["warmup"]["weights_sha256"] == warm["weights_sha256"]
    from arctl.backends.tiny.warmup_key import measure_settings

    # ...and the settings that accuracy was measured under
    assert warm["accuracy_eval"] == data.config["warmup"]["accuracy_eval"] == measure_settings(config)
    # where it trained: the kind of machine, on disk and in W&B
    from arctl.backends.tiny.warmup import machine_kind

    assert json.loads((run_dir / "machine.json").read_text()) == {"kinds": [machine_kind()]}
    assert data.config["machine"] == machine_kind()


class StopAfter(threading.Event):
    """A stop event that reads as set from its k-th check on: the trainer checks once per step."""

    def __init__(self, k: int):
        super().__init__()
        self.k, self.checks = k, 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.k


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in (ms.PERF_STEP_TIME_S, ms.PERF_STEP_CPU_S)} for r in rows]


@pytest.mark.parametrize("extra", [[], ["optim.kl_coef=0.05"]], ids=["plain", "kl"])
def test_kill_and_resume_equals_uninterrupted(workspace, extra):
    """With a KL term the resumed run's reference is still the warm-up, not the checkpoint it resumes
    from: its train/kl and train/kl_loss equal the uninterrupted run's."""
    config = resolve_experiment("main-ar-uniform", overrides=[*MICRO, *extra])[0].config
    full = workspace / "runs" / f"resume-full{len(extra)}"
    assert train(config, full, threading.Event()) == "completed"
    cut = workspace / "runs" / f"resume-cut{len(extra)}"
    assert train(config, cut, StopAfter(1)) == "preempted"
    assert [r[ms.STEP_KEY] for r in _rows(cut)] == [0, 1]
    assert train(config, cut, threading.Event()) == "completed"
    a, b = _rows(full), _rows(cut)
    assert [r[ms.STEP_KEY] for r in b] == [0, 1, 2, 3]
    for ra, rb in zip(a, b, strict=True):  # the uninterrupted run has every row too
        assert ra.keys() == rb.keys()
        for key in ra:
            va, vb = ra[key], rb[key]
            assert (va != va and vb != vb) or abs(va - vb) <= 1e-6, (ra[ms.STEP_KEY], key, va, vb)
    assert len({p.resolve() for p in (cut / "wandb").rglob("run-*.wandb")}) >= 2  # one W&B fragment per attempt
    if extra:
        assert all(ms.TRAIN_KL in r for r in b[1:]) and b[1][ms.TRAIN_KL] == 0 and b[3][ms.TRAIN_KL] > 0


@pytest.mark.slow  # a full warm-up in a process
def test_a_stop_during_the_warmup_preempts_and_caches_nothing(tmp_path):
    from arctl.backends.tiny.warmup import warmup_dir

    config = resolve_experiment("main-grpo", overrides=[*MICRO, "tiny.warmup.steps=6", "tiny.warmup.seed=99"])[0].config
    run_dir = tmp_path / "runs" / "stopped"
    assert train(config, run_dir, StopAfter(3)) == "preempted"
    cache = warmup_dir(config)
    assert not (cache / "warmup.json").exists() and not (run_dir / "metrics.jsonl").exists()
    assert train(config, run_dir, threading.Event()) == "completed"
    assert (cache / "warmup.json").exists()


def _synced_steps(run_dir):
    import wandb as _wandb
    from wandb_reference import synced_history

    _wandb.teardown()
    ids, rows = synced_history(run_dir)
    return ids, [r["trainer/global_step"] for r in rows], rows


def test_a_run_killed_after_logging_past_its_checkpoint_resumes_with_every_step_once(tmp_path):
    """kill -9 after step 3 was logged but before its checkpoint: the resumed run redoes step 3 and
    the synced W&B history (independent reader) holds 0..3 once each, under one W&B id."""
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    run_dir = tmp_path / "killed"
    assert train(config, run_dir, threading.Event()) == "completed"
    (run_dir / "checkpoints" / "step_000003.pt").unlink()  # the kill came before the step-3 checkpoint was written
    assert train(config, run_dir, threading.Event()) == "completed"
    ids, steps, rows = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == [0, 1, 2, 3]
    assert [r[ms.STEP_KEY] for r in _rows(run_dir)] == [0, 1, 2, 3]
    jsonl = {r[ms.STEP_KEY]: r for r in _rows(run_dir)}
    assert all(abs(r[ms.TRAIN_LOSS] - jsonl[r[ms.STEP_KEY]][ms.TRAIN_LOSS]) < 1e-9 for r in rows if r[ms.STEP_KEY])


@pytest.mark.parametrize("order", ["already", "during", "before"])
def test_a_w_and_b_service_killed_by_the_stop_signal_loses_neither_checkpoint_nor_steps(tmp_path, monkeypatch, order):
    """scancel's TERM reaches wandb-core and the job in any order, and then every W&B call fails
    (ConnectionResetError): the stop may be set before step 1's W&B call ("already"), while it is in
    flight ("during"), or only after it failed ("before": the service died first; the stop comes
    0.5 s later). Each time the step is checkpointed, the run ends preempted (not failed), and the
    resume re-logs the lost row from metrics.jsonl: every step once under one W&B id."""
    from wandb.sdk.wandb_run import Run

    from arctl.track import writer

    real_log, real_finish = writer.log_row, Run.finish
    stop = threading.Event()

    def dying_log(run, row):
        if row[ms.STEP_KEY] < 1:
            real_log(run, row)
            if order == "already":
                stop.set()  # the signal came during step 1 (its W&B call sees a set stop)
            return
        if order == "during":
            stop.set()
        elif not stop.is_set():
            threading.Timer(0.5, stop.set).start()
        raise ConnectionResetError("Connection lost")

    def dead_service_finish(self, *a, **k):
        real_finish(self, *a, **k)
        raise ConnectionResetError("Connection lost")

    monkeypatch.setattr(writer, "log_row", dying_log)
    monkeypatch.setattr(Run, "finish", dead_service_finish)
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    run_dir = tmp_path / "termed"
    assert train(config, run_dir, stop) == "preempted"
    assert [r[ms.STEP_KEY] for r in _rows(run_dir)] == [0, 1]
    assert (run_dir / "checkpoints" / "step_000001.pt").is_file()
    monkeypatch.setattr(writer, "log_row", real_log)
    monkeypatch.setattr(Run, "finish", real_finish)
    assert train(config, run_dir, threading.Event()) == "completed"
    ids, steps, _ = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == [0, 1, 2, 3]


@pytest.mark.parametrize("lost", ["row", "close"])
def test_a_stop_in_the_last_step_that_w_and_b_lost_is_preempted_and_the_resume_logs_the_final_row(
        tmp_path, monkeypatch, lost):
    """From a review: the TERM came in the last step and W&B lost its row (the final evaluation, Table 2's)
    or the run's close; the run ended "completed", which nothing resumes, so W&B (what reports read) never
    had the row. Now it ends preempted at the final checkpoint; the next attempt trains nothing, re-logs
    the row from metrics.jsonl and completes: every step once."""
    from wandb.sdk.wandb_run import Run

    from arctl.track import writer

    real_log, real_finish = writer.log_row, Run.finish
    stop = threading.Event()
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    total = config["trainer"]["total_steps"]

    def dying_log(run, row):
        if row[ms.STEP_KEY] == total:
            stop.set()
            if lost == "row":
                raise ConnectionResetError("Connection lost")
        real_log(run, row)

    def dead_service_finish(self, *a, **k):
        real_finish(self, *a, **k)
        raise ConnectionResetError("Connection lost")

    monkeypatch.setattr(writer, "log_row", dying_log)
    if lost == "close":
        monkeypatch.setattr(Run, "finish", dead_service_finish)
    run_dir = tmp_path / "last"
    assert train(config, run_dir, stop) == "preempted"
    assert [r[ms.STEP_KEY] for r in _rows(run_dir)] == list(range(total + 1))
    monkeypatch.setattr(writer, "log_row", real_log)
    monkeypatch.setattr(Run, "finish", real_finish)
    assert train(config, run_dir, threading.Event()) == "completed"
    ids, steps, rows = _synced_steps(run_dir)
    assert len(ids) == 1 and steps == list(range(total + 1))
    assert any(k.startswith("eval/") for k in rows[-1])  # the final evaluation reached W&B


def test_a_w_and_b_close_failure_without_a_stop_fails_the_run(tmp_path, monkeypatch):
    """The run's close failing with no stop is the run's error (it was printed and the run "completed",
    its W&B file without its end), raised as a lost row is."""
    from wandb.sdk.wandb_run import Run

    from arctl.backends import base

    real_finish = Run.finish

    def dead_service_finish(self, *a, **k):
        real_finish(self, *a, **k)
        raise ConnectionResetError("Connection lost")

    monkeypatch.setattr(Run, "finish", dead_service_finish)
    monkeypatch.setattr(base, "STOP_GRACE_S", 0.2)
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    with pytest.raises(ConnectionResetError, match="Connection lost"):
        train(config, tmp_path / "closed", threading.Event())


def test_a_w_and_b_failure_without_a_stop_fails_the_run(tmp_path, monkeypatch):
    """No stop within the grace: a lost W&B service is the run's error, raised (the job marks it
    failed), with the step still in metrics.jsonl for the next attempt."""
    from arctl.backends import base
    from arctl.track import writer

    real_log = writer.log_row

    def dead_service_log(run, row):
        if row[ms.STEP_KEY] >= 1:
            raise ConnectionResetError("Connection lost")
        real_log(run, row)

    monkeypatch.setattr(writer, "log_row", dead_service_log)
    monkeypatch.setattr(base, "STOP_GRACE_S", 0.2)
    config = resolve_experiment("main-ar-uniform", overrides=MICRO)[0].config
    run_dir = tmp_path / "lost"
    with pytest.raises(ConnectionResetError, match="Connection lost"):
        train(config, run_dir, threading.Event())
    assert [r[ms.STEP_KEY] for r in _rows(run_dir)] == [0, 1]


def test_budget_forcing_evaluates_every_run_twice(tmp_path):
    """budget_control.forcing_extensions > 0: each evaluation also runs with s1 budget forcing,
    logged under eval/toy-forced/; the unforced metrics equal those of the same run without it."""
    plain = arm_config("main-grpo", "grpo", overrides=MICRO)
    forced = arm_config("main-grpo", "grpo", overrides=[*MICRO, "budget_control.forcing_extensions=2"])
    rows = {}
    for name, config in (("plain", plain), ("forced", forced)):
        config["wandb"]["mode"] = "disabled"
        assert train(config, tmp_path / name, threading.Event()) == "completed"
        rows[name] = _rows(tmp_path / name)
    ds = ms.forced_dataset("toy")
    last = rows["forced"][-1]
    for b in forced["eval"]["grid"]:
        assert ms.eval_acc(ds, b) in last and 0.0 <= last[ms.eval_acc(ds, b)] <= 1.0
    assert last[ms.eval_think_len(ds)] >= 1.0 and ms.eval_curve_auc(ds) in last
    for key, value in rows["plain"][-1].items():
        if key.startswith("eval/"):
            assert last[key] == value or (value != value and last[key] != last[key]), key  # NaN: no variance


def test_a_stopped_or_failed_run_is_not_taken_for_a_finished_one_by_the_reports(workspace, monkeypatch):
    """From a hunt: a run stopped (preempted, cancelled) or failed closed its W&B run with a clean exit record,
    which the reports of final values took for a finished run, and its last evaluation, mid-training, for the
    final one (a table "from 1 run(s)" without a word). Now a failed run's record says failed (exit code 1),
    and a clean record short of trainer.total_steps is a run stopped before its last step."""
    import yaml

    from arctl.report.cells import finished_run, unfinished
    from arctl.track.runs import load_runs

    config = resolve_experiment("main-grpo", overrides=[*MICRO, "trainer.total_steps=4"])[0].config
    root = workspace / "finished-or-not"
    for name in ("stopped", "failed", "done"):  # as a launch leaves them: the reader finds runs by their config.yaml
        (root / "runs" / name).mkdir(parents=True)
        (root / "runs" / name / "config.yaml").write_text(yaml.safe_dump({**config, "run_id": name}))
    assert train(config, root / "runs" / "done", threading.Event()) == "completed"  # (the warm-up, made once)
    assert train(config, root / "runs" / "stopped", StopAfter(1)) == "preempted"

    import arctl.backends.tiny.trainer as tiny_trainer

    real = tiny_trainer.evaluate
    calls = []

    def broken(*args, **kwargs):  # the second evaluation (step 2) fails, after the first was logged
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a planted failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny_trainer, "evaluate", broken)
    with pytest.raises(RuntimeError, match="a planted failure"):
        train(config, root / "runs" / "failed", threading.Event())
    monkeypatch.setattr(tiny_trainer, "evaluate", real)

    table = load_runs(root, progress=False, cache_dir=root / "cache").runs
    by_id = {r["run_id"]: r for r in table.to_dict("records")}
    assert by_id["failed"]["state"] == "failed" and by_id["stopped"]["state"] == "finished"
    assert [finished_run(by_id[r]) for r in ("stopped", "failed", "done")] == [False, False, True]
    said = sorted(unfinished(table))
    assert said == ["failed (failed at step 1 of 4)", "stopped (stopped before its last step at step 1 of 4)"], said

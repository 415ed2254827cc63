"""train(): overrides -> verl's run_ppo in-process; W&B env without the key; stop_event -> preempted;
eval-only mode on the 32-budget grid; clear errors without data or GPUs."""

from __future__ import annotations

import copy
import json
import threading
import time

import pytest

from arctl.backends.verl import trainer as verl_trainer
from arctl.backends.verl.overrides import VerlConfigError


@pytest.fixture
def config(paper_config, tmp_path):
    cfg = copy.deepcopy(paper_config)
    cfg["verl"]["data_dir"] = str(tmp_path / "data")
    cfg["wandb"]["id"] = "abc123"
    for name, split in [("deepscaler", "train"), ("aime24", "test"), ("amc22", "test"), ("math500", "test"),
                        ("minerva", "test"), ("olympiadbench", "test")]:
        (tmp_path / "data" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / name / f"{split}.parquet").write_bytes(b"")
    return cfg


def test_missing_data_and_missing_gpu_are_one_line_errors(config, tmp_path, monkeypatch):
    cfg = copy.deepcopy(config)
    cfg["verl"]["data_dir"] = str(tmp_path / "nowhere")
    with pytest.raises(VerlConfigError, match="arctl data prepare") as info:
        verl_trainer.train(cfg, tmp_path / "run")
    assert "\n" not in str(info.value)
    monkeypatch.delenv(verl_trainer.ALLOW_CPU_ENV, raising=False)
    with pytest.raises(VerlConfigError, match="needs CUDA GPUs"):
        verl_trainer.train(config, tmp_path / "run")


def test_train_runs_verl_in_process_and_returns_preempted_on_stop(config, tmp_path, monkeypatch):
    import verl.trainer.main_ppo as main_ppo

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    monkeypatch.setenv("WANDB_API_KEY", "secret-xyz")
    run_dir = tmp_path / "run"
    stop = threading.Event()
    seen = {}

    def fake_run_ppo(cfg, task_runner_class):
        seen["cfg"], seen["runner"] = cfg, task_runner_class
        stop.set()  # the job is asked to stop while verl trains
        deadline = time.time() + 10
        while not (run_dir / "STOP").exists() and time.time() < deadline:
            time.sleep(0.05)
        seen["stop_file_seen"] = (run_dir / "STOP").exists()

    monkeypatch.setattr(main_ppo, "run_ppo", fake_run_ppo)
    assert verl_trainer.train(config, run_dir, stop) == "preempted"
    cfg = seen["cfg"]
    assert seen["runner"] is main_ppo.TaskRunnerV1 and seen["stop_file_seen"]
    assert cfg.trainer.default_local_dir == str(run_dir / "checkpoints")
    assert cfg.arctl.stop_file == str(run_dir / "STOP")
    env = dict(cfg.ray_kwargs.ray_init.runtime_env.env_vars)
    assert env["WANDB_DIR"] == str(run_dir / "wandb")
    assert env["WANDB_RUN_GROUP"] == "main-ar-uniform" and env["WANDB_RUN_ID"] == "abc123"
    assert "WANDB_API_KEY" not in env and "secret-xyz" not in str(cfg)
    # verl.block_size reaches the tree mask of every worker (from a review: it reached none)
    assert env["ARCTL_TREE_BLOCK_SIZE"] == str(config["verl"]["block_size"])
    assert (run_dir / "checkpoints").is_dir()


def test_train_returns_completed_without_stop(config, tmp_path, monkeypatch):
    import verl.trainer.main_ppo as main_ppo

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    monkeypatch.setattr(main_ppo, "run_ppo", lambda cfg, task_runner_class: None)
    assert verl_trainer.train(config, tmp_path / "run", threading.Event()) == "completed"


def test_a_stop_during_the_last_step_ends_the_run_completed_not_requeued(config, tmp_path, monkeypatch):
    """From a review: a stop request during the run's last step (SLURM's warning) made train() say
    "preempted" though verl had logged that step and its final evaluation: the job was requeued to an
    allocation that started Ray, loaded the models and ended at once. The trainer records the logged last
    step (FINISHED, :meth:`ArctlPPOTrainer._arctl_watch_logging`); train() then says completed, also when
    the shutdown after it fails or is abandoned. A stop before the last step still preempts."""
    import verl.trainer.main_ppo as main_ppo

    from arctl.backends.verl import stop_request

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    for ending in ("returns", "raises"):
        stop, run_dir = threading.Event(), tmp_path / ending

        def last_step_logged_under_a_stop(cfg, task_runner_class, stop=stop, ending=ending):
            stop.set()
            stop_request.mark_finished(cfg.arctl.stop_file, 100)  # what the trainer's logger does at the last step
            if ending == "raises":
                raise RuntimeError("the TaskRunner actor died")  # TERM reached Ray during the shutdown

        monkeypatch.setattr(main_ppo, "run_ppo", last_step_logged_under_a_stop)
        assert verl_trainer.train(config, run_dir, stop) == "completed", ending

    def error_a_moment_before_the_stop(cfg, task_runner_class):  # the stop_follows race: still completed
        stop_request.mark_finished(cfg.arctl.stop_file, 100)
        threading.Timer(0.3, stop.set).start()
        raise RuntimeError("the TaskRunner actor died")

    stop = threading.Event()
    monkeypatch.setattr(main_ppo, "run_ppo", error_a_moment_before_the_stop)
    assert verl_trainer.train(config, tmp_path / "race", stop) == "completed"

    def stopped_earlier(cfg, task_runner_class):
        stop.set()

    stop = threading.Event()
    (tmp_path / "again").mkdir()
    stop_request.mark_finished(tmp_path / "again" / "STOP", 100)  # an earlier attempt's: removed at the start
    monkeypatch.setattr(main_ppo, "run_ppo", stopped_earlier)
    assert verl_trainer.train(config, tmp_path / "again", stop) == "preempted"


def test_the_trainer_records_the_runs_last_logged_step(tmp_path):
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from arctl.backends.verl import stop_request
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    t = object.__new__(ArctlPPOTrainer)
    stop = tmp_path / stop_request.STOP_FILE
    t.config = OmegaConf.create({"arctl": {"stop_file": str(stop)}})
    t.total_training_steps, t.logger = 100, SimpleNamespace(log=lambda data, step: None)
    t._arctl_watch_logging()
    t.logger.log(data={}, step=99)
    assert not stop_request.finished(stop)
    t._arctl_last_step, t.total_training_steps = 100, 60  # a stop at 60 ends fit() there: not the run's end
    t.logger.log(data={}, step=60)
    assert not stop_request.finished(stop)
    t._arctl_last_step, t.total_training_steps = None, 100
    t.logger.log(data={}, step=100)
    assert stop_request.finished(stop)


def test_a_failure_a_moment_before_the_stop_request_still_preempts(config, tmp_path, monkeypatch):
    """scancel's TERM reaches Ray's workers and the job entry at once: verl's error (an actor that
    died) may come a few ms before the entry's handler sets the stop. The failure waits for the stop
    (arctl.backends.base.STOP_GRACE_S) and the run ends preempted; with no stop it is the run's error."""
    import verl.trainer.main_ppo as main_ppo

    from arctl.backends import base

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    stop = threading.Event()

    def dies_before_the_stop(cfg, task_runner_class):
        threading.Timer(0.5, stop.set).start()
        raise RuntimeError("the TaskRunner actor died")

    monkeypatch.setattr(main_ppo, "run_ppo", dies_before_the_stop)
    assert verl_trainer.train(config, tmp_path / "run", stop) == "preempted"

    def dies(cfg, task_runner_class):
        raise RuntimeError("the TaskRunner actor died")

    monkeypatch.setattr(main_ppo, "run_ppo", dies)
    monkeypatch.setattr(base, "STOP_GRACE_S", 0.2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="actor died"):
        verl_trainer.train(config, tmp_path / "run2", threading.Event())
    assert time.monotonic() - t0 >= 0.2


def test_eval_only_mode_uses_the_grid_and_final_datasets(config, tmp_path):
    cfg = copy.deepcopy(config)
    cfg["verl"]["eval_only"] = True
    cfg["verl"]["eval_checkpoint"] = "/ckpt/global_step_40"
    _, composed = verl_trainer.verl_run_config(cfg, tmp_path / "run")
    assert composed.trainer.val_only is True and composed.arctl.eval_only is True
    assert len(composed.arctl.eval_grid) == 32 and composed.arctl.eval_grid[-1] == 8000
    assert [p.split("/")[-2] for p in composed.data.val_files] == cfg["eval"]["final_datasets"]
    assert composed.trainer.resume_mode == "resume_path"
    assert composed.trainer.resume_from_path == "/ckpt/global_step_40"
    assert composed.actor_rollout_ref.rollout.val_kwargs.n == cfg["eval"]["n_samples"]
    from arctl.backends.verl.agent_loop import _budgets_for

    assert _budgets_for(composed.arctl, validate=True) == (list(cfg["eval"]["grid"]), 1)
    assert _budgets_for(composed.arctl, validate=False) == ([2000, 4000, 6000, 8000], 4)


def test_eval_only_of_the_model_itself_resumes_nothing(config, tmp_path):
    """verl.eval_checkpoint=model: model.path evaluated as it is, said on purpose (never by a
    resume_mode=auto that finds no checkpoint in the eval run's own run dir)."""
    cfg = copy.deepcopy(config)
    cfg["verl"].update(eval_only=True, eval_checkpoint="model")
    _, composed = verl_trainer.verl_run_config(cfg, tmp_path / "run")
    assert composed.trainer.val_only is True and composed.trainer.resume_mode == "disable"
    from arctl.backends.verl.overrides import config_problem

    assert config_problem(cfg) is None
    cfg["verl"]["eval_checkpoint"] = None
    assert "needs verl.eval_checkpoint" in config_problem(cfg)[0]


def test_an_eval_only_run_of_a_kl_arm_builds_no_reference_worker(config, tmp_path):
    """L1's arms train with a KL term (a reference worker: a second copy of the model); evaluating
    their checkpoint trains nothing, so verl is not asked for the reference."""
    from verl.trainer.ppo.utils import need_reference_policy

    cfg = copy.deepcopy(config)
    cfg["optim"]["kl_coef"] = 0.001
    _, train = verl_trainer.verl_run_config(cfg, tmp_path / "run")
    assert need_reference_policy(train) and train.actor_rollout_ref.actor.use_kl_loss
    cfg["verl"]["eval_only"] = True
    _, evaluate = verl_trainer.verl_run_config(cfg, tmp_path / "run")
    assert evaluate.trainer.val_only is True and not need_reference_policy(evaluate)


def test_stop_file_makes_the_trainer_checkpoint_and_end(tmp_path):
    from omegaconf import OmegaConf

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    t = ArctlPPOTrainer.__new__(ArctlPPOTrainer)
    t.config = OmegaConf.create({"arctl": {"stop_file": str(tmp_path / "STOP")}})
    saved = []
    t.checkpoint_manager = type("CM", (), {"update_weights": lambda self, step: None})()
    t.timing_raw = {}
    t._save_checkpoint = lambda: saved.append(t.global_steps)
    t.global_steps, t.total_training_steps = 7, 100
    t.on_step_end()
    assert saved == [] and t.total_training_steps == 100
    (tmp_path / "STOP").write_text("x")
    t.on_step_end()
    assert saved == [7] and t.total_training_steps == 7


def test_eval_metrics_follow_the_arctl_schema():
    from arctl.backends.verl.trainer_v1 import eval_metrics
    from arctl.track import metrics_schema as ms

    infos = {"score@250": [0, 1, 0, 0], "score@500": [1, 1, 0, 1], "think_len": [100, 300, 200, 400]}
    out = eval_metrics(["aime24"] * 4, ["q1", "q1", "q2", "q2"], infos, lam=0.5)
    assert out["eval/aime24/acc@250"] == pytest.approx(0.25)
    assert out["eval/aime24/acc@500"] == pytest.approx(0.75)
    assert out["eval/aime24/anytime_acc"] == pytest.approx(0.5)
    assert out["eval/aime24/final_acc"] == pytest.approx(0.75)
    assert out["eval/aime24/think_len"] == pytest.approx(250)
    assert "eval/aime24/nvar/brpo@500" in out and "eval/aime24/corr_v2@500" in out
    assert not any(k.endswith("curve_auc") or "acc_at_frac" in k for k in out)  # no grid, no eval budgets
    for key in out:
        assert ms.parse_metric(key) is not None, key
    # the grid [250, 500] evaluated: (250 * 0.25 + 250 * (0.25 + 0.75) / 2) / 500; at ACC_FRACTIONS
    # (0.25, 0.5) of 500: 125 (below b_1: flat at acc(250)) and 250
    grid = eval_metrics(["aime24"] * 4, ["q1", "q1", "q2", "q2"], infos, 0.5, [500], [250, 500])
    assert ms.ACC_FRACTIONS == (0.25, 0.5)
    assert grid["eval/aime24/curve_auc"] == pytest.approx(0.375, abs=1e-15)
    assert grid["eval/aime24/acc_at_frac/25"] == pytest.approx(0.25, abs=1e-15)
    assert grid["eval/aime24/acc_at_frac/50"] == pytest.approx(0.25, abs=1e-15)
    assert grid["eval/aime24/grid_anytime_acc"] == pytest.approx(0.5) and grid["eval/aime24/anytime_acc"] == 0.75
    # the budget-forcing pass (forced_ infos) is the dataset aime24-forced, without diagnostics
    forced = {**infos, "forced_score@250": [1, 1, 0, 0], "forced_score@500": [1, 1, 1, 1], "forced_think_len": [250] * 4}
    both = eval_metrics(["aime24"] * 4, ["q1", "q1", "q2", "q2"], forced, 0.5, [500], [250, 500])
    plain = {k: v for k, v in both.items() if "-forced" not in k}
    assert plain.keys() == grid.keys() and all(plain[k] == grid[k] or (plain[k] != plain[k] and grid[k] != grid[k]) for k in grid)
    assert both["eval/aime24-forced/acc@250"] == pytest.approx(0.5) and both["eval/aime24-forced/final_acc"] == 1.0
    assert both["eval/aime24-forced/think_len"] == 250 and both["eval/aime24-forced/curve_auc"] == pytest.approx(0.625)
    assert not any("-forced/nvar" in k or "-forced/corr" in k for k in both)


def test_the_variance_diagnostics_group_a_questions_samples_as_training_does():
    """Found by a review: verl grouped the diagnostics by the validation's samples per question
    (eval.n_samples, 32) where the tiny backend groups by rollout.n (8); V2 includes the sample itself,
    so corr(V2, R) and the GRPO variance depend on G. Four samples of a question in groups of two equal
    two questions of two samples each."""
    from arctl.backends.verl.trainer_v1 import eval_metrics

    infos = {"score@250": [0, 1, 1, 1, 0, 0, 1, 0], "score@500": [1, 1, 1, 0, 0, 1, 1, 1],
             "think_len": [100, 300, 260, 400, 120, 350, 280, 500]}
    in_twos = eval_metrics(["d"] * 8, ["q1"] * 4 + ["q2"] * 4, infos, 0.5, group_size=2)
    as_pairs = eval_metrics(["d"] * 8, ["a", "a", "b", "b", "c", "c", "e", "e"], infos, 0.5)
    in_fours = eval_metrics(["d"] * 8, ["q1"] * 4 + ["q2"] * 4, infos, 0.5)
    keys = [k for k in as_pairs if "nvar" in k or "corr" in k]
    assert keys and all(in_twos[k] == as_pairs[k] or (in_twos[k] != in_twos[k] and as_pairs[k] != as_pairs[k]) for k in keys)
    assert any(in_fours[k] != as_pairs[k] for k in keys if in_fours[k] == in_fours[k])
    # a group of one has no V2 but the sample itself: no diagnostics
    assert not any("nvar" in k for k in eval_metrics(["d"] * 8, ["q1"] * 4 + ["q2"] * 4, infos, 0.5, group_size=1))


def test_wandb_run_gets_step_metric_and_arctl_identity(tmp_path, monkeypatch):
    import wandb
    from omegaconf import OmegaConf

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    run = wandb.init(project="t", dir=str(tmp_path), config={"trainer": {"x": 1}})
    try:
        t = ArctlPPOTrainer.__new__(ArctlPPOTrainer)
        t.config = OmegaConf.create({"arctl": {"experiment": "main-ar-uniform", "arm": "ar-uniform", "seed": 3}})
        t._arctl_metric_defined = False
        t._define_step_metric()
        assert t._arctl_metric_defined
        assert run.config["experiment"] == "main-ar-uniform" and run.config["seed"] == 3
        assert run.config["trainer"] == {"x": 1}  # verl's own config left in place
    finally:
        run.finish()


def test_an_error_inside_verls_ray_actors_is_one_line_naming_the_calls(config, tmp_path, monkeypatch):
    """What the CPU end-to-end run met: the job's failure line was the head of Ray's traceback
    ('RayTaskError(AttributeError): ray::TaskRunnerV1.run() (pid=..) ^^^^ File ...'), the cause at its end."""
    import ray
    import verl.trainer.main_ppo as main_ppo

    @ray.remote(num_cpus=0)
    class Worker:
        def load_checkpoint(self):
            raise AttributeError("'types.SimpleNamespace' object has no attribute\n'set_rng_state'")

    @ray.remote(num_cpus=0)
    class Runner:
        def run(self):
            ray.get(Worker.remote().load_checkpoint.remote())

    def fake_run_ppo(cfg, task_runner_class):
        ray.get(Runner.remote().run.remote())

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    monkeypatch.setattr(main_ppo, "run_ppo", fake_run_ppo)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with pytest.raises(verl_trainer.VerlRunFailed) as info:
            verl_trainer.train(config, tmp_path / "run")
    finally:
        ray.shutdown()
    assert str(info.value) == ("Runner.run -> Worker.load_checkpoint raised AttributeError: 'types.SimpleNamespace' "
                               "object has no attribute 'set_rng_state'")


def test_a_ray_worker_that_dies_is_one_line_saying_what_died():
    """A node of a multi-node job lost mid-run (tests/launch/test_slurm_two_nodes.py kills one): Ray
    raises no RayTaskError but e.g. ActorDiedError or TaskUnschedulableError, without a remote traceback."""
    from ray.exceptions import ActorDiedError, TaskUnschedulableError

    from arctl.backends.verl.ray_connect import task_failure

    line = task_failure(TaskUnschedulableError("The node specified via NodeAffinitySchedulingStrategy doesn't\nexist any more"))
    assert line == ("Ray lost a node or worker of the job (TaskUnschedulableError): The task is not schedulable: "
                    "The node specified via "
                    "NodeAffinitySchedulingStrategy doesn't exist any more")
    assert task_failure(ActorDiedError()).startswith("Ray lost a node or worker of the job (ActorDiedError): ")
    assert task_failure(ValueError("not Ray's")) is None


def test_an_eval_checkpoint_that_is_missing_or_incomplete_is_one_line(config, tmp_path, monkeypatch):
    import verl.trainer.main_ppo as main_ppo

    from arctl.backends.verl import checkpoints

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    monkeypatch.setattr(main_ppo, "run_ppo", lambda cfg, task_runner_class: None)
    cfg = copy.deepcopy(config)
    ckpt = tmp_path / "train" / "checkpoints"
    cfg["verl"].update(eval_only=True, eval_checkpoint=str(ckpt / "global_step_3"))
    with pytest.raises(VerlConfigError, match="global_step_3 does not exist"):
        verl_trainer.train(cfg, tmp_path / "run")
    shard = ckpt / "global_step_3" / "actor" / "model.pt"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"w" * 64)
    checkpoints.mark_complete(ckpt, 3)
    assert verl_trainer.train(cfg, tmp_path / "run") == "completed"
    shard.write_bytes(b"w" * 8)  # damaged after its save
    with pytest.raises(VerlConfigError, match="model.pt has 8 bytes, 64 when saved"):
        verl_trainer.train(cfg, tmp_path / "run")


def test_sigterm_stays_the_job_entrys_after_ray_init(tmp_path):
    """ray.init replaces the driver's SIGTERM handler (a SystemExit raised in ray.get) and installs a
    C++ failure handler that aborts on TERM: a scancel'd verl job was marked failed, or left running,
    instead of preempted (found on the two-node SLURM). After keep_stop_signals, a TERM during ray.get
    runs the job entry's handler. In a subprocess: Ray's handlers are process-wide."""
    script = tmp_path / "sigterm.py"
    script.write_text(
        "import os, signal, threading, time\n"
        "got = []\n"
        "def handler(sig, frame):\n"
        "    got.append(sig)\n"
        "    raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGTERM, handler)\n"
        "import sys\n"
        "if sys.argv[1] == 'keep':\n"
        "    from arctl.backends.verl.ray_connect import keep_stop_signals\n"
        "    keep_stop_signals()\n"
        "import ray\n"
        "ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level='ERROR')\n"
        "def nap(s):\n"
        "    time.sleep(s)\n"
        "sleep = ray.remote(num_cpus=0)(nap)\n"
        "threading.Timer(2, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
        "try:\n"
        "    ray.get(sleep.remote(30))\n"
        "except BaseException as err:\n"
        "    print('raised', type(err).__name__, flush=True)\n"
        "print('handler ran', got == [signal.SIGTERM], flush=True)\n"
        "ray.shutdown()\n"
    )
    import subprocess
    import sys

    kept = subprocess.run([sys.executable, str(script), "keep"], capture_output=True, text=True, timeout=180)
    assert "raised KeyboardInterrupt" in kept.stdout and "handler ran True" in kept.stdout, kept.stdout + kept.stderr[-2000:]
    plain = subprocess.run([sys.executable, str(script), "plain"], capture_output=True, text=True, timeout=180)
    assert "handler ran True" not in plain.stdout, plain.stdout  # what Ray does without it (the defect)


def _stopped_at_2_with_its_validation_skipped(config, run_dir):
    """What a first attempt left: steps 0-2 in W&B and verl's file log (step 2 without its evaluation),
    step 2's checkpoint, and the record that the stop skipped step 2's validation."""
    from arctl.backends.verl import rehearsal, stop_request
    from arctl.track import writer

    rows = [{"trainer/global_step": 0, "eval/aime24/anytime_acc": 0.5},
            {"trainer/global_step": 1, "actor/pg_loss": 0.1}, {"trainer/global_step": 2, "actor/pg_loss": 0.2}]
    run = writer.open_run(config, run_dir)
    for row in rows:
        writer.log_row(run, row)
    writer.close_run(run)
    (run_dir / "verl_metrics.jsonl").write_text("".join(
        json.dumps({"step": r["trainer/global_step"], "data": r}) + "\n" for r in rows))
    rehearsal.save_checkpoint(run_dir / "checkpoints", 2)
    stop_request.mark_skipped_validation(run_dir / stop_request.STOP_FILE, 2)


def test_the_resume_after_a_skipped_validation_validates_first_and_w_and_b_holds_the_step_once_with_it(
        config, tmp_path, monkeypatch):
    """Found by a review: a validation a stop skipped (stop_request) was never redone, and its point was
    missing from the run's curves. The resume from that step's checkpoint validates before training, W&B
    is rewound to the step before, and the step's row is logged again with the evaluation (what the
    trainer's _validate returns then: tests/verl/test_stop_request.py): read by the independent reader,
    every step once, step 2 with both."""
    import verl.trainer.main_ppo as main_ppo
    import wandb
    from wandb_reference import synced_history

    from arctl.backends.verl import stop_request
    from arctl.backends.verl.history import kept_row

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    config["wandb"]["mode"] = "offline"
    run_dir = tmp_path / "run"
    _stopped_at_2_with_its_validation_skipped(config, run_dir)
    seen = {}

    def fake_run_ppo(cfg, task_runner_class):  # verl's tracker in the trainer, with the job's W&B environment
        from verl.utils.tracking import Tracking

        seen["cfg"] = cfg
        with monkeypatch.context() as env:
            for key, value in cfg.ray_kwargs.ray_init.runtime_env.env_vars.items():
                env.setenv(key, str(value))
            tracker = Tracking(project_name=cfg.trainer.project_name, experiment_name=cfg.trainer.experiment_name,
                               default_backend=["wandb"], config={})
            tracker.log(data={**kept_row(run_dir, 2), "eval/aime24/anytime_acc": 0.7}, step=2)  # val_before_train
            tracker.log(data={"trainer/global_step": 3, "actor/pg_loss": 0.3}, step=3)
            wandb.finish()

    monkeypatch.setattr(main_ppo, "run_ppo", fake_run_ppo)
    assert verl_trainer.train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    cfg = seen["cfg"]
    assert cfg.trainer.val_before_train is True and cfg.arctl.redo_validation_at == 2
    _, rows = synced_history(run_dir)
    assert [r["trainer/global_step"] for r in rows] == [0, 1, 2, 3]
    assert rows[2]["actor/pg_loss"] == 0.2 and rows[2]["eval/aime24/anytime_acc"] == 0.7
    assert stop_request.skipped_validation(run_dir / stop_request.STOP_FILE) == 2  # the trainer clears it (stand-in here)


def test_a_skipped_validation_of_a_step_past_the_checkpoint_is_redone_by_training_not_before_it(config, tmp_path,
                                                                                               monkeypatch):
    """The stop's checkpoint save was abandoned: the run resumes at an earlier step and redoes the skipped
    step, its validation with it; the record is stale and nothing is validated first."""
    import verl.trainer.main_ppo as main_ppo
    import wandb

    from arctl.backends.verl import checkpoints, stop_request

    monkeypatch.setenv(verl_trainer.ALLOW_CPU_ENV, "1")
    config["wandb"]["mode"] = "offline"
    run_dir = tmp_path / "run"
    _stopped_at_2_with_its_validation_skipped(config, run_dir)
    stop_request.mark_skipped_validation(run_dir / stop_request.STOP_FILE, 3)  # past the checkpoint (step 2)
    assert checkpoints.repair(run_dir / "checkpoints")[0] == 2
    seen = {}
    monkeypatch.setattr(main_ppo, "run_ppo", lambda cfg, task_runner_class: seen.setdefault("cfg", cfg))
    assert verl_trainer.train(config, run_dir, threading.Event()) == "completed"
    wandb.teardown()
    assert seen["cfg"].trainer.val_before_train is False and seen["cfg"].arctl.redo_validation_at is None
    assert stop_request.skipped_validation(run_dir / stop_request.STOP_FILE) is None

"""The stop request between the job entry and verl's trainer (from a review of the GPU path): a stop at
a step that validates no longer risks the step's logged row (verl logs a step after validating it, and
a validation cut by the abandon lost it), a stop that comes during a validation is acted on at once,
and a checkpoint save in progress is not abandoned at the end of the step's grace."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from arctl.backends.verl import stop_request


def test_the_request_says_when_the_step_will_be_abandoned(tmp_path):
    stop = tmp_path / stop_request.STOP_FILE
    assert not stop_request.requested(stop) and stop_request.abandon_at(stop) is None
    stop_request.request(stop, 1000.5)
    assert stop_request.requested(stop) and stop_request.abandon_at(stop) == 1000.5
    stop_request.request(stop, None)
    assert stop_request.requested(stop) and stop_request.abandon_at(stop) is None


@pytest.mark.parametrize(("deadline", "last", "fits"), [
    (1100.0, 60.0, True),  # 100 s left, 75 s needed
    (1100.0, 90.0, False),  # 112.5 s needed
    (None, 1.0, True),  # no deadline said: it runs, as before the check
    (1100.0, None, True),  # no validation measured in this attempt (a resume): it runs
])
def test_a_validation_after_a_stop_runs_only_where_its_last_duration_fits(tmp_path, deadline, last, fits):
    stop = tmp_path / stop_request.STOP_FILE
    stop_request.request(stop, deadline)
    assert stop_request.validation_fits(stop, last, now=1000.0) is fits


def test_a_save_is_marked_while_it_writes_and_unmarked_however_it_ends(tmp_path):
    stop = tmp_path / stop_request.STOP_FILE
    marker = stop_request.saving_marker(stop)
    with stop_request.saving(stop):
        assert marker.exists()
    assert not marker.exists()
    with pytest.raises(RuntimeError), stop_request.saving(stop):
        raise RuntimeError("the save failed")
    assert not marker.exists()
    with stop_request.saving(None):  # no stop file known: nothing marked
        pass


class _Clock:
    """The watcher's clock in a test (trainer._watch's ``clock``): time moves only as the watcher waits, so a
    loaded machine changes nothing. ``at(t, action)``: ``action`` runs when the clock reaches ``t`` s after
    the start (the trainer's side: its save ends, its step ends, or a look at what the watcher did)."""

    def __init__(self, start: float = 1000.0):
        self.start = self.now = start
        self.plan: list[tuple[float, object]] = []

    def time(self) -> float:
        return self.now

    def at(self, t: float, action) -> None:
        self.plan = sorted([*self.plan, (self.start + t, action)], key=lambda p: p[0])

    def wait(self, event: threading.Event, timeout: float) -> bool:
        until = self.now + timeout
        while not event.is_set() and self.plan and self.plan[0][0] <= until:
            t, action = self.plan.pop(0)
            self.now = max(self.now, t)
            action()
        if event.is_set():
            return True
        self.now = until
        assert self.now - self.start < 3600, "the watcher never ended"
        return False


def _watcher(tmp_path, monkeypatch, warning_s: float, term: bool = False):
    """The watcher's inputs and what it does: ``run(clock)`` runs it to its end in this thread."""
    from arctl.backends.verl import trainer

    interrupts: list[float] = []
    clocks = []
    monkeypatch.setattr(trainer._thread, "interrupt_main", lambda: interrupts.append(clocks[0].time()))
    stop_event, done, abandoned = threading.Event(), threading.Event(), threading.Event()
    if term:
        stop_event.abandon = True
    config = {"cluster": {"preempt_warning_s": warning_s}}
    stop = tmp_path / stop_request.STOP_FILE

    def run(clock: _Clock) -> None:
        clocks.append(clock)
        trainer._watch(stop_event, stop, done, config, abandoned, threading.Lock(), clock=clock)

    return stop_event, done, abandoned, interrupts, run, stop


def test_a_save_in_progress_at_the_end_of_the_grace_is_waited_for(tmp_path, monkeypatch):
    # grace 4 s, the save waited for up to 7.2 s; the save ends at 4.6 s, its step at 7.1 s
    stop_event, done, abandoned, interrupts, run, stop = _watcher(tmp_path, monkeypatch, warning_s=8.0)
    clock, seen = _Clock(), {}
    marker = stop_request.saving_marker(stop)
    marker.write_text("")  # the trainer is writing its checkpoint

    def save_ends():  # past the grace: the save was waited for
        seen[4.6] = (stop_request.abandon_at(stop), abandoned.is_set(), list(interrupts))
        marker.unlink()  # the rest of its step (it logs the row after the save) is waited for too

    clock.at(4.6, save_ends)
    # (a review: abandoned after the save, the step's row was lost)
    clock.at(7.0, lambda: seen.update({7.0: (abandoned.is_set(), list(interrupts))}))
    clock.at(7.1, done.set)  # the step ended and the run with it
    stop_event.set()
    run(clock)
    assert seen == {4.6: (clock.start + 4.0, False, []), 7.0: (False, [])}
    assert not abandoned.is_set() and not interrupts and clock.now == clock.start + 7.1


def test_after_a_save_the_step_is_waited_for_up_to_the_save_wait(tmp_path, monkeypatch):
    # grace 3 s, the save waited for up to 5.4 s: the save ends at 4 s, 1 s after the grace
    stop_event, done, abandoned, interrupts, run, stop = _watcher(tmp_path, monkeypatch, warning_s=6.0)
    clock, seen = _Clock(), {}
    marker = stop_request.saving_marker(stop)
    marker.write_text("")
    clock.at(4.0, marker.unlink)
    clock.at(5.3, lambda: seen.update({5.3: (abandoned.is_set(), list(interrupts))}))
    stop_event.set()
    run(clock)  # the step never ends: abandoned at 0.9 x 6 s, at the watcher's first look after it (every 0.5 s)
    assert seen == {5.3: (False, [])}
    assert abandoned.is_set() and len(interrupts) == 1 and 5.4 <= interrupts[0] - clock.start < 5.9


def test_the_grace_counts_from_the_signal_not_from_when_the_watcher_saw_it(tmp_path, monkeypatch):
    """From a review: the step's grace was counted from when the watcher first looked, after the attempt's
    start (an init_from merge, Ray's head); a warning that came during it left the step more time than
    the scheduler leaves before its kill. The job entry stamps the signal's time (stop_event.at)."""
    stop_event, done, abandoned, interrupts, run, stop = _watcher(tmp_path, monkeypatch, warning_s=8.0)
    clock = _Clock()
    stop_event.at = clock.start - 6.0  # the warning came 6 s ago: the 4-s grace is over
    stop_event.set()
    run(clock)
    assert abandoned.is_set() and interrupts == [clock.start]  # at once (was 4 s later: a grace from now)
    assert stop_request.abandon_at(stop) == clock.start - 2.0


def test_a_save_that_outlives_the_wait_is_abandoned_and_sigterm_waits_for_none(tmp_path, monkeypatch):
    stop_event, done, abandoned, interrupts, run, stop = _watcher(tmp_path, monkeypatch, warning_s=4.0)
    clock, seen = _Clock(), {}
    stop_request.saving_marker(stop).write_text("")
    clock.at(3.5, lambda: seen.update({3.5: (abandoned.is_set(), list(interrupts))}))
    stop_event.set()
    run(clock)
    assert seen == {3.5: (False, [])}  # grace 2 s, the save waited for up to 0.9 x 4 s
    assert abandoned.is_set() and len(interrupts) == 1 and 3.6 <= interrupts[0] - clock.start < 4.1
    other = tmp_path / "term"
    other.mkdir()
    stop_event, done, abandoned, interrupts, run, stop = _watcher(other, monkeypatch, warning_s=60.0, term=True)
    clock = _Clock()
    stop_request.saving_marker(stop).write_text("")
    stop_event.set()
    run(clock)
    assert abandoned.is_set() and interrupts == [clock.start]  # TERM: the scheduler kills soon, at once


def test_the_watcher_thread_on_the_wall_clock_abandons_a_step_under_sigterm(tmp_path, monkeypatch):
    """The watcher as the job entry starts it: a thread on the wall clock (the tests above move a clock of
    their own). Under SIGTERM it abandons the step at once; the join's bound only guards a hang."""
    from arctl.backends.verl import trainer

    interrupts: list[str] = []
    monkeypatch.setattr(trainer._thread, "interrupt_main", lambda: interrupts.append(threading.current_thread().name))
    stop_event, done, abandoned = threading.Event(), threading.Event(), threading.Event()
    stop_event.abandon = True
    stop = tmp_path / stop_request.STOP_FILE
    stop_request.saving_marker(stop).write_text("")
    thread = threading.Thread(target=trainer._watch, name="watcher", daemon=True,
                              args=(stop_event, stop, done, {"cluster": {"preempt_warning_s": 60.0}}, abandoned,
                                    threading.Lock()))
    thread.start()
    stop_event.set()
    thread.join(timeout=60)
    assert not thread.is_alive() and abandoned.is_set() and interrupts == ["watcher"]
    assert stop_request.requested(stop) and stop_request.abandon_at(stop) <= time.time()


class _Validations:
    """verl's own ``_validate``, stood in for: records each call, may take time or bring a stop request."""

    def __init__(self):
        self.calls, self.seconds, self.stop_during = 0, 0.0, None

    def __call__(self, trainer):
        self.calls += 1
        time.sleep(self.seconds)
        if self.stop_during is not None:
            stop_request.request(self.stop_during, time.time() + 60)
        return {"val/acc": 1.0}


@pytest.fixture
def trainer(tmp_path, monkeypatch):
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    validations = _Validations()
    monkeypatch.setattr(PPOTrainerSync, "_validate", lambda self: validations(self))
    t = object.__new__(ArctlPPOTrainer)  # only the stop logic is exercised: no workers
    t.config = OmegaConf.create({"arctl": {"stop_file": str(tmp_path / stop_request.STOP_FILE)}})
    t.global_steps, t.total_training_steps = 20, 100
    t.saved = []
    t._save_checkpoint = lambda: t.saved.append(t.global_steps)
    t.validations, t.val_dataloader = validations, []
    t.logger = SimpleNamespace(log=lambda data, step: t.logged.append(step))  # verl's Tracking, stood in for
    t.logged = []
    t._arctl_watch_logging()  # what on_train_begin does
    return t


def test_validations_outside_a_stop_run_and_are_timed(trainer):
    trainer.validations.seconds = 0.2
    assert trainer._validate() == {"val/acc": 1.0}  # before training (val_before_train)
    assert trainer.validations.calls == 1 and trainer._arctl_validation_s >= 0.2
    trainer._arctl_training = True
    assert trainer._validate() == {"val/acc": 1.0} and trainer.saved == [] and trainer.total_training_steps == 100


def test_a_stop_at_a_validating_step_validates_only_where_it_fits(trainer):
    stop = trainer.config.arctl.stop_file
    trainer._arctl_training, trainer._arctl_validation_s = True, 30.0
    stop_request.request(stop, time.time() + 600)
    trainer._arctl_stop()  # what on_step_end does on a request (its parent hook needs a live trainer)
    assert trainer.saved == [20] and trainer.total_training_steps == 20
    assert trainer._validate() == {"val/acc": 1.0}  # 37.5 s needed, 600 s left
    assert stop_request.skipped_validation(stop) == 20  # until verl has logged the step's row
    trainer.logger.log(data={"val/acc": 1.0}, step=20)
    assert stop_request.skipped_validation(stop) is None
    stop_request.request(stop, time.time() + 20)
    trainer._arctl_validation_s = 30.0  # the stand-in took no time
    assert trainer._validate() == {} and trainer.validations.calls == 1  # 37.5 s needed, 20 s left: skipped
    assert stop_request.skipped_validation(stop) == 20  # the resume from step 20's checkpoint validates it first
    trainer._arctl_validated = None  # (the validation above ran at another attempt's step 20)
    trainer.logger.log(data={"train/loss": 0.1}, step=20)  # verl logs the step's row without the evaluation
    assert stop_request.skipped_validation(stop) == 20  # (a review of the fix: it had cleared the record here)


def test_the_resume_validates_the_skipped_step_first_and_logs_its_row_again_with_it(trainer, tmp_path):
    """Found by a review: a validation a stop skipped was never redone, and its point was missing from the
    run's curves. The resumed attempt (verl's val_before_train at the checkpoint's step) returns the
    step's kept row with the evaluation, which verl logs as that step's row; the record goes once the
    training loop begins (after that log)."""
    stop = trainer.config.arctl.stop_file
    stop_request.mark_skipped_validation(stop, 20)
    rows = [{"trainer/global_step": s, "actor/pg_loss": s / 10} for s in (19, 20)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trainer.config.arctl.redo_validation_at = 20
    assert trainer._validate() == {"trainer/global_step": 20, "actor/pg_loss": 2.0, "val/acc": 1.0}
    assert stop_request.skipped_validation(stop) == 20  # not yet logged: a stop now keeps the record
    trainer.on_train_begin()
    assert stop_request.skipped_validation(stop) is None
    trainer.global_steps = 40  # a later validation in the loop is verl's own
    assert trainer._validate() == {"val/acc": 1.0}


def test_the_final_validation_runs_after_a_stop_at_the_last_step(trainer):
    """From a review: skipped at the last step, the run's final evaluation was lost, and the resume at the
    last checkpoint ran no step and ended completed without it."""
    stop = trainer.config.arctl.stop_file
    trainer._arctl_training, trainer._arctl_validation_s = True, 30.0
    trainer.global_steps = trainer.total_training_steps = 100
    stop_request.request(stop, time.time() + 20)  # no time for it by the rule
    trainer._arctl_stop()
    assert trainer._validate() == {"val/acc": 1.0} and trainer.saved == [100]


def test_a_stop_that_comes_during_a_validation_checkpoints_this_step(trainer):
    trainer._arctl_training = True
    trainer.validations.stop_during = trainer.config.arctl.stop_file
    assert trainer._validate() == {"val/acc": 1.0}
    assert trainer.saved == [20] and trainer.total_training_steps == 20 and trainer._arctl_stopped_at == 20


def test_a_validation_killed_in_the_loop_is_redone_by_the_resume_and_the_record_goes_once_logged(trainer):
    """From a review: verl saves a step's checkpoint, then validates, then logs the step's row. A job killed
    during that validation (abandoned, TERM, a lost node) resumed after the step without its evaluation,
    and at the last step ended "completed" without the run's final evaluation. Now the record that the
    step's validation may be missing is written before every validation in the loop and goes once verl
    has logged the row: the resume from that step's checkpoint validates it first (trainer.train)."""
    stop = trainer.config.arctl.stop_file
    trainer._arctl_training = True
    trainer.global_steps = trainer.total_training_steps = 100

    def killed(self, trainer):
        raise KeyboardInterrupt("the job was killed during the final validation")

    trainer.validations.__class__ = type("Killed", (_Validations,), {"__call__": killed})
    with pytest.raises(KeyboardInterrupt):
        trainer._validate()
    assert stop_request.skipped_validation(stop) == 100  # the next attempt (resume at 100) validates it first
    trainer.validations.__class__ = _Validations
    assert trainer._validate() == {"val/acc": 1.0} and stop_request.skipped_validation(stop) == 100
    trainer.logger.log(data={"train/loss": 0.1}, step=99)  # another step's row: the record stays
    assert stop_request.skipped_validation(stop) == 100
    trainer.logger.log(data={"val/acc": 1.0}, step=100)
    assert stop_request.skipped_validation(stop) is None and trainer.logged == [99, 100]


def test_a_requeued_attempt_knows_how_long_a_validation_takes(trainer):
    """From a review: a requeued attempt validates nothing before training, so at its first stop the last
    validation's duration was unknown and a validation that could not finish ran anyway (the step's row
    lost with it). The duration is recorded beside the stop file and read by the next attempt."""
    from arctl.backends.verl.trainer_v1 import ArctlPPOTrainer

    stop = trainer.config.arctl.stop_file
    trainer.validations.seconds = 0.05
    trainer._validate()
    assert stop_request.recorded_validation_s(stop) >= 0.05
    stop_request.record_validation_s(stop, 30.0)  # as the attempt before the requeue measured it
    again = object.__new__(ArctlPPOTrainer)  # the requeued attempt: nothing measured in it
    again.config, again.global_steps, again.total_training_steps = trainer.config, 40, 100
    again.saved, again.validations, again.val_dataloader = [], trainer.validations, []
    again._save_checkpoint = lambda: again.saved.append(again.global_steps)
    again._arctl_training = True
    again.logger, again.logged = SimpleNamespace(log=lambda data, step: None), []
    again._arctl_watch_logging()
    stop_request.request(stop, time.time() + 20)
    again._arctl_stop()
    assert again._validate() == {} and stop_request.skipped_validation(stop) == 40  # 37.5 s needed, 20 s left
    again.logger.log(data={"train/loss": 0.1}, step=40)  # the row without the evaluation: the record stays
    assert stop_request.skipped_validation(stop) == 40


def test_the_abandon_time_written_is_never_later_than_asked(tmp_path):
    """Written to the millisecond, rounded down: "abandon now" is never read as a moment still to come (rounded to
    the nearest, it was up to half a millisecond later, and the watcher test above failed in 2 of 3 runs)."""
    stop = tmp_path / stop_request.STOP_FILE
    for asked in (1796655717.7388694, 1796655717.7385, 1796655717.0009999, 12.0, time.time()):
        stop_request.request(stop, asked)
        read = stop_request.abandon_at(stop)
        assert read <= asked and asked - read < 0.001, (asked, read)

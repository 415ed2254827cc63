"""Tiny runs that start from another run (``trainer.init_from``), trained by hand in tests: the dependent's
config, and a stop after a given step (the attempt ends "preempted" there, its checkpoint kept)."""

from __future__ import annotations

import contextlib
import threading


def child_of(config: dict, parent) -> dict:
    """``config`` as arm "child" starting from the run folder ``parent`` (arm grpo), as the launcher resolves it."""
    return {**config, "arm": "child", "trainer": {**config["trainer"], "init_from": "grpo", "init_run": parent.name},
            "init_dir": str(parent)}


@contextlib.contextmanager
def stopping_after(step: int):
    """Yields the stop event that the tiny trainer's ``log_metrics`` sets once ``step`` is logged, within the block."""
    from arctl.backends.tiny import trainer

    stop, real = threading.Event(), trainer.log_metrics

    def log_metrics(run, run_dir, logged, *a, **k):
        out = real(run, run_dir, logged, *a, **k)
        if logged == step:
            stop.set()
        return out

    trainer.log_metrics = log_metrics
    try:
        yield stop
    finally:
        trainer.log_metrics = real

"""Proposed for tests/tiny/test_warmup_cache_place.py (or a tiny test file): the warm-up's torch threads."""
import os

import pytest
import torch

from arctl.backends.tiny import warmup
from arctl.compose import resolve_experiment


def test_the_warm_up_trains_on_the_cpus_this_process_may_use(tmp_path, monkeypatch):
    """Under ``taskset -c 0`` (one CPU of 8) the warm-up trained with 8 threads on it (from a review)."""
    config = resolve_experiment("main-grpo", scale="tiny")[0].config
    config["tiny"]["warmup"]["threads"] = None  # the default: as many as the CPUs
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "train")  # trained here, not the shipped copy
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    seen = []

    def train_into(*_args, **_kwargs):
        seen.append(torch.get_num_threads())
        raise RuntimeError("enough")

    monkeypatch.setattr(warmup, "_train_into", train_into)
    with pytest.raises(RuntimeError, match="enough"):
        warmup.warmup_model(config, tmp_path / "ws" / "runs" / "r", lambda *_: {})
    assert seen == [1]

"""Tiny-backend test settings: one torch thread per test (the machine is shared)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from arctl.backends.tiny.settings import WARMUP_ENV
from arctl.config.files import TINY_WARMUP_CACHE


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """This test's ``ARCTL_CACHE``'s warm-up folder (not made yet), ``ARCTL_TINY_WARMUP`` unset."""
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(WARMUP_ENV, raising=False)
    return tmp_path / "cache" / TINY_WARMUP_CACHE


@pytest.fixture
def nan_after_update(monkeypatch) -> None:
    """Every update of the tiny trainer leaves NaN weights behind it (the output layer filled with NaN after
    ``ppo_update``), as a step whose decay flips them (lr x weight_decay >= 1) did: the next step that samples fails."""
    from arctl.backends.tiny import trainer

    ppo_update = trainer.ppo_update

    def poisoned(model, *args, **kwargs):
        out = ppo_update(model, *args, **kwargs)
        with torch.no_grad():
            model.lm_head.weight.fill_(float("nan"))
        return out

    monkeypatch.setattr(trainer, "ppo_update", poisoned)

"""Fixtures of tests/track: a session-wide workspace of real offline W&B runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from wandb_workspace import shared_workspace  # noqa: E402


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return shared_workspace(tmp_path_factory)

"""Fixtures of tests/track: a session-wide workspace of real offline W&B runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from wandb_workspace import shared_workspace  # tests/support/wandb_workspace.py


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return shared_workspace(tmp_path_factory)

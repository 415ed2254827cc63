"""Fixtures of tests/report: the workspace of real offline W&B runs built by tests/track."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from wandb_workspace import shared_workspace  # tests/support/wandb_workspace.py


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return shared_workspace(tmp_path_factory)


@pytest.fixture
def completed_ws(workspace, tmp_path) -> Path:
    """A copy of the shared workspace of real W&B runs, each completed (status.json)."""
    root = tmp_path / "ws"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns(".arctl-cache", "report"))
    for run in (root / "runs").iterdir():
        (run / "status.json").write_text(json.dumps({"state": "completed"}))
    return root

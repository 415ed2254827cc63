"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def shipped_specs(tmp_path, monkeypatch):
    """The specs shipped with arctl, from a folder that is no project: no $ARCTL_SPECS, no $ARCTL_HOME, the
    current directory ``tmp_path`` (a test's workspace is ``./arctl-runs`` there unless it names one)."""
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.chdir(tmp_path)

"""CLI test fixtures: ``sandbox`` (tests/support/bad_input.py) for the bad-input contract."""

from __future__ import annotations

import pytest
from bad_input import Sandbox


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Sandbox:
    box = Sandbox(tmp_path)
    monkeypatch.setenv("ARCTL_SPECS", str(box.specs))
    monkeypatch.delenv("ARCTL_HOME", raising=False)
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    return box

"""``site``: the fake plugin packages installed in a temporary site directory (tests/support/plugin_site.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_site import make_site


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    for var in ("ARCTL_SPECS", "ARCTL_HOME", "ARCTL_TEST_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    return make_site(tmp_path / "site")

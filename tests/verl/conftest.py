"""Fixtures of the verl-backend tests. Every test here is marked ``verl`` and skips if verl is absent."""

from __future__ import annotations

import importlib.util

import pytest

VERL_MISSING = importlib.util.find_spec("verl") is None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/verl/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.verl)
            if VERL_MISSING:
                item.add_marker(pytest.mark.skip(reason="verl is not installed (pip install -e '.[verl]')"))


@pytest.fixture(scope="session")
def paper_config():
    from arctl.spec import resolve_experiment

    return resolve_experiment("main-ar-uniform", scale="paper")[0].config

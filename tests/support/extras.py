"""Which of arctl's optional extras this environment has, for tests that need one.

``verl_missing()`` is the one check: a test that needs the ``verl`` extra skips with
``NO_VERL`` as its one-line reason. verl counts as installed only as a real package (a folder named
``verl`` on sys.path, e.g. a test folder, is a namespace package and not verl)."""

from __future__ import annotations

import importlib.util

NO_VERL = "verl is not installed (pip install -e '.[verl]')"


def verl_missing() -> bool:
    spec = importlib.util.find_spec("verl")
    return spec is None or spec.origin is None

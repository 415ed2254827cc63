"""Training backends: ``tiny`` (CPU toy testbed, the embedded default) and ``verl`` (GPU clusters).

Every backend exposes ``train(config: dict, run_dir: Path, stop_event: threading.Event | None = None)
-> str`` returning "completed" or "preempted". :func:`get_train` imports a backend lazily, so the tiny
backend never pulls in verl/ray and vice versa.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

BACKENDS = {"tiny": "arctl.backends.tiny.trainer"}


def get_train(backend: str) -> Callable:
    """The ``train`` function of ``backend`` (ValueError naming the known backends otherwise)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known backends: {', '.join(sorted(BACKENDS))}")
    return importlib.import_module(BACKENDS[backend]).train

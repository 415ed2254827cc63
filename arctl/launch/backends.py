"""Which ``train`` function runs a config: ``config["backend"]`` looked up in a registry of entry points.

A backend is ``train(config: dict, run_dir: Path, stop_event: threading.Event | None) -> str``
returning ``"completed"`` or ``"preempted"``. Built-in: ``tiny`` and ``verl``; other packages may
add backends through the ``arctl.backends`` entry-point group (``name = "module:function"``).

TEST ONLY: ``$ARCTL_TEST_BACKEND`` (a registered name such as ``count``, or ``module:function``)
replaces the config's backend inside the job, so the launch layer can be tested with a tiny CPU
job. It is read by the job entry only; never set it for real runs.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

ENV_TEST_BACKEND = "ARCTL_TEST_BACKEND"
ENTRY_POINT_GROUP = "arctl.backends"

BUILTIN = {
    "tiny": "arctl.backends.tiny.trainer:train",
    "verl": "arctl.backends.verl.trainer:train",
    # test-only: a counting job (arctl/launch/testing.py)
    "count": "arctl.launch.testing:train",
}


class BackendError(RuntimeError):
    """The backend named by a config cannot be loaded."""


def available_backends() -> dict[str, str]:
    table = dict(BUILTIN)
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            table.setdefault(ep.name, ep.value)
    except Exception:  # noqa: BLE001 - broken metadata must not hide the built-ins
        pass
    return table


def _load(target: str) -> Callable:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr or "train")
    except (ImportError, AttributeError) as err:
        raise BackendError(f"cannot load backend {target!r}: {err}") from err


def backend_target(config: dict) -> str:
    """The ``module:function`` that trains ``config`` (honouring the test-only override)."""
    name = os.environ.get(ENV_TEST_BACKEND) or str(config.get("backend", "tiny"))
    if ":" in name:
        return name
    table = available_backends()
    if name not in table:
        raise BackendError(f"unknown backend {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def resolve_backend(config: dict) -> Callable:
    return _load(backend_target(config))

"""Which backend runs a config inside the job: ``config["backend"]`` through the backend registry
(:mod:`arctl.backends.base`), plus the launch layer's test-only backend.

TEST ONLY: ``$ARCTL_TEST_BACKEND`` (a registered name such as ``count``, or ``module:attribute`` of a backend object)
replaces the config's backend inside the job, so the launch layer can be tested with a tiny CPU
job. It is read by the job entry, and by the plan for `Backend.inputs_identity`; never set it for real runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from arctl.backends.base import BackendError, get_backend  # noqa: F401 - BackendError: callers catch it here

ENV_TEST_BACKEND = "ARCTL_TEST_BACKEND"
TEST_BACKENDS = {"count": "arctl.launch.testing:BACKEND"}  # a counting job (arctl/launch/testing.py)


def backend_name(config: dict) -> str:
    """The backend that trains ``config`` (honouring the test-only override)."""
    name = os.environ.get(ENV_TEST_BACKEND) or str(config.get("backend", "tiny"))
    return TEST_BACKENDS.get(name, name)


def resolve_backend(config: dict) -> Callable:
    """The ``train`` function of the config's backend."""
    return get_backend(backend_name(config)).train

"""Fixtures of tests/track: a session-wide workspace of real offline W&B runs; a W&B service of another
process, slow to close a run's file."""

from __future__ import annotations

from pathlib import Path

import pytest
from wandb_workspace import shared_workspace  # tests/support/wandb_workspace.py


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return shared_workspace(tmp_path_factory)


# A process that only holds a W&B service: prints its WANDB_SERVICE token and the pid of its wandb-core
# (its one child), then keeps the service until its stdin closes.
_SERVICE_HOLDER = """
import os, sys
from wandb.sdk import wandb_setup

wandb_setup.singleton().ensure_service()


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[1]
    except OSError:  # ended meanwhile
        return None


kids = [p for p in os.listdir("/proc") if p.isdigit() and parent(p) == str(os.getpid())]
print(os.environ["WANDB_SERVICE"], kids[0], flush=True)
sys.stdin.read()
"""


@pytest.fixture
def foreign_slow_service(monkeypatch):
    """W&B as this process sees it when it inherits ``WANDB_SERVICE`` from a parent that runs a
    wandb-core (the nested suite of tests/test_fresh_machine.py inherits the outer pytest's): every
    ``wandb.init`` uses that service, and ``wandb.teardown()`` does not wait for a service it did not
    start. The service is also slow, as on a loaded machine: it is stopped for a second from the moment
    a run tells it the run is finished, so a run's file is complete only a second after ``run.finish()``."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import threading

    import wandb
    from wandb.sdk.lib.service import service_connection

    if not Path("/proc/self/stat").is_file():
        pytest.skip("needs /proc to find the service's wandb-core")
    wandb.teardown()  # a service this process started earlier would serve the next wandb.init
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}  # the holder starts its own
    holder = subprocess.Popen([sys.executable, "-c", _SERVICE_HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    timers: list[threading.Timer] = []
    core = None
    try:
        token, core = holder.stdout.readline().split()
        core = int(core)
        monkeypatch.setenv("WANDB_SERVICE", token)
        inform_finish = service_connection.ServiceConnection.inform_finish

        def late(self, *args, **kwargs):
            os.kill(core, signal.SIGSTOP)
            timers.append(threading.Timer(1.0, os.kill, (core, signal.SIGCONT)))
            timers[-1].start()
            return inform_finish(self, *args, **kwargs)

        monkeypatch.setattr(service_connection.ServiceConnection, "inform_finish", late)
        yield
    finally:
        for t in timers:
            t.cancel()
        if core is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(core, signal.SIGCONT)
        wandb.teardown()  # forget the connection to the holder's service
        holder.stdin.close()
        holder.wait(timeout=60)

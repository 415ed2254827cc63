"""Joining the Ray cluster the job body started: wait for its head, then ``ray.init`` as verl does.

The job body (:mod:`arctl.backends.verl.ray_job`) exports ``RAY_ADDRESS=<head ip>:<port>`` and
starts the head in the background; the Python side waits until the head's GCS port accepts
connections (``ARCTL_RAY_HEAD_TIMEOUT_S``, default 300 s) instead of trusting a fixed sleep.
:func:`ray_init_kwargs` builds the ``ray.init`` arguments exactly as verl's ``run_ppo`` does
(verl's PPO runtime env merged with ``ray_kwargs.ray_init``), so a smoke run joins Ray the way
the real run will.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

HEAD_TIMEOUT_ENV = "ARCTL_RAY_HEAD_TIMEOUT_S"
DEFAULT_HEAD_TIMEOUT_S = 300.0


class RayConnectError(RuntimeError):
    """The Ray cluster of the job cannot be reached (one line: what, where, what to do)."""


def split_address(address: str) -> tuple[str, int]:
    """``"10.0.0.1:6379"`` -> ``("10.0.0.1", 6379)``; a clear error for anything else."""
    text = address.strip()
    for prefix in ("ray://", "http://", "https://"):
        if text.startswith(prefix):
            raise RayConnectError(
                f"RAY_ADDRESS={address!r} is a client/dashboard address; the job needs the head's GCS address HOST:PORT"
            )
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayConnectError(f"RAY_ADDRESS={address!r} is not HOST:PORT (e.g. 10.0.0.1:6379)")
    return host.strip("[]"), int(port)


def head_timeout_s() -> float:
    value = os.environ.get(HEAD_TIMEOUT_ENV)
    try:
        return float(value) if value else DEFAULT_HEAD_TIMEOUT_S
    except ValueError:
        raise RayConnectError(f"{HEAD_TIMEOUT_ENV}={value!r} is not a number of seconds") from None


def wait_for_head(address: str, timeout_s: float | None = None, poll_s: float = 0.5) -> float:
    """Block until the Ray head at ``address`` accepts TCP connections; return the seconds waited."""
    host, port = split_address(address)
    timeout = head_timeout_s() if timeout_s is None else timeout_s
    start = time.monotonic()
    last: OSError | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, max(timeout, 0.1))):
                return time.monotonic() - start
        except OSError as err:
            last = err
        if time.monotonic() - start >= timeout:
            raise RayConnectError(
                f"nothing answers at RAY_ADDRESS={address} after {timeout:.0f}s ({last}) — the Ray head did not "
                "start: see the `ray start --head` lines in the job log (`arctl logs RUN`)"
            )
        time.sleep(poll_s)


def ray_init_kwargs(cfg: Any) -> dict:
    """The ``ray.init`` keyword arguments verl's ``run_ppo`` would use for the composed config ``cfg``."""
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    default_runtime_env = get_ppo_ray_runtime_env(cfg)
    ray_init = cfg.ray_kwargs.get("ray_init", {})
    runtime_env_kwargs = ray_init.get("runtime_env", {})
    if cfg.transfer_queue.enable:
        default_runtime_env.setdefault("env_vars", {})["TRANSFER_QUEUE_ENABLE"] = "1"
    runtime_env = OmegaConf.merge(default_runtime_env, runtime_env_kwargs)
    return OmegaConf.to_container(OmegaConf.create({**ray_init, "runtime_env": runtime_env}))


NODE_RESOURCES = ("num_cpus", "num_gpus")  # what `ray start` sets; ray.init refuses them when joining


def joining_kwargs(cfg: Any) -> Any:
    """Drop ``ray_kwargs.ray_init.num_cpus/num_gpus`` from the composed config ``cfg`` (in place):
    the job body's ``ray start`` sized the nodes, and ``ray.init`` refuses both when it joins a
    running cluster."""
    ray_init = cfg.ray_kwargs.get("ray_init")
    if ray_init is not None:
        for key in NODE_RESOURCES:
            if key in ray_init:
                ray_init[key] = None
    return cfg


def wait_for_nodes(ray, expected: int, timeout_s: float) -> list[dict]:
    """The alive nodes of the joined Ray cluster (``ray.nodes()`` records), once ``expected`` are
    alive or ``timeout_s`` has passed (then fewer: the caller says what did not join). The job body
    starts the workers one after another, so a driver may start before the last has joined."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if len(alive) >= expected or time.monotonic() >= deadline:
            return alive
        time.sleep(1.0)


def task_failure(err: BaseException) -> str | None:
    """One line for an exception raised through Ray (a ``RayTaskError`` holds the remote traceback,
    and a remote call inside a remote call nests it): the remote calls it passed through, outermost
    first, and the original exception's message; for Ray's other errors (a worker, an actor or a
    whole node of the job died: ``ActorDiedError``, ``WorkerCrashedError``, ``NodeDiedError``) what
    died. None for anything else."""
    import re

    from ray.exceptions import RayError, RayTaskError

    if not isinstance(err, RayError):
        return None
    if not isinstance(err, RayTaskError):  # a worker, actor or node of the job died (no remote traceback)
        text = " ".join(str(err).split())
        return f"Ray lost a node or worker of the job ({type(err).__name__}): {text}"[:1000]
    cause = err
    while isinstance(cause, RayTaskError) and getattr(cause, "cause", None) not in (None, cause):
        cause = cause.cause
    where = list(dict.fromkeys(re.findall(r"ray::([\w.]+)\(", str(err))))
    text = " ".join(str(cause).split()) if not isinstance(cause, RayTaskError) else "(no cause reported)"
    name = "RayTaskError" if isinstance(cause, RayTaskError) else type(cause).__name__
    return f"{' -> '.join(where) or 'a Ray task'} raised {name}: {text}"[:1000]


def keep_stop_signals() -> None:
    """Keep SIGTERM for arctl's job entry in this process (the Ray driver). ``ray.init`` replaces the
    process's SIGTERM handler twice (``sys.exit``, then a ``SystemExit`` raised inside ``ray.get``) and
    installs Ray's C++ failure signal handler, which takes SIGTERM too, dumps a stack and aborts: a
    ``scancel`` of a running verl job then ended the job entry before it could abandon the step and
    mark the run preempted - the run was marked failed, or left "running" (found on the two-node SLURM,
    tests/launch/test_slurm_two_nodes.py). Here: the failure handler off for this process only
    (``RAY_DISABLE_FAILURE_SIGNAL_HANDLER``: the job's Ray nodes keep theirs), and the handler in place
    now (the job entry's) put back after every ``ray.init`` (Ray's post-init hooks), whoever calls it
    (verl's ``run_ppo``, the rehearsal, the smoke)."""
    import signal
    import threading

    os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # ray already imported: the constant was read from the environment then
        constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    handler = signal.getsignal(signal.SIGTERM)
    if not callable(handler) or threading.current_thread() is not threading.main_thread():
        return  # no Python handler to keep (the job entry installs one; a plain process has none)
    from ray._private import worker

    hooks = getattr(worker, "_post_init_hooks", None)
    if hooks is None:
        raise RuntimeError("this Ray has no post-init hooks (ray._private.worker._post_init_hooks): arctl cannot "
                           "keep SIGTERM for its job entry; use the Ray version verl pins")

    def restore() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)

    restore.arctl_keeps_sigterm = True
    hooks[:] = [h for h in hooks if not getattr(h, "arctl_keeps_sigterm", False)] + [restore]

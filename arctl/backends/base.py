"""What a training backend is to the rest of arctl, and where backends are found.

A backend is an object with the :class:`Backend` protocol, exported by its package as ``BACKEND``
and registered under the ``arctl.backends`` entry-point group (``tiny = "arctl.backends.tiny:BACKEND"``;
another package adds one the same way). A backend brings its own settings: the run config's section
named after it (``tiny.*``, ``verl.*``: a typed dataclass, or an open mapping with declared ranges)
and its scale profiles (``<conf_dir>/scale/<name>.yaml``, options of the ``scale`` config group);
:mod:`arctl.compose.plugins` adds them to the schema, to validation and to Hydra's search path. ``arctl.compose``, ``arctl.launch`` and ``arctl.cli`` use
:func:`get_backend` and never import a backend package: the registry loads it by name, lazily, so
the tiny backend never pulls in verl or Ray and ``arctl --help`` imports neither.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from arctl.algo.methods.registry import plugin_table, unreadable_packages
from arctl.config.ranges import Range

ENTRY_POINT_GROUP = "arctl.backends"
INIT_RECORD = "init.json"  # in a run folder: what a run that starts from another's weights (trainer.init_from) took,
# written by its job as it takes them (each backend's own fields); the launch reads its time (launcher.source_rerun)
INIT_MODEL_DIR = "init_model"  # in a run folder: verl's merged copy of those weights (a rerun archives both)
# the exit code of a SLURM job whose run stopped unfinished with no requeue after it (preempted, or cancelled as it
# started): SLURM records the job FAILED, so a run that starts from it is not started (arctl.launch.job); a job body's
# cleanup reads it as a stop, not a failure (arctl.backends.verl.ray_job: the Ray directory goes, as after success)
PREEMPTED_EXIT_CODE = 75  # os.EX_TEMPFAIL
# The built-in backends: their one home (arctl's pyproject declares no entry point for them, so a stale
# editable install cannot miss one); other packages add theirs by the ``arctl.backends`` entry points.
BUILTIN = {
    "tiny": "arctl.backends.tiny:BACKEND",
    "verl": "arctl.backends.verl:BACKEND",
}


class BackendError(RuntimeError):
    """The backend named by a config cannot be loaded."""


class BackendUserError(ValueError):
    """A user mistake a backend reports (e.g. a dataset file that cannot be read): one line."""


@runtime_checkable
class Backend(Protocol):
    """A training backend.

    ``train(config, run_dir, stop_event)`` runs the resolved config in this process and returns
    ``"completed"`` or ``"preempted"`` (a set ``stop_event``: checkpoint and return). The other
    methods return ``None`` when the backend has nothing to say."""

    name: str

    def train(self, config: dict, run_dir: Path, stop_event: threading.Event | None = None) -> str: ...

    def config_problem(self, config: dict) -> tuple[str, str, str] | None:
        """(what, key, hint) of a config this backend cannot run, checked at validation."""

    def local_problem(self, config: dict) -> str | None:
        """Why the run cannot run on this machine (the local executor), e.g. no GPU."""

    def slurm_problem(self, config: dict) -> str | tuple[str, str] | None:
        """Why the run cannot be submitted to SLURM as its ``cluster`` section asks, e.g. a GPU run
        that asks SLURM for no GPU (the launch adds which cluster profiles to pass), or ``(line, hint)``
        with advice of its own (a CPU-only run that asks for GPUs: "set cluster.gpus_per_node=0")."""

    def launch_problem(self, config: dict, run_dir: Path) -> str | None:
        """Why the job would fail as it starts, found where it is submitted from, before it queues (the
        launch refuses it, its dry run says so): e.g. a config the framework rejects, an input file
        that is not there."""

    def job_setup(self, config: dict, run_dir: Path) -> str | None:
        """Shell lines the SLURM job runs before arctl's job entry, which then runs on the first node
        as a child of the batch shell (e.g. a Ray cluster sized to the allocation, with an EXIT trap
        that stops it); None: the plain job entry under srun."""

    def prepare_data(self, out: Path, datasets: list[str], sources: dict[str, Path], use_hub: bool) -> list[dict] | None:
        """``arctl data prepare``: write the backend's datasets and return a row per dataset (``dataset``,
        ``split``, ``rows``, ``expected`` (or None), ``path``, optionally ``source``); None if it needs none."""

    def datasets(self) -> tuple[str, ...]:
        """Names ``arctl data prepare`` accepts for this backend."""

    def config_ranges(self) -> dict[str, Range]:
        """dotted key -> :class:`~arctl.config.ranges.Range` of the numeric keys under the backend's
        own config section when it is an open mapping (``tiny.*``): validation checks them like the
        schema's typed keys."""

    def settings_type(self) -> type | None:
        """The dataclass of the backend's config section (its fields written with
        :func:`arctl.config.schema.setting`: type, default, range, choices), typed like the core
        sections; None: an open mapping (``{}``), whose keys a scale profile sets and
        :meth:`config_ranges` checks."""

    def added_keys(self) -> tuple[str, ...] | None:
        """Where ``+<name>.<key>=`` may add a key the section does not have: the dotted prefixes under
        which the backend reads (and checks) keys it finds, e.g. ``("tiny.task.",)``; ``()``: nowhere (a
        typed section that declares every key it reads, as verl's); None (the default): anywhere in its
        section (read as a whole). A key added where it would be read by nothing is refused
        (:func:`arctl.compose.plugins.added_key_problem`)."""

    def conf_dir(self) -> Path | None:
        """A directory of config-group options the backend brings (``scale/<name>.yaml``: its scale
        profiles), searched after arctl's own ``arctl/conf``; None: none."""

    def resume_step(self, config: dict, run_dir: Path) -> int | None:
        """The step of the checkpoint the run's next attempt would resume from: its newest complete one, as
        the backend's own resume finds it (0: none, the next attempt starts over); None: the backend cannot
        say. Asked by the job entry when an attempt ends preempted, whose stop may have written no checkpoint
        (a verl step abandoned on TERM keeps the last one): its log line and status.json's ``resume_step``."""

    def inputs_identity(self, config: dict) -> dict | None:
        """What identifies, cheaply and surely, the inputs the run reads from outside its config and its run
        id, e.g. the checkpoint an eval-only run evaluates, named in the config by its path alone (a retrained
        run saves other weights under the same path): a JSON mapping of short strings, whose ``path`` (where
        there is one) names the input. The launch records it in the run folder (``inputs.json``) and plans a
        completed run whose inputs no longer match "rerun", as ``--force`` reruns it
        (:func:`arctl.launch.launcher.plan`). None: nothing to identify (the run reads nothing such), or
        nothing readable now (a checkpoint removed since: the run is left as it is)."""

    def weights_identity(self, config: dict) -> dict[str, str] | None:
        """Beyond the ``model`` keys arctl compares itself (:data:`arctl.launch.launcher.WEIGHT_KEYS`), what the
        shapes or the meaning of the run's weights depend on, as {the setting a user changes: a short value}, e.g.
        the tiny backend's vocabulary, which its task sets (the embedding's rows and what each row means). A run
        starting from another run's weights (``trainer.init_from``) must have the same mapping as that run, or the
        launch refuses it (:func:`arctl.launch.launcher.model_mismatch`). Read without training or the network.
        None: nothing beyond the model keys (or nothing readable: a bad section is said by
        :meth:`config_problem`)."""

    def launch_notes(self, configs: list[dict]) -> list[str]:
        """Lines a launch and its dry run print about what the runs ``configs`` (those it would start) do before
        their first step that takes notable time, e.g. the tiny backend's warm-up of a key not cached (``--json``:
        ``backend_notes``). Read without training or the network, cheaply (no torch import). []: nothing to say."""

    def checkpoint_gb(self, config: dict) -> float | None:
        """GB (10^9 bytes) one checkpoint of the run takes on disk (its weights and optimizer state), read here
        without the network, e.g. from its model's config; 0.0: the run saves none worth counting; None: the
        backend cannot say. A launch's dry run adds up what its runs keep at once (:meth:`checkpoints_kept`) and
        compares it with the workspace's free space (:func:`arctl.launch.disk_room.disk_note`)."""

    def checkpoints_kept(self, config: dict) -> tuple[str, int] | None:
        """(the setting, its value): how many complete checkpoints the run keeps after a save, e.g.
        ``("verl.keep_checkpoints", 2)``; a save holds one more until it is complete. None: the backend does not
        say (one checkpoint is counted)."""


# How long a backend whose training failed waits for a stop request before calling the failure its
# own: scancel's TERM reaches every process of a job step at once (the W&B service, Ray's workers),
# so the failure it causes can come before the job entry's signal handler has set the stop.
STOP_GRACE_S = 5.0


def stop_follows(stopped: Callable[[], bool], seconds: float | None = None) -> bool:
    """Whether ``stopped()`` is true now or becomes true within ``seconds`` (default
    :data:`STOP_GRACE_S`; polled every 50 ms): a failure it answers with True was the stop's doing,
    and the run ends preempted from its last checkpoint, not failed."""
    deadline = time.monotonic() + (STOP_GRACE_S if seconds is None else seconds)
    while not stopped():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# The RL steps in a row whose every optimizer step may be skipped (a gradient norm that is not finite: verl's rule,
# which both backends follow) before the run fails as diverged. A constant, not a config key: a key would change
# every run's id. From a hunt: a run whose loss stayed NaN skipped 45 of its 50 optimizer steps, trained nothing
# after step 2, and ended COMPLETED, its frozen weights checkpointed and reported as one more seed.
DIVERGED_STEPS = 3


class Diverged(RuntimeError):
    """The run stopped learning: its weights diverged (every optimizer step of :data:`DIVERGED_STEPS` RL steps in a
    row skipped, or the policy's logits are not finite). One line: the first bad step, what happened, what to change."""


def diverged_advice(lr: float, weight_decay: float, grad_clip: float) -> str:
    """What to change in a run that diverged: the optimizer settings, with the values it ran."""
    return f"lower optim.lr ({lr:g}), optim.weight_decay ({weight_decay:g}) or optim.grad_clip ({grad_clip:g})"


class SkipStreak:
    """The RL steps in a row whose every optimizer step was skipped, for both backends. :meth:`update` after each
    step's update returns the step's warning line (None: no optimizer step skipped); :meth:`fail` raises
    :class:`Diverged` once the streak is :data:`DIVERGED_STEPS` steps long. While :attr:`first` is set, a backend
    saves no checkpoint but the run's last step's: a resume then starts before the streak and counts it again from
    its first step (the step the run fails at is the same in every attempt)."""

    def __init__(self, advice: str):
        self.advice = advice  # what to change (:func:`diverged_advice`)
        self.first: int | None = None  # the first step of the streak (None: the last step updated the weights)
        self.skipped = 0  # optimizer steps skipped in the streak
        self.length = 0  # its RL steps
        self.line = ""  # the streak's warning line

    @property
    def diverged(self) -> bool:
        return self.length >= DIVERGED_STEPS

    def update(self, step: int, skipped: int, steps: int, loss: float) -> str | None:
        """The warning line of RL step ``step``, ``skipped`` of whose ``steps`` optimizer steps were skipped, its
        mean loss ``loss``: the streak's span where every one was, the step's count where some were."""
        said = (f"train/loss {loss}" if not math.isfinite(loss) else
                f"train/loss {loss:.4g} is finite: the gradient overflowed")
        if not skipped or skipped < steps:
            self.first, self.skipped, self.length, self.line = None, 0, 0, ""
            return None if not skipped else (
                f"step {step}: the gradient norm was not finite in {skipped} of {steps} optimizer step(s): skipped, "
                f"as verl skips them ({said})")
        if self.first is None:
            self.first = step
        self.skipped += skipped
        self.length = step - self.first + 1
        span = f"step {step}" if self.length == 1 else f"steps {self.first}-{step}"
        self.line = (f"{span}: every optimizer step was skipped ({self.skipped} of {self.skipped}: the gradient norm "
                     f"was not finite; {said}), the weights unchanged since step {self.first - 1}")
        return self.line

    def fail(self) -> None:
        """Diverged (one line) where the streak is :data:`DIVERGED_STEPS` steps long."""
        if self.diverged:
            raise Diverged(f"{self.line}: the training diverged — {self.advice}")


def available_backends() -> dict[str, str]:
    """name → ``module:attribute`` of every backend (built-ins, then entry points)."""
    return plugin_table(BUILTIN, ENTRY_POINT_GROUP)[0]


def backend_problems() -> dict[str, str]:
    """name → why an installed package's backend of that name cannot be used (two packages declare it, it names
    a built-in, it is not a name: :func:`arctl.algo.methods.registry.plugin_table`)."""
    return plugin_table(BUILTIN, ENTRY_POINT_GROUP)[1]


def load_target(target: str):
    """The object ``module:attribute`` names (default attribute ``BACKEND``)."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr or "BACKEND")
    except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure of a plugin's import is one line naming it
        # (SystemExit too: a plugin calling sys.exit at import ended every arctl command, from a hunt)
        raise BackendError(f"cannot load backend {target!r}: {type(err).__name__}: {err}") from err


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (or a ``module:attribute`` target)."""
    if ":" in name:
        obj = load_target(name)
    else:
        table, problems = plugin_table(BUILTIN, ENTRY_POINT_GROUP)
        if name in problems:
            raise BackendError(f"backend {name!r} cannot be used: {problems[name]}")
        if name not in table:
            lost = unreadable_packages(ENTRY_POINT_GROUP)
            raise BackendError(f"unknown backend {name!r}; known: {', '.join(sorted(table))}"
                               + (f" (the entry points of {', '.join(lost)} cannot be read)" if lost else ""))
        obj = load_target(table[name])
    if not callable(getattr(obj, "train", None)):
        raise BackendError(f"backend {name!r} has no train(config, run_dir, stop_event) method: it must be an "
                           "object with the arctl.backends.base.Backend protocol (subclass BackendDefaults)")
    return obj


class BackendDefaults:
    """The protocol's optional methods with nothing to say; a backend overrides what it needs."""

    def config_problem(self, config):
        return None

    def local_problem(self, config):
        return None

    def slurm_problem(self, config):
        return None

    def launch_problem(self, config, run_dir):
        return None

    def job_setup(self, config, run_dir):
        return None

    def prepare_data(self, out, datasets, sources, use_hub):
        return None

    def datasets(self):
        return ()

    def config_ranges(self):
        return {}

    def settings_type(self):
        return None

    def added_keys(self):
        return None  # a backend that does not say reads what it finds in its section

    def conf_dir(self):
        return None

    def resume_step(self, config, run_dir):
        return None  # unknown: the job's line makes no claim about a checkpoint

    def inputs_identity(self, config):
        return None  # the run reads nothing outside its config (and its own run folder)

    def weights_identity(self, config):
        return None  # the model keys say everything the weights depend on

    def launch_notes(self, configs):
        return []

    def checkpoint_gb(self, config):
        return None  # unknown: the dry run counts the run among those of unknown size

    def checkpoints_kept(self, config):
        return None

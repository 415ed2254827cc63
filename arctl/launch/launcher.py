"""Turn resolved runs into jobs: plan, claim in the registry, freeze run dirs, submit, record.

One ``launch`` call = one sweep or experiment: every run to (re)launch goes out as ONE submitit
job array (``map_array``) on SLURM, split into chunks of ``cluster.max_array_size``; local runs go
through one detached local queue (``cluster.array_parallelism`` / cores at a time); debug runs run
in this process. Runs are claimed in the registry first, so concurrent launches of the same sweep
submit each run exactly once; completed runs are skipped unless ``force``.

Items marked *shared* (``share_arms: true`` in a sweep, :mod:`arctl.launch.shared`) are not
launched: the run they share is, and it is recorded as serving their experiments (registry
membership and ``shared.json``). A run directory created here gets ``provenance.json``
(:mod:`arctl.launch.provenance`): arctl's version and git commit; a resume adds its own to the list.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

from arctl.backends.base import INIT_RECORD
from arctl.compose.run import ResolvedRun
from arctl.config.files import PLACE_ERRNOS, atomic_write, exclusive
from arctl.config.schema import MODEL_BUILD_KEYS
from arctl.launch import states
from arctl.launch.executors import (
    LaunchError,
    array_chunk_size,
    backend_job_setup,
    choose_executor,
    local_cores,
    local_parallelism,
    render_sbatch,
    scancel_failed,
    scancel_quietly,
    slurm_executor,
    slurm_parameters,
    with_ray_setup,
)
from arctl.launch.job_ids import array_master, is_array_task, job_id_order
from arctl.launch.progress import run_progress
from arctl.launch.provenance import code_version, record_resume, spec_files_read, write_provenance
from arctl.launch.registry import Registry, RegistryError, RunRecord, new_claim_token
from arctl.launch.run_id import make_run_id
from arctl.launch.rundir import (
    archive_previous,
    archived_after,
    frozen_config,
    prepare_run_dir,
    read_inputs,
    restore_previous,
    run_starts_from,
    write_inputs,
)
from arctl.launch.shared import served, write_shared
from arctl.launch.signals import add_note, run_to_its_answer, stops_ignored
from arctl.launch.status_file import (
    mark_cancelled,
    mark_submitted,
    name_job_process,
    process_identity,
    write_status,
)
from arctl.launch.workspace import Workspace, run_paths, workdir_arg
from arctl.track.identity import API_KEY_ENV, W_AND_B_OWN, is_secret_name, wandb_dir
from arctl.track.phase import queued_phase, waiting_phase, write_phase


@dataclass
class LaunchItem:
    """One run to launch: its id, the resolved run (its config frozen with the id) and what the
    launch does with it. ``experiment``, ``arm``, ``seed``, ``config`` and ``sweep`` read the run."""

    run_id: str
    run: ResolvedRun
    action: str = "new"  # new | resume | rerun | skip | active | shared
    reason: str = ""
    state: str | None = None  # current registry state
    shares: str | None = None  # shared cell: the id of the run it is (then run_id is that id too)
    after: str | None = None  # the run whose final weights it starts from (trainer.init_from): its id
    needed_by: str | None = None  # launched only because this run (its name) starts from it
    job: str | None = None  # an active run's job id (plan): a run starting from it waits for that job
    cells: list[ResolvedRun] = field(default_factory=list)  # the cells asked for that are this run (arctl.launch.cells)
    note: str = ""  # said after the plan's reason (arctl.launch.shared.mark_same_computation: an earlier id's run)
    problem: str = ""  # plan: the one line the launch refuses it with (action "refused"; :func:`source_problem`)
    experiment = property(lambda self: self.run.experiment)
    arm = property(lambda self: self.run.arm)
    seed = property(lambda self: self.run.seed)
    sweep = property(lambda self: self.run.sweep)
    # its sweep (or experiment): whose other runs under way, those the launch has not among its items, hold slots of
    # the bound beside it (:func:`siblings_under_way`). From a review: `arctl run EXP --arm A` (`--seeds`, `arctl
    # resume RUN`) counted none of them and started its retries beside the array, 4 at once at P=2
    beside = property(lambda self: self.run.sweep or self.run.experiment)

    @property
    def config(self) -> dict:
        return self.run.config

    @config.setter
    def config(self, value: dict) -> None:
        self.run = replace(self.run, config=value)

    def record(self) -> RunRecord:
        return RunRecord(
            run_id=self.run_id, experiment=self.experiment, arm=self.arm, seed=self.seed, sweep=self.sweep,
            scale=str(self.config.get("scale", {}).get("name", "")) or None, backend=self.config.get("backend"),
        )


@dataclass
class LaunchResult:
    executor: str
    executor_note: str
    items: list[LaunchItem]
    submitted: list[LaunchItem] = field(default_factory=list)
    skipped: list[tuple[LaunchItem, str]] = field(default_factory=list)
    job_ids: dict[str, str] = field(default_factory=dict)  # run_id -> job id
    failed: dict[str, str] = field(default_factory=dict)  # run_id -> error (debug executor)
    parallelism: int | None = None  # local: runs at a time (executors.local_parallelism)
    # runs skipped because another launch has them under way (submitting, pending, running): what waits for
    # this launch's runs waits for them too (from a hunt: a second terminal's `arctl run` returned at once,
    # saying to draw the figure of runs not done yet)
    in_flight: list[str] = field(default_factory=list)


def items_from_resolved(resolved: Iterable, launching: bool = True) -> list[LaunchItem]:
    """LaunchItems (with run ids) for ``arctl.compose.ResolvedRun`` objects; duplicates merged.

    A run that starts from another's final weights (``trainer.init_from``) brings that run along
    (resolved with the same seed, scale and overrides, :func:`arctl.compose.resolve.resolve_init_from`;
    ``needed_by`` names why it is there when it was not asked for), placed before it; the other
    run's id is written into the config (``trainer.init_run``), so it is part of this run's identity,
    and is the item's ``after``. A cycle of ``init_from`` is one SpecError line, and so are two cells of one
    run id that differ in a key outside the identity that decides how the run runs
    (:func:`arctl.launch.cells.conflict`), when ``launching`` (what only reads runs, an export, names them), and
    a run whose model is not the one of the run it starts from (:func:`model_mismatch`)."""
    from arctl.compose.errors import SpecError
    from arctl.compose.resolve import resolve_init_from
    from arctl.launch.cells import conflict

    items: dict[str, LaunchItem] = {}
    first: dict[str, ResolvedRun] = {}  # run id -> the first run of that id, as composed (before its config is frozen)

    def add(run, chain: tuple[str, ...], needed_by: str | None) -> str:
        config, after = run.config, (run.config.get("trainer") or {}).get("init_run")
        if run.init_from and after is None:  # composed now (a resumed run's frozen config has init_run)
            if run.name in chain:
                raise SpecError(f"trainer.init_from makes a cycle: {' -> '.join((*chain, run.name))}",
                                f"{run.experiment}/{run.arm}: trainer.init_from",
                                "a run cannot start, through others, from its own weights")
            after = add(resolve_init_from(run), (*chain, run.name), run.name)
            if launching and (problem := model_mismatch(run, first[after], after)) is not None:
                raise problem
            config = {**config, "trainer": {**config["trainer"], "init_run": after}}
        run_id = make_run_id(config)
        run = replace(run, config=config)
        if run_id not in items:
            items[run_id] = LaunchItem(run_id=run_id, run=replace(run, config=frozen_config(config, run_id, run_id)),
                                       after=after, needed_by=needed_by)
            first[run_id] = run
        elif launching and (problem := conflict(first[run_id], run, run_id)) is not None:
            raise problem
        elif needed_by is None:
            items[run_id].needed_by = None  # asked for, not only brought along
        if needed_by is None:
            items[run_id].cells.append(run)
        return run_id

    for run in resolved:
        add(run, (), None)
    return list(items.values())


WEIGHT_KEYS = ("name", "path", *(k for k in MODEL_BUILD_KEYS if k != "max_position_embeddings"))
"""The ``model`` keys the weights' identity or shape depend on: a checkpoint's (``path``; verl loads it, and a run
starting from another loads that run's merged checkpoint in its place) and a built model's sizes (the tiny backend's;
``max_position_embeddings`` shapes no weight of a rotary model). A run starting from another's weights must have the
other run's values of all of them (:func:`model_mismatch`)."""


def model_mismatch(run: ResolvedRun, source: ResolvedRun, source_id: str):
    """A SpecError (one line) where ``run`` (``trainer.init_from``) names a model that differs from the one of
    ``source``, the run whose final weights it starts from (``source_id``), in a key of :data:`WEIGHT_KEYS`; else
    None. From a hunt: verl trained the source's 1.5B model under a 7B run's name, id and GPU reservation (its job
    replaces model.path with the source's checkpoint), and the tiny backend trained a warm-up for its wider model,
    then crashed loading the source's weights into it (a raw torch size mismatch)."""
    from arctl.compose.errors import SpecError

    mine, theirs = run.config.get("model") or {}, source.config.get("model") or {}
    said = [f"model.{k}={mine.get(k)!r} where {source.experiment}/{source.arm} has {theirs.get(k)!r}"
            for k in WEIGHT_KEYS if mine.get(k) != theirs.get(k)]
    what = "whose model differs" if said else "whose weights do not fit it"
    mine, theirs = _weights_identity(run.config), _weights_identity(source.config)
    said += [f"{k} gives {mine.get(k) or 'nothing said'} where {source.experiment}/{source.arm}'s gives "
             f"{theirs.get(k) or 'nothing said'}" for k in dict.fromkeys([*mine, *theirs]) if mine.get(k) != theirs.get(k)]
    if not said:
        return None
    said = ", ".join(said)
    return SpecError(f"{run.experiment}/{run.arm}/s{run.seed} starts from the weights of run {source_id} "
                     f"({source.experiment}/{source.arm}/s{source.seed}), {what}: {said}",
                     f"{run.experiment}/{run.arm}: trainer.init_from",
                     "a run starts from the same model it continues: give both arms the same model (and the settings "
                     "named), or drop trainer.init_from; nothing is submitted")


def _weights_identity(config: dict) -> dict:
    """What the run's backend says its weights depend on beyond the model keys (``Backend.weights_identity``); {}
    where it says nothing or is not installed here (the launch says that elsewhere)."""
    from arctl.launch.backends import BackendError, get_backend

    try:
        return get_backend(str(config.get("backend", "tiny"))).weights_identity(config) or {}
    except (BackendError, AttributeError):
        return {}


def unregistered_folders(items: list[LaunchItem], workspace: Workspace, known: Iterable[str]) -> list[str]:
    """The run ids among ``items`` that are new to the registry (``known``: the run ids it has) but
    whose run folder holds something a job made (shared items launch as the run they share)."""
    known = set(known)
    return workspace.unregistered([i.run_id for i in items if i.run_id not in known and not i.shares])


def workspace_problem(items: list[LaunchItem], workspace: Workspace, known: Iterable[str],
                      found: list[str] | None = None) -> str | None:
    """Why launching ``items`` into ``workspace`` must be refused (``known``: the run ids its registry
    has), or None: the workspace is an export (runs for reports, no registry, no checkpoints), or a run
    that is new to the registry already has a run folder (a registry deleted, emptied or copied from
    elsewhere: the launch would train into the folder, or remove it when the submission is refused).
    ``found``: :func:`unregistered_folders` where the caller has it already (the folders are not
    scanned again)."""
    from arctl.launch.workspace import EXPORT_INDEX

    root = workspace.root
    if workspace.is_export():
        return (f"{root} is an arctl export ({EXPORT_INDEX}): reports read it (`arctl report{workdir_arg(root, stored=True)}`), "
                "and it has no registry or checkpoints to train from — launch into a workspace (--workdir DIR or "
                "$ARCTL_HOME)")
    if found is None:
        found = unregistered_folders(items, workspace, known)
    if found:
        what = (f"run folders {workspace.run_dir(found[0])} and {len(found) - 1} more exist" if len(found) > 1
                else f"run folder {workspace.run_dir(found[0])} exists")
        return (f"{what} but {workspace.registry_path.name} has no row for {'them' if len(found) > 1 else 'it'} (the "
                f"registry was deleted, emptied or copied from elsewhere) — `arctl repair{workdir_arg(root, stored=True)}` rebuilds "
                "the registry from the run folders; nothing is submitted")
    return None


STARTS = ("new", "resume", "rerun")  # the planned actions that start a job


def plan(items: list[LaunchItem], workspace: Workspace, force: bool = False,
         executor: str | None = None) -> list[LaunchItem]:
    """What a launch would do with each item (read-only: nothing is claimed or written). The states are
    refreshed first, as the launch refreshes them (the scheduler asked, dead claims settled) on a read-only
    registry: a run whose job died is planned "resume", not "active" (from a review: the dry run said
    "already running" of a run the launch then resubmitted). An item :func:`workspace_problem` names is
    planned "refused" (:func:`planned_problem` says why).

    A completed run whose inputs from outside its config changed since its launch recorded them (an eval-only
    run's checkpoint, named by its path alone: a ``--force`` retrain of the run it evaluates saves other weights
    there; :func:`inputs_change`) is planned "rerun", and the launch reruns it as ``--force`` reruns a completed
    run (its files moved to ``previous/``, a new W&B id): its results were of other weights, and a skip would
    report them as this checkpoint's. A rerun in place is safe: it is the path ``--force`` takes, and a
    refusal puts the evaluated run back (its ``inputs.json`` too). A stopped run's resumed attempt reads its
    inputs as they are then (an eval-only run evaluates from the start), so its reason only says they changed.
    A run whose launch recorded nothing (launched before arctl recorded inputs) is left as it is.

    A run that would start from another's weights (``after``) whose run the launch refuses it for
    (:func:`source_problem`: not in the workspace, failed or cancelled and not launched with it, completed with no
    checkpoint left; ``executor``: the launch's, where known) is planned "refused", its ``problem`` the launch's
    line (from a hunt: the dry run promised a resume the launch refused, and planned a run from a source whose
    checkpoints were deleted, which failed in its job)."""
    rows: dict[str, RunRecord] = {}  # the registry's rows
    known: dict[str, RunRecord] = {}  # as the launch decides on them
    cells: dict[tuple, list[RunRecord]] = {}  # (experiment, arm, seed) -> the workspace's runs of it
    if workspace.exists():
        from arctl.launch.refresh import fresh_view, settled

        now = time.time()
        with Registry.for_reading(workspace.registry_path) as reg:  # a dry run of a read-only workspace too
            # the runs they start from too (a resume's: not among the items), as the launch reads them (source_problem)
            rows = {rec.run_id: rec for run_id in dict.fromkeys([*(i.run_id for i in items),
                                                                  *(i.after for i in items if i.after)])
                    if (rec := reg.get(run_id)) is not None}
            if any(item.run_id not in rows for item in items):
                for name in sorted({item.experiment for item in items if item.run_id not in rows}):
                    for rec in reg.list(name):
                        cells.setdefault((rec.experiment, rec.arm, rec.seed), []).append(rec)
        views = [v for rec in rows.values() if (v := settled(rec, workspace.run_dir(rec.run_id), now)) is not None]
        known = {rec.run_id: rec for rec in fresh_view(workspace, views)}

    unregistered = set(unregistered_folders(items, workspace, rows))
    launched = {item.run_id for item in items}
    afters = {item.run_id: item.after for item in items}  # a chain's links, for a note on its stale ends
    for item in items:
        rec = known.get(item.run_id)  # as the launch will decide (None: a dead launch's new run, or none)
        item.state = rec.state if rec else None
        # a SLURM job a run starting from this one would depend on (_waits: not one another launch is still
        # submitting, whose job id is its previous attempt's; not another executor's)
        item.job = slurm_job_under_way(rec)
        if item.shares:  # launched (or not) as the run it shares; the reason names that run
            item.action = "shared"
        elif workspace.is_export():
            item.action, item.reason = "refused", "the workspace is an export"
        elif rec is None and item.run_id in unregistered:
            item.action, item.reason = "refused", "its run folder exists, the registry has no row for it"
        elif rec is None:
            item.action, item.reason = "new", "not in the registry"
            if item.needed_by:
                item.reason += f"; {item.needed_by} starts from it"
            scale = str((item.config.get("scale") or {}).get("name", "")) or None
            # not this launch's own runs (a sweep's other grid points: cells of their own) nor another scale's (from
            # a review: extending a lambda grid flagged every new point against the completed one)
            others = [r for r in cells.get((item.experiment, item.arm, item.seed), [])
                      if r.run_id not in launched and (r.scale is None or scale is None or r.scale == scale)]
            if others:  # from a hunt: after an upgrade (or another override) a sweep planned completed cells "new"
                # without a word of the runs it had of them; a report would then find two runs of one cell
                # with the keys it differs in (from a hunt: `arctl sweep baselines` after `arctl sweep paper` planned
                # GRPO "new" beside a completed run that differed in budget_control.forcing_extensions alone)
                item.reason += ("; the workspace has " + ", ".join(f"{r.run_id} ({r.state.lower()}"
                                                                    f"{_differs_in(item.config, workspace, r)})"
                                                                    for r in others[:2])
                                + (f" and {len(others) - 2} more" if len(others) > 2 else "")
                                + " of this arm and seed under another config")
        elif rec.state in states.ACTIVE:
            item.action, item.reason = "active", f"already {rec.state.lower()} (job {rec.job_id})"
        elif rec.state == states.COMPLETED:
            recorded, now = recorded_inputs(item, workspace)
            item.action, item.reason = (("rerun", "completed, --force") if force and not item.needed_by
                                        else ("rerun", f"completed, but {changed}")
                                        if (changed := inputs_change(recorded, now)) is not None
                                        else ("skip", "completed" + _inputs_gone(recorded, now)
                                              + _plugins_note(item, workspace) + _source_rerun_note(item, workspace, rec, afters, known)))
        else:  # (a --force rerun cancelled as it was submitted has no checkpoint: said so, from a hunt)
            from arctl.launch.status_file import read_status

            where = workspace.run_dir(item.run_id)
            saved = has_checkpoint(where)
            # the step its last attempt's end recorded (the backend's newest complete checkpoint: a verl step
            # abandoned on TERM writes none, and the run resumes from an older one; from a hunt)
            step = read_status(where).get("resume_step") if saved else None
            if saved and step is None:  # its job was killed (kill -9, a lost node) and recorded none: its backend
                # reads the folder (from a hunt: the dry run named no step)
                from arctl.launch.job import resume_step

                step = resume_step(item.config, where)
            cannot = None
            if saved and step is None:  # none named: why its backend cannot resume it, where it says (verl: no
                # complete checkpoint before a step its records lost; the launch refuses it in the same line, from a
                # review: the dry run said "resumes from its last checkpoint" of a resume that fails as it starts)
                from arctl.launch.backends import BackendError, backend_name, get_backend

                with suppress(BackendError):  # (the launch's own checks say so)
                    ask = getattr(get_backend(backend_name(item.config)), "resume_problem", None)
                    cannot = ask(item.config, where) if callable(ask) else None
            item.action, item.reason = "resume", f"{rec.state.lower()}: " + (
                f"resumes from step {step}" if step
                else "starts from the beginning (it has no complete checkpoint)" if step == 0
                else f"cannot resume: {cannot}" if cannot
                else "resumes from its last checkpoint" if saved
                else "starts from the beginning (it has no checkpoint)")
            if (changed := inputs_change(*recorded_inputs(item, workspace), "its last attempt was launched")) is not None:
                item.reason += f"; {changed}: this attempt reads it as it is now"
    for item in items:
        if item.note and item.action != "shared":
            item.reason += f"; {item.note}"
    _refuse_reruns_under_active_runs(items, workspace, known)
    by_id = {item.run_id: item for item in items}
    ours = {item.run_id for item in items if item.action in STARTS}
    for item in items:  # a run that starts from one that is not done yet waits for it
        parent = by_id.get(item.after) if item.after else None
        if item.action not in STARTS or not item.after:
            continue
        if parent is not None and parent.action != "skip":
            item.reason += f"; after {item.after}"
        elif problem := source_problem(item, known.get(item.after), workspace, ours, executor):
            item.action, item.reason, item.problem = "refused", problem, problem
    return items


def _starts_from_source(item: LaunchItem, workspace: Workspace) -> bool:
    """Whether ``item``'s attempt loads the weights of the run it starts from: a new run, a rerun (its own files
    go to ``previous/``), a resume with no checkpoint of its own."""
    return item.action in ("new", "rerun") or not has_checkpoint(workspace.run_dir(item.run_id))


def _rebuilds_reference(item: LaunchItem, workspace: Workspace) -> bool:
    """Whether ``item``'s resume reads the weights of the run it starts from again: its KL term's reference
    (``optim.kl_coef`` > 0) is those weights, rebuilt from that run's checkpoint on every resume, except where its
    folder keeps them merged (verl's ``init_model/``)."""
    try:
        kl = float((item.config.get("optim") or {}).get("kl_coef") or 0)
    except (TypeError, ValueError):
        return False
    return kl > 0 and not run_paths(workspace.run_dir(item.run_id))["init_model"].is_dir()


def _archives(run_dir: Path) -> list[Path]:
    """``run_dir``'s archives of its earlier generations (``previous/<time>/``)."""
    try:
        return [p for p in (run_dir / "previous").iterdir() if p.is_dir()]
    except OSError:
        return []


def source_problem(item: LaunchItem, parent: RunRecord | None, workspace: Workspace | None, ours: Iterable[str] = (),
                   executor: str | None = None) -> str | None:
    """Why a launch of ``item`` is refused for the run it starts from (``item.after``; ``parent``: its registry
    record, None where the registry has none), as one line, or None. ``ours``: the runs this launch starts (the
    item waits for them). The one home of the check, which the launch (:func:`_waits`) and its dry run
    (:func:`plan`) make: the run is not in the workspace, or stopped (failed, cancelled) and not launched with it;
    another launch is submitting it; it runs under another executor (``executor``: the launch's, where known);
    or it is completed but has no checkpoint left (deleted to free disk; ``workspace``: where to look, None: not
    looked at) while ``item`` would start from its weights (from a hunt: the job failed, and every later launch
    too, with no word of the remedy)."""
    if not item.after or item.after in set(ours):
        return None
    who = f"{item.experiment}/{item.arm}/s{item.seed} starts from run {item.after}"
    if parent is not None and parent.state == states.COMPLETED:
        if workspace is None:
            return None
        starts = _starts_from_source(item, workspace)
        reference = not starts and _rebuilds_reference(item, workspace)
        if not (starts or reference):
            return None
        source = workspace.run_dir(parent.run_id)
        folder = run_paths(source)["checkpoints"]
        if has_checkpoint(source) or (reference and any(has_checkpoint(a) for a in _archives(source))):
            return None  # (its KL reference may be a checkpoint a rerun of that run archived: the job looks there)
        from arctl.launch.refresh import rerun_one

        if reference:  # from a review: the resume's dry run said "resumes from step 21", the job then failed
            return (f"{who}, whose checkpoints are gone ({folder} is empty or gone, and no archive of it in its "
                    f"previous/ has one): this run's KL term is measured against them and is rebuilt from them on "
                    f"every resume — restore them, or rerun this run from the start with --force; nothing is submitted")
        return (f"{who}, which is COMPLETED but has no checkpoint left ({folder} is empty or gone): "
                f"{rerun_one(parent, workspace.root)}, then launch this run again; nothing is submitted")
    if parent is None or parent.state not in states.ACTIVE:
        said = "is not in this workspace" if parent is None else f"is {parent.state}"
        return (f"{who}, which {said}: launch that run first (`arctl run {parent.experiment if parent else 'EXPERIMENT'}"
                f"{' --arm ' + parent.arm if parent else ''}`), or launch both with `arctl run`")
    if parent.state == states.SUBMITTING:  # another launch's: no job id to wait for
        return (f"{who}, which another launch is submitting now (its job id is not known yet): launch this one "
                "again once `arctl status` shows that run PENDING or RUNNING")
    if executor is not None and parent.executor not in (executor, None):
        return (f"{who}, which runs under the {parent.executor} executor: wait for it (`arctl status`), or cancel it "
                f"and launch both with --executor {executor}")
    return None


def inputs_identity(config: dict) -> dict | None:
    """What identifies the inputs the run of ``config`` reads from outside its config now
    (:meth:`arctl.backends.base.Backend.inputs_identity` of the backend its job runs), as JSON has it; None:
    nothing to identify, or a backend that cannot be loaded here or was written before the method existed."""
    from arctl.launch.backends import BackendError, backend_name, get_backend

    try:
        ask = getattr(get_backend(backend_name(config)), "inputs_identity", None)
    except BackendError:  # the launch's own checks say so
        return None
    identity = ask(config) if ask is not None else None
    return json.loads(json.dumps(identity)) if isinstance(identity, dict) else None


def recorded_inputs(item: LaunchItem, workspace: Workspace) -> tuple[dict | None, dict | None]:
    """(what the launch of ``item``'s run recorded of its inputs, ``inputs.json``: :func:`arctl.launch.rundir.
    write_inputs`; what identifies them now, :func:`inputs_identity`), each None where there is none; the inputs
    are not looked at where nothing was recorded (a run launched before arctl recorded them)."""
    recorded = read_inputs(workspace.run_dir(item.run_id))
    return recorded, None if recorded is None else inputs_identity(item.config)


def inputs_change(recorded: dict | None, now: dict | None, since: str = "it was evaluated") -> str | None:
    """How a run's inputs now (``now``) differ from what its launch recorded (``recorded``;
    :func:`recorded_inputs`), as a reason's words, or None: the same, nothing recorded, or nothing to compare
    with now."""
    if recorded is None or now is None or now == recorded:
        return None

    def shown(value) -> str:
        text = str(value) if value is not None else "(none)"
        return text if len(text) <= 80 else f"{text[:77]}..."

    keys = [k for k in sorted(recorded.keys() | now.keys(), key=lambda k: (k != "path", k))
            if recorded.get(k) != now.get(k)]
    where = f"{now['path']}: " if "path" in now and "path" not in keys else ""
    return (f"the checkpoint it evaluates has changed since {since} ({where}"
            + ", ".join(f"{k} {shown(recorded.get(k))} -> {shown(now.get(k))}" for k in keys) + ")")


def source_rerun(item: LaunchItem, workspace: Workspace,
                 afters: dict[str, str | None] | None = None) -> tuple[str, str] | None:
    """Where the run ``item`` starts from (``after``) was rerun since ``item``'s run took its weights, as a reason's
    words (said in a completed run's plan, never acted on: :func:`_source_rerun_note`), else None. The evidence is
    cheap and needs one clock:
    an archive of that run's earlier files (``previous/<time>/``, which every rerun of a completed run makes) made
    after this run's :data:`INIT_RECORD` (written by its job as it took the weights), both files of the workspace;
    no checkpoint is read or hashed (GBs on verl). A run with no record (launched before the backends wrote it)
    is left as it is. From a hunt: after a ``--force`` rerun of L1-Exact, L1-Max stayed COMPLETED, skipped by every
    launch, named as starting from weights it never saw. Along a chain (``afters``: each run id's own ``after``, of
    the plan's items): where the run it started from is itself such a run (a -> b -> c, ``a`` rerun: ``c`` took
    ``b``'s weights, trained from ``a``'s old ones), that is said of it too (from a review: each level's plan said so
    only once the level before it was rerun). Returns (the words, the run id of the run whose weights are stale: the
    item's, or the one up its chain that took the rerun run's earlier weights)."""
    run, after, seen = item.run_id, item.after, {item.run_id}
    while after and after not in seen:
        try:
            taken = (workspace.run_dir(run) / INIT_RECORD).stat().st_mtime
        except OSError:
            return None
        archives = archived_after(workspace.run_dir(after), taken)
        if archives:
            if run == item.run_id:
                return (f"the run it started from, {after}, was rerun after it started (an archive of it, "
                        f"{archives[0]}, is newer than its {INIT_RECORD})"), run
            through = f" (through {run})" if run != item.after else ""
            return (f"the run it started from, {item.after}, started in turn from the weights of {after}{through}, "
                    f"which was rerun after {run} took them (an archive of it, {archives[0]}, is newer than {run}'s "
                    f"{INIT_RECORD})"), run
        seen.add(after)
        run, after = after, (afters or {}).get(after)
    return None


def _source_rerun_note(item: LaunchItem, workspace: Workspace, rec: RunRecord,
                       afters: dict[str, str | None] | None = None, known: dict[str, RunRecord] | None = None) -> str:
    """A completed run's skip reason's note where the run it started from was rerun since (:func:`source_rerun`):
    said, never rerun by itself. The evidence is file times, which a copy without them (``cp -r``) or another
    host's clock can mislead both ways (from a review: a 200-step run planned rerun after a ``cp -r``), and a
    rerun spends GPU hours: the user decides, with the command that does it."""
    found = source_rerun(item, workspace, afters)
    if found is None:
        return ""
    from arctl.launch.refresh import rerun_one

    why, stale = found
    if stale != item.run_id and (first := (known or {}).get(stale)) is not None:  # from a review: this run's own
        # --force alone retrained it from the same stale weights, and the note stayed
        return (f"; but {why}: rerun {stale} first ({rerun_one(first, workspace.root)}, from that run's weights now), "
                f"then this one: {rerun_one(rec, workspace.root)}")
    return f"; but {why}: {rerun_one(rec, workspace.root)}, from that run's weights now"


def _completed_reruns(items: list[LaunchItem]) -> dict[str, LaunchItem]:
    """The completed runs a plan reruns (``--force``, or changed inputs), by run id."""
    return {i.run_id: i for i in items if i.action == "rerun" and i.state == states.COMPLETED}


def _refuse_reruns_under_active_runs(items: list[LaunchItem], workspace: Workspace,
                                     known: dict[str, RunRecord]) -> None:
    """A completed run this launch would rerun (``--force``, or changed inputs) while runs of the workspace that
    start from it are active (queued, waiting for it, running) is planned "refused": the rerun moves its
    checkpoints to ``previous/`` and trains new ones, and such a run fails as it starts, or takes a checkpoint of
    the rerun's first steps (from a review: a queued dependent failed "has no checkpoint to start from" a second
    after a ``--force``). Read from the registry's active rows and their frozen configs (``trainer.init_run``)."""
    reruns = _completed_reruns(items)
    if not reruns or not workspace.exists():
        return
    launched = {i.run_id for i in items}
    waiting: dict[str, list[str]] = {}
    with Registry.for_reading(workspace.registry_path) as reg:
        active = [r for r in reg.list(states_in=states.ACTIVE) if r.run_id not in launched]
    for rec in active:
        if (source := run_starts_from(workspace.run_dir(rec.run_id))) in reruns:
            waiting.setdefault(source, []).append(f"{rec.run_id} ({(known.get(rec.run_id) or rec).state.lower()})")
    for source, runs in waiting.items():
        item = reruns[source]
        problem = (f"{source} would be rerun while {', '.join(runs)} {'start' if len(runs) > 1 else 'starts'} from "
                   f"its weights — wait for {'them' if len(runs) > 1 else 'it'} to end, or `arctl cancel` "
                   f"{'them' if len(runs) > 1 else 'it'} first (the rerun moves its checkpoints to previous/)")
        item.action, item.reason, item.problem = "refused", problem, problem


def forced_sources_note(items: list[LaunchItem], workspace: Workspace) -> str | None:
    """The note of a plan that reruns completed runs (``--force``) that the workspace's other runs start from:
    those runs keep the weights of the forced run's generation they started from, until a ``--force`` launch of
    theirs reruns them (their plans say so: :func:`source_rerun`); None where no forced run has any. Read from the workspace's
    :data:`INIT_RECORD` files (what each run started from: one small file per such run)."""
    forced = _completed_reruns(items)
    if not forced or not workspace.runs_dir.is_dir():
        return None
    launched = {i.run_id for i in items if i.action in STARTS}
    starting: dict[str, list[str]] = {}
    for record in sorted(workspace.runs_dir.glob(f"*/{INIT_RECORD}")):
        try:
            source = json.loads(record.read_text()).get("run_id")
        except (OSError, ValueError, AttributeError):
            continue
        if source in forced and record.parent.name not in launched:
            starting.setdefault(source, []).append(record.parent.name)
    if not starting:
        return None
    said = "; ".join(f"{', '.join(runs)} {'start' if len(runs) > 1 else 'starts'} from {source}"
                     for source, runs in starting.items())
    if sum(map(len, starting.values())) > 1:
        return (f"{said}: this launch does not rerun them; they keep the results of the weights they started from "
                "until `arctl run ... --arm ARM --force` of their arms reruns them from the new weights (their plans "
                "say so), and the runs that start from them in turn after them")
    return (f"{said}: this launch does not rerun it; it keeps the results of the weights it started from until "
            "`arctl run ... --arm ARM --force` of its arm reruns it from the new weights (its plan says so), and the "
            "runs that start from it in turn after it")


def _plugins_note(item, workspace: Workspace) -> str:
    """A completed run's skip reason's words where a plugin it uses changed since it ran
    (:func:`arctl.launch.provenance.plugins_changed`): a plugin's version is not part of the run id."""
    from arctl.launch.provenance import plugins_changed, read_provenance

    changed = plugins_changed(read_provenance(workspace.run_dir(item.run_id)), item.config)
    return f"; {changed}: --force retrains it with the code installed now" if changed else ""


def _inputs_gone(recorded: dict | None, now: dict | None) -> str:
    """A completed run's skip reason's words where the inputs its launch recorded cannot be read now (a checkpoint
    removed, or not saved again yet by a retrain of its run): nothing to compare with, nothing to evaluate."""
    if recorded is None or now is not None:
        return ""
    where = f" ({recorded['path']})" if "path" in recorded else ""
    return f"; the checkpoint it evaluated{where} cannot be read now: not compared"


def has_checkpoint(run_dir: Path) -> bool:
    """Whether ``run_dir`` has anything in its ``checkpoints/`` (what a resume starts from; without it, the
    job trains from its first step)."""
    folder = run_paths(run_dir)["checkpoints"]
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:  # unreadable: the job's own start says so
        return True


def workdir_problem(workspace: Workspace) -> str | None:
    """Why the workspace's folder cannot hold runs, or None: :meth:`Workspace.layout_problem` (a file on
    its path, a ``registry.sqlite`` that is a folder, a ``runs`` that is a file), then
    :func:`arctl.config.files.folder_problem` (a name too long, a folder where no file can be created).
    Named as the user gave it (``--workdir``, ``ARCTL_HOME`` or the default). First, a path W&B and the
    registry cannot name (:func:`arctl.launch.workspace.path_encoding_problem`: not UTF-8 in this locale), so
    that the dry run says so too."""
    from arctl.config.files import folder_problem, workdir_remedy
    from arctl.launch.workspace import path_encoding_problem

    if problem := path_encoding_problem(workspace.root, workspace.origin) or workspace.layout_problem():
        return problem
    if problem := folder_problem(workspace.root):
        return f"{workspace.named}: {problem} — {workdir_remedy(workspace.origin)}"
    return None


def planned_problem(items: list[LaunchItem], workspace: Workspace) -> str | None:
    """:func:`workdir_problem`, then :func:`workspace_problem` for items :func:`plan` has planned (their
    folders are not scanned again), then the first item's ``problem`` (:func:`source_problem`)."""
    return workdir_problem(workspace) or workspace_problem(
        items, workspace, (), found=[i.run_id for i in items if i.action == "refused" and not i.problem]) or next(
        (i.problem for i in items if i.problem), None)


def dry_run_scripts(items: list[LaunchItem], workspace: Workspace, executor: str,
                    array_parallelism: int | None = None, active: dict[str, str] | None = None,
                    starts_from: Mapping[str, str | None] | None = None,
                    found: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(title, sbatch script) as they would be submitted (SLURM), in the order :func:`_submit_slurm` submits them
    (:func:`slurm_submissions`: the same plan), without submitting anything. ``active``: run id -> job id of runs
    under way from an earlier launch, which a run starting from one waits for (:func:`_waits`) and whose jobs hold
    slots of the bound (:func:`held_slots`: their ids are shown, where the launch's own jobs' are placeholders);
    ``starts_from``: run id -> the run it starts from, of those runs (:func:`held_slots`); ``found``: run id -> the
    state of those runs as the plan found them (:func:`plan`: not asked again); the other runs under way of the
    items' sweep (experiment) are added to them, and the states of the array tasks under way found now
    (:func:`siblings_under_way`), as the launch adds them."""
    active = active or {}
    if executor != "slurm" or not items:
        return []
    scripts = []
    folder = workspace.jobs_dir / "%j"
    by_id = {item.run_id: item for item in items}
    beside = siblings_under_way(items, workspace, None, {*by_id, *active}, active, found)
    active, starts_from = {**active, **beside.jobs}, {**(starts_from or {}), **beside.starts_from}
    rays = {item.run_id: backend_job_setup(item.config, workspace.run_dir(item.run_id)) for item in items}
    waiting = {i.run_id for i in items if i.after in by_id or i.after in active}  # (_waits, as the launch has them)
    steps = slurm_submissions(items, array_parallelism, waiting, rays, ask_site=False,  # a preview: not the controller
                              held=held_slots(active, workspace, starts_from, by_id, beside.tasks))
    arrays = [step for step in steps if step.array is not None]

    def holder(slot: str | int | UnderWay, short: bool = False) -> str:  # whose end frees the slot a job takes
        if isinstance(slot, UnderWay):
            return (f"job {slot.last}, under way (array {slot.job}'s last task: none of its tasks starts after it)"
                    if slot.by_last else f"job {slot.job}, under way (an array: all its tasks)" if slot.array
                    else f"{slot.run}'s job {slot.job}, under way")
        if isinstance(slot, str):
            return f"{slot}'s job"
        if short:
            return f"array {slot + 1}"
        n = len(arrays[slot].runs)
        return (f"the array of {n} run{'s' if n > 1 else ''}" + (f" (array {slot + 1})" if len(arrays) > 1 else "")
                + ", all its tasks")

    def with_slots(params: dict, slots: tuple) -> tuple[dict, str]:  # (params, whose ids replace SLOT_JOB)
        for slot in slots:
            params = slot_parameters(params, slot.waited if isinstance(slot, UnderWay) else "SLOT_JOB")
        ours = sum(not isinstance(slot, UnderWay) for slot in slots)
        return params, ("" if not ours else ", whose id replaces SLOT_JOB" if ours == 1
                        else ", whose ids replace SLOT_JOB in turn")

    for step in steps:
        params = step.params
        if step.array is not None:
            chunk, k = step.runs, step.array
            title = f"sbatch script ({len(chunk)} run{'s' if len(chunk) > 1 else ''}{', one array' if len(chunk) > 1 else ''}"
            if len(arrays) > 1:  # as _submit_slurm submits them: their shares of the one bound, and the slot each waits for
                title += (f"; array {k + 1} of {len(arrays)}: at most {params['array_parallelism']} of its tasks at "
                          f"once, {step.bound} in all")
            if step.slots:
                params, ids = with_slots(params, step.slots)
                title += (f"; it starts once {' and '.join(holder(slot, True) for slot in step.slots)} "
                          f"{'has' if len(step.slots) == 1 else 'have'} ended"
                          + (": that job's id replaces SLOT_JOB" if ids == ", whose id replaces SLOT_JOB" else ids))
            scripts.append((title + ")", render_sbatch(params, folder, len(chunk))))
            continue
        item, slot = step.runs[0], ""
        if step.waits:  # alone, once the job of the run it starts from is known
            job = "PARENT_JOB" if item.after in by_id else active[item.after]
            params = after_parameters(params, job, check=False)
        if step.slots:
            params, ids = with_slots(params, step.slots)
            slot = (f"; at most {step.bound} at once: it waits for the end of "
                    f"{' and '.join(holder(s) for s in step.slots)}{ids}")
        if step.waits:
            said = "its job id replaces PARENT_JOB" if item.after in by_id else f"job {job}, under way"
            scripts.append((f"sbatch script for {item.run_id} (after the job of {item.after}: {said}{slot})",
                            render_sbatch(params, folder, 1)))
        else:
            scripts.append((f"sbatch script for {item.run_id} (verl with Ray{slot})", render_sbatch(params, folder, 1)))
    return scripts


def _groups(items: list[LaunchItem], array_parallelism: int | None,
            ask_site: bool = True) -> list[tuple[dict, list[LaunchItem]]]:
    """Items sharing sbatch parameters, in chunks of at most cluster.max_array_size. Runs that receive other
    secrets are submitted apart (online runs the API key, a run its ``cluster.secrets``; job_environment):
    sbatch stores the environment with every task of the array (from a review: one online arm put the key
    into SLURM's state of every offline task beside it)."""
    by_params: dict[str, tuple[dict, list[LaunchItem]]] = {}
    for item in items:
        name = item.sweep or item.experiment
        params = slurm_parameters(item.config["cluster"], name, array_parallelism)
        key = json.dumps([params, sorted(passed_secrets([item]))], sort_keys=True)
        by_params.setdefault(key, (params, []))[1].append(item)
    out = []
    for params, group in by_params.values():
        size = array_chunk_size(group[0].config["cluster"], ask_site)
        out += [(params, group[i : i + size]) for i in range(0, len(group), size)]
    return out


@contextmanager
def _stops_as_interrupts():
    """SIGTERM and SIGHUP (a ``kill``, a closed ssh session) raise KeyboardInterrupt while a launch runs, as
    Ctrl-C does, so that its rollback runs: the claims undone, a held job cancelled (from a hunt: either signal
    ended the process where it stood, leaving a held job queued for ever and the rows SUBMITTING). The main
    thread only (where Python delivers signals); the handlers before are put back. A signal the process was
    started ignoring (``nohup``: SIGHUP) stays ignored (:func:`arctl.launch.job.heeded`)."""
    import signal
    import threading

    from arctl.launch.job import heeded

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    before = {sig: signal.signal(sig, interrupt) for sig in heeded((signal.SIGTERM, signal.SIGHUP))}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def launch(*args, **kwargs) -> LaunchResult:
    """:func:`launch_items` with SIGTERM and SIGHUP taken as Ctrl-C (:func:`_stops_as_interrupts`)."""
    with _stops_as_interrupts():
        return launch_items(*args, **kwargs)


def launch_items(
    items: list[LaunchItem],
    workspace: Workspace,
    executor: str | None = None,
    force: bool = False,
    array_parallelism: int | None = None,
    members: Iterable[str] = (),
    echo: Callable[[str], None] = lambda _msg: None,
    executor_by: str = "--executor",
) -> LaunchResult:
    """Claim, prepare and submit ``items``; returns what was submitted and what was skipped
    (shared items among them, with the reason "shared: ..."). ``executor_by``: where ``executor``
    came from, as the launch's executor line says it."""
    items = in_chain_order(items)  # each run after the one it starts from: as they are submitted, and said
    shared = [item for item in items if item.shares]
    members = list(members)
    if shared:
        items = [item for item in items if not item.shares]
    if not items and not shared:
        raise LaunchError("nothing to launch")
    # every cell may share a run the workspace already has: then only that is recorded
    name, note = choose_executor(executor, (items or shared)[0].config.get("cluster", {}).get("executor"), executor_by)
    if problem := workspace_path_problem(workspace, name):  # before anything is read or written (executor_problem too)
        raise LaunchError(problem)
    from arctl.launch.workspace import path_encoding_problem

    if problem := path_encoding_problem(workspace.root, workspace.origin):  # before plan() opens the registry
        raise LaunchError(problem)
    import copy

    planned = plan([copy.copy(i) for i in items], workspace, force, name)
    starting = [i for i in planned if i.action in STARTS]
    executor_problem(name, items, array_parallelism, workspace, starting)
    if problem := workdir_problem(workspace):
        raise LaunchError(problem)
    if workspace.is_export():  # before anything is written
        raise LaunchError(workspace_problem(items, workspace, ()))
    if not workspace.exists() and (problem := workspace_problem(items, workspace, ())):
        raise LaunchError(problem)  # a deleted registry: refused before an empty one is made (from an audit)
    if problem := next((i.problem for i in planned if i.problem), None):  # the run it starts from (source_problem):
        raise LaunchError(problem)  # before anything is claimed (_waits checks it again under the registry's lock)
    from arctl.launch.disk_room import disk_note

    if room := disk_note(starting, workspace):  # the runs' checkpoints exceed the free disk: said, not refused
        echo(f"note: {room}")
    if forced := forced_sources_note(planned, workspace):  # the runs that start from a rerun one: said, as the dry run
        echo(f"note: {forced}")
    for said in backend_notes(starting):  # e.g. a tiny warm-up trained before step 0 (from a hunt: unsaid)
        echo(f"note: {said}")
    if shell := wandb_shell_note(starting):  # W&B variables of the shell the runs do not take (as the dry run)
        echo(f"note: {shell}")
    result = LaunchResult(executor=name, executor_note=note, items=items + shared)
    existed = workspace.root.exists()
    workspace.root.mkdir(parents=True, exist_ok=True)
    try:
        return _launch(items, workspace, name, result, force, array_parallelism, members, echo, shared)
    except BaseException:
        # a workspace this launch created and nothing went out of: leave no trace of it
        if not existed and not any(workspace.runs_dir.glob("*")):
            shutil.rmtree(workspace.root, ignore_errors=True)
        raise


def _refuse_backend_problems(items: list[LaunchItem], method: str, advice: str) -> None:
    """Raise LaunchError (one line) for the first item whose backend's ``method`` (a
    ``Backend.*_problem`` check) names a problem; ``advice`` is formatted with ``clusters``, the
    cluster profiles that submit to SLURM. A problem given as ``(line, hint)`` carries its own advice instead
    (the tiny backend's GPU request: "pass cluster=<profile>" pointed at the very profiles that asked for the
    GPUs). A backend written before the check existed has none."""
    from arctl.backends.base import get_backend
    from arctl.compose.paths import group_options

    for item in items:
        check = getattr(get_backend(str(item.config.get("backend", "tiny"))), method, None)
        problem = check(item.config) if check is not None else None
        if isinstance(problem, tuple):
            raise LaunchError(f"{item.experiment}/{item.arm}: {problem[0]}; {problem[1]}")
        if problem:
            clusters = ", ".join(c for c in group_options("cluster") if c not in ("local", "debug", "auto"))
            raise LaunchError(f"{item.experiment}/{item.arm}: {problem} — {advice.format(clusters=clusters)}")


def gpu_problem(items: list[LaunchItem]) -> None:
    """Refuse (LaunchError) runs that cannot run on this machine (the local/debug executor runs them
    here; e.g. a verl run needing a GPU on a machine without one): one line naming the cluster
    profiles that would run them."""
    _refuse_backend_problems(items, "local_problem", (
        "submit it to a cluster (cluster=<profile>: {clusters}; or --executor slurm), or use --scale tiny; "
        "verl.smoke=true, verl.rehearsal_steps=N and verl.device=cpu run without a GPU"))


# the characters SLURM reads in a job's log paths (--output/--error filename patterns: ``%`` starts a replacement,
# ``%20`` became ``0`` and ``%x`` the job's name) or drops there (sbatch's ``#SBATCH`` parser drops a ``\``, even in
# quotes): a workspace path holding one named log files in folders that did not exist
SLURM_PATH_CHARS = "%\\"


def workspace_path_problem(workspace: Workspace, executor: str) -> str | None:
    """Why executor ``executor`` cannot run jobs in ``workspace`` by its path alone, or None: a control character
    (any executor), and under SLURM a character of :data:`SLURM_PATH_CHARS`: submitit writes the workspace's
    ``jobs/`` folder into ``#SBATCH --output/--error`` and ``srun --output/--error``, so every job (each task of an
    array, each resume) failed as it started, with no log, where the local executor ran the same path (from a
    hunt: ``--workdir 'my%20runs'``). The launch asks before anything is written; its dry run too
    (:func:`executor_problem`)."""
    from arctl.config.files import workdir_remedy

    root = str(workspace.root)
    if any(ch in root for ch in "\n\r\t\x00"):
        return f"workspace path {root!r} contains a control character — {workdir_remedy(workspace.origin)}"
    found = [ch for ch in SLURM_PATH_CHARS if ch in root]
    if executor == "slurm" and found:
        return (f"{workspace.named} contains {' and '.join(repr(ch) for ch in found)}, which SLURM reads in its jobs' "
                "log paths (--output/--error: '%' starts a pattern, a '\\' is dropped): every job would fail as it "
                f"starts, with no log — {workdir_remedy(workspace.origin)} (a path without '%' or '\\'; a workspace "
                "can be moved: mv it, then give --workdir NEW), or run it with --executor local")
    return None


# the cluster keys only a SLURM submission reads (arctl.launch.executors.slurm_parameters, and slurm_arrays'
# max_array_size); the local and debug executors run the job in this shell, with no time limit
SLURM_ONLY_KEYS = ("partition", "account", "qos", "constraint", "time_min", "max_array_size", "sbatch_extra", "setup")


def backend_notes(items: list[LaunchItem]) -> list[str]:
    """What each backend says the runs ``items`` (those a launch starts) do before their first step that takes
    notable time (``Backend.launch_notes``: the tiny warm-up of a key not cached), said by the launch and its dry run
    (``--json``: ``backend_notes``). A backend not installed here, or without the method, says nothing."""
    from arctl.launch.backends import BackendError, get_backend

    by_backend: dict[str, list[dict]] = {}
    for item in items:
        if not item.shares:
            by_backend.setdefault(str(item.config.get("backend", "tiny")), []).append(item.config)
    notes: list[str] = []
    for name, configs in by_backend.items():
        try:
            notes += list(get_backend(name).launch_notes(configs) or [])
        except (BackendError, AttributeError):
            continue
    return notes


def wandb_shell_note(items: list[LaunchItem], environ=None) -> str | None:
    """One line naming the W&B variables of this shell (``WANDB_ENTITY``, ``WANDB_TAGS``, ``WANDB_NOTES``:
    :data:`arctl.track.identity.SHELL_FALLBACKS`) that the runs ``items`` do not use, their configs not setting
    them (a run's W&B record takes those from its config alone: :meth:`WandbIdentity.unset_env`), or None. From a
    hunt: they went into the runs' .wandb files unshown; now dropped, said here so that a user who relied on
    ``WANDB_ENTITY`` for online runs learns the config key."""
    from arctl.track.identity import SHELL_FALLBACKS, WandbIdentity

    environ = os.environ if environ is None else environ
    unused = {var for item in items for var in WandbIdentity.from_config(item.config, None).unset_env()
              if environ.get(var)}
    if not unused:
        return None
    named = [(key, var) for key, var in SHELL_FALLBACKS.items() if var in unused]
    return (f"{', '.join(var for _, var in named)} of this shell {'is' if len(named) == 1 else 'are'} not used: a "
            f"run's W&B {', '.join(key for key, _ in named)} come from its config alone (a new launch with "
            f"{' '.join(f'wandb.{key}=...' for key, _ in named)} gives them; a resumed run keeps its config's)")


def slurm_only_note(executor: str, items: list[LaunchItem]) -> str | None:
    """One line naming the :data:`SLURM_ONLY_KEYS` that runs in ``items`` set away from the schema's defaults
    (:class:`arctl.config.schema.ClusterConfig`) where ``executor`` is not SLURM, or None. A note, not a refusal:
    ``auto`` falls back to local where no controller answers. From a hunt: ``cluster.setup`` (an ``export HF_HOME``,
    a venv) was silently not run by the local executor, which trained in another environment."""
    if executor == "slurm":
        return None
    from arctl.config.schema import ClusterConfig

    defaults = ClusterConfig()
    keys = [key for key in SLURM_ONLY_KEYS
            if any((item.config.get("cluster") or {}).get(key, getattr(defaults, key)) != getattr(defaults, key)
                   for item in items)]
    if not keys:
        return None
    said = ", ".join(f"cluster.{key}" for key in keys)
    setup = " (cluster.setup's lines are not run: run them in the shell you launch from)" if "setup" in keys else ""
    return (f"{said} {'apply' if len(keys) > 1 else 'applies'} to SLURM jobs only: the {executor} executor runs these "
            f"jobs on this machine without {'them' if len(keys) > 1 else 'it'}{setup}")


def executor_problem(name: str, items: list[LaunchItem], array_parallelism: int | None, workspace: Workspace,
                     starting: list[LaunchItem]) -> None:
    """Refuse (LaunchError) what executor ``name`` cannot run, before anything is claimed or written:
    a workspace path it cannot run jobs in (:func:`workspace_path_problem`), a folder it writes that another user's
    umask left this one unable to write (:func:`unwritable_problem`),
    a GPU run on this machine without one (local/debug), bad sbatch options or a GPU run asking SLURM
    for no GPU (slurm), a ``cluster.secrets`` name this shell does not set (:func:`unset_secret_problem`), then
    what would fail as the job of a run in ``starting`` (those :func:`plan` starts: new, resumed, rerun; not one
    it skips) starts (:func:`start_problem`). The launch and its dry run (which shows the refusal) both ask here."""
    if problem := workspace_path_problem(workspace, name):
        raise LaunchError(problem)
    if problem := unwritable_problem(starting, workspace, name):
        raise LaunchError(problem)
    if name in ("local", "debug"):
        gpu_problem(items)
    if name == "slurm":
        for item in items:
            slurm_parameters(item.config.get("cluster", {}), item.sweep or item.experiment, array_parallelism)
        slurm_problem(starting)  # (a completed run the launch skips needs nothing of the cluster; from a review)
        online_key_problem(starting)
    unset_secret_problem(starting, workspace)
    start_problem(starting, workspace)


def written_places(starting: list[LaunchItem], workspace: Workspace, executor: str) -> list[Path]:
    """The existing files and folders a launch of ``starting`` (the runs :func:`plan` starts) with ``executor``
    writes (none where it starts none): the registry (and its -wal and -shm), ``runs/`` (where a new run's folder is
    made), ``jobs/`` (the local queue's log,
    submitit's and SLURM's job files), the local queue's ``local-slots/`` and this host's folder in it (slot files
    and waiting markers), and each run folder that is there (a resume's, a rerun's), with the folders directly in it: its files are
    rewritten by renames (config.yaml, status.json, metrics.jsonl...), a resume writes new files into checkpoints/,
    wandb/ (W&B's own wandb/ in it too) and job/, and a rerun moves checkpoints/ and wandb/ into previous/, which
    needs their own write permission (a folder moved to another parent rewrites its ``..``), not their subfolders' (files written in place:
    none, a local queue's slot files are locked read-only where they cannot be written). From a review: every
    folder at any depth was asked, so a checkpoint a user kept write-protected (``checkpoints/best``, ``chmod -R
    a-w``) refused the resume that an older arctl ran, which never writes there."""
    from arctl.launch.local_queue import SLOTS_DIR, slots_folder

    if not starting:  # a launch that starts nothing writes the registry alone (which says whose it is itself)
        return []
    registry = workspace.registry_path
    places = [registry, registry.with_name(registry.name + "-wal"), registry.with_name(registry.name + "-shm")]
    if any(not workspace.run_dir(item.run_id).exists() for item in starting):
        places.append(workspace.runs_dir)  # (a resume or a rerun makes nothing there)
    if executor in ("local", "slurm"):
        places.append(workspace.jobs_dir)
    if executor == "local":
        places += [workspace.root / SLOTS_DIR, slots_folder(workspace.root)]
    for item in starting:
        run_dir = workspace.run_dir(item.run_id)
        if run_dir.is_dir() and not run_dir.is_symlink():
            places.append(run_dir)
            with suppress(OSError):
                places += sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.is_symlink())
            # and W&B's own folder in the run's W&B folder: each attempt makes its run folder there, and a restart
            # moves it to wandb-discarded/ (from a review: a write-protected wandb/wandb passed the check and the job
            # failed as it started)
            places.append(wandb_dir(run_dir) / W_AND_B_OWN)
    return [place for place in dict.fromkeys(places) if place.exists()]


def unwritable_problem(starting: list[LaunchItem], workspace: Workspace, executor: str) -> str | None:
    """Why a launch of ``starting`` cannot write what it writes (:func:`written_places`), or None: the places
    another user owns that this one cannot write, said once, in :func:`arctl.config.files.not_writable`'s words
    for the first (owner, group, mode), with the one command that fixes them all (``chmod -R g+w`` on the
    workspace, by their owner). Asked before anything is claimed or written; the dry run asks too
    (:func:`executor_problem`). From a hunt: in a workspace a group shares, where one member left umask 022, another
    member's launch failed on the first folder it met ("runs/<id>: Permission denied", and a resume's "could not
    undo" over files it never changed), one path per attempt, and named neither the owner nor the fix."""
    from arctl.config.files import not_writable

    found = [(place, why) for place in written_places(starting, workspace, executor)
             if (why := not_writable(place)) is not None]
    if not found:
        return None
    (first, why), rest = found[0], [place for place, _ in found[1:]]
    root = workspace.root
    others = ""
    if rest:
        shown = ", ".join(str(place) for place in rest[:3])
        others = f"; so are {shown}" + (f" and {len(rest) - 3} more" if len(rest) > 3 else "")
    stats = []
    for place, _ in found:
        with suppress(OSError):
            stats.append(place.stat())
    if stats and all(st.st_uid == os.geteuid() for st in stats):  # the user's own: their owner's bit, not a group
        places = " ".join(shlex.quote(str(place)) for place, _ in found)
        return (f"this launch cannot write {first}: {why}{others} — they are yours: give them back their owner's "
                f"write permission (chmod u+w {places}), then run this again; nothing was written")
    mine, shown_root = {os.getegid(), *os.getgroups()}, shlex.quote(str(root))
    command = (f"chmod -R g+w {shown_root}" if all(st.st_gid in mine for st in stats)
               else f"chgrp -R GROUP {shown_root}; chmod -R g+w {shown_root}")
    who = "their owner" if len({st.st_uid for st in stats}) <= 1 else "each of their owners"
    return (f"this launch cannot write {first}: {why}{others} — {who} can let the group write the whole workspace "
            f"at once ({command}), then run this again; nothing was written")


def online_key_problem(items: list[LaunchItem], environ=None) -> None:
    """Refuse (LaunchError) an online run's SLURM submission that has no way to its W&B key but SLURM's state:
    sbatch stores the environment it exports (in its state directory, and a site may keep it in accounting),
    so arctl never exports ``WANDB_API_KEY`` there unless the run names it in ``cluster.secrets``. The job then
    reads the key where ``wandb login`` put it (``~/.netrc``, the cluster's home folder). From an audit: an
    online run's key was in ``slurm/ctld/hash.N/job.N/environment`` while the job existed."""
    from arctl.track.identity import netrc_secrets

    env = os.environ if environ is None else environ
    online = [i for i in items if needs_api_key([i]) and API_KEY_ENV not in _named_secrets(i)]
    if online and not netrc_secrets(env):
        item = online[0]
        raise LaunchError(
            f"{item.experiment}/{item.arm}: wandb.mode=online on SLURM needs the W&B key where its job can read it, "
            f"and arctl does not put {API_KEY_ENV} into SLURM's state (sbatch stores a job's environment): run "
            f"`wandb login` on the cluster (the job reads ~/.netrc), or pass it anyway with "
            f"cluster.secrets=[{API_KEY_ENV}] (then SLURM stores it with the job)")


VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")  # a name an error may show: a pasted token has lower-case letters


def unset_secret_problem(items: list[LaunchItem], workspace: Workspace, environ=None) -> None:
    """Refuse (LaunchError, one line) a run whose ``cluster.secrets`` names a variable this shell does not set
    (or sets empty): its job would go without it (a gated model's ``HF_TOKEN``), or the entry is a secret's value
    pasted in place of its name, which the launch would freeze into config.yaml (and the run into W&B's config).
    From a hunt: ``cluster.secrets=[hf_...]`` and an unset ``HF_TOKEN`` were both submitted without a word. Every
    executor: the config is frozen wherever the run goes. A name the run's frozen config.yaml already holds (a
    resume, a ``--force`` rerun) is not refused: it is written already, and ``arctl resume`` cannot change it.
    The entry is shown only where it looks like a variable's name (:data:`VARIABLE_NAME`), never a value."""
    from arctl.launch.rundir import read_run_config

    env = os.environ if environ is None else environ
    for item in items:
        named = [str(n) for n in (item.config.get("cluster") or {}).get("secrets") or []]
        unset = [n for n in named if not (env.get(n) or "").strip()]
        if unset and item.action in ("resume", "rerun"):
            try:
                frozen = read_run_config(workspace.run_dir(item.run_id)).get("cluster") or {}
            except Exception:  # noqa: BLE001 - no readable config.yaml: nothing frozen to keep
                frozen = {}
            unset = [n for n in unset if n not in {str(f) for f in frozen.get("secrets") or []}]
        if not unset:
            continue
        name = unset[0]
        where = f"{item.experiment}/{item.arm}: cluster.secrets"
        if VARIABLE_NAME.fullmatch(name):
            raise LaunchError(f"{where} names {name}, which this shell does not set: it takes the names of environment "
                              f"variables of the shell you launch from, e.g. [HF_TOKEN] — set {name} here "
                              f"(export {name}=...), or leave it out of cluster.secrets")
        raise LaunchError(f"{where}[{named.index(name)}] is no variable this shell sets (not shown: it may be a "
                          "secret's value, pasted in place of a name): it takes the names of environment variables, "
                          "e.g. [HF_TOKEN] — name the variable that holds it, set in the shell you launch from")


def start_problem(items: list[LaunchItem], workspace: Workspace) -> None:
    """Refuse (LaunchError, one line) the first run whose job would fail as it starts, found here
    before it queues for its GPUs (the backend's ``launch_problem``: e.g. verl's own config check, a
    parallel layout verl checks only on the GPUs, a dataset file that is not there, a tiny run's warm-up cache
    that cannot be written, a resume that cannot work). Only a resume is shown its run's folder: a new run has
    none, and a rerun starts over, its previous files moved aside (from a review: a ``--force`` rerun of a
    completed verl run was refused with the line of a resume from the folder it would never read)."""
    from arctl.backends.base import get_backend

    for item in items:
        check = getattr(get_backend(str(item.config.get("backend", "tiny"))), "launch_problem", None)
        run_dir = workspace.run_dir(item.run_id) if item.action == "resume" else None
        problem = check(item.config, run_dir) if check is not None else None
        if problem:
            raise LaunchError(f"{item.experiment}/{item.arm}: {problem} (its job would fail as it "
                              "starts)")


def slurm_problem(items: list[LaunchItem]) -> None:
    """Refuse (LaunchError) runs whose ``cluster`` section asks SLURM for less than the backend
    needs (e.g. a GPU run that requests no GPU: ``cluster=auto`` picked SLURM with its laptop-sized
    defaults): one line naming the cluster profiles."""
    _refuse_backend_problems(items, "slurm_problem",
                             "pass cluster=<profile> ({clusters}, or your site's) or the cluster.* keys it needs")


def _launch(items, workspace, name, result, force, array_parallelism, members, echo, shared=()) -> LaunchResult:
    by_id = {item.run_id: item for item in items}
    token = new_claim_token()
    with Registry(workspace.registry_path) as reg:
        from arctl.launch.refresh import refresh, rerun_one, revive_requeued

        existing = [r for r in (reg.get(i.run_id) for i in items) if r is not None]
        if problem := workspace_problem(items, workspace, [r.run_id for r in existing]):
            raise LaunchError(problem)
        # a killed job must be seen as failed before we decide, a dead launch's claim undone (or given its job)
        revive_requeued(reg, refresh(reg, workspace, existing))  # (a job SLURM brought back: not a second one)
        # --force reruns the runs asked for, not a completed run brought along because one starts from it
        forced = {i.run_id for i in items if i.needed_by is None} if force else False
        claim = _claim(reg, items, workspace, token, forced, members)
        def copy_members() -> None:  # the registry's membership rows, copied where `arctl repair` finds them (the
            # run folders), once the launch went through: a refused one leaves every run folder as it was
            from arctl.launch.shared import write_members

            for rec in [*claim.claimed, *(r for r, _ in claim.skipped)] if members else []:
                with contextlib.suppress(OSError):
                    write_members(workspace.run_dir(rec.run_id), members)
        for rec, reason in claim.skipped:
            if rec.state == states.COMPLETED and not workspace.run_dir(rec.run_id).exists():  # from a hunt: skipped
                reason += (f"; but its folder {workspace.run_dir(rec.run_id)} is gone (nothing to report from): "
                           f"{rerun_one(rec, workspace.root)}")  # without a word, while reports said to run it
            result.skipped.append((by_id[rec.run_id], reason))
            if rec.state in states.ACTIVE:
                result.in_flight.append(rec.run_id)
        claimed = []
        created: set[str] = set()  # run folders this launch made: the only ones a refusal may remove
        archived: dict[str, Path] = {}  # a --force rerun's previous files: a refusal puts them back
        kept: dict[str, dict[Path, bytes | None]] = {}  # a resumed run's files this launch rewrites: likewise
        job_ids: dict[str, str] = {}  # filled as jobs go out, so a failing later chunk keeps earlier ones
        version, specs_seen = None, {}
        with _claims_kept_fresh(workspace.registry_path, token):
            try:  # preparing the folders too: a full disk or Ctrl-C there is undone like a refused submission
                for rec in claim.claimed:
                    item = by_id[rec.run_id]
                    previous = (rec.previous or {}).get("state")
                    item.action = "new" if previous is None else ("rerun" if previous == states.COMPLETED else "resume")
                    if item.action == "resume" and (problem := _wandb_mode_change(item, workspace)):
                        raise LaunchError(problem)
                    item.config = frozen_config(item.config, item.run_id, rec.wandb_run_id)
                    if not workspace.run_dir(item.run_id).exists():
                        created.add(item.run_id)
                    elif previous is not None and previous != states.COMPLETED:  # a resume
                        kept[item.run_id] = _contents(workspace.run_dir(item.run_id), RESUME_REWRITES)
                    if previous == states.COMPLETED and (archive := archive_previous(workspace.run_dir(item.run_id),
                                                                                     claim=token)):
                        archived[item.run_id] = archive
                    run_dir = prepare_run_dir(workspace.run_dir(item.run_id), item.config)
                    if (inputs := inputs_identity(item.config)) is not None:  # what this attempt reads (plan)
                        write_inputs(run_dir, inputs)
                    version = version or code_version()  # git is asked once per launch
                    if previous is None or previous == states.COMPLETED:  # a new run (or one started afresh)
                        write_provenance(run_dir, version, spec_files_read(item.experiment, item.sweep, specs_seen))
                    else:  # a resume: its steps from here on run under this code
                        record_resume(run_dir, version)
                    # before the job exists: afterwards the job itself may already have written its state
                    # (a debug run is run by this process: a refresh watches it, and fails the run if it dies)
                    # (a local run's host: its job's process is asked on that host only)
                    mark_submitted(workspace.run_dir(item.run_id),
                                   (os.getpid() if name == "debug" else None, socket.gethostname())
                                   if name in ("debug", "local") else None)
                    claimed.append((item, rec))
                if shared:
                    _record_shared(reg, workspace, by_id, shared, members)
                    result.skipped += [(item, f"shared: {item.reason}") for item in shared]
                    result.in_flight += [run_id for run_id in dict.fromkeys(item.shares for item in shared)
                                         if run_id not in by_id and (row := reg.get(run_id)) is not None
                                         and row.state in states.ACTIVE]  # another launch's, under way
                if not claimed:
                    copy_members()
                    return result
                waits = _waits(reg, [i for i, _ in claimed], name, workspace)
                if unused := slurm_only_note(name, [i for i, _ in claimed]):  # said, not refused (auto may have
                    echo(f"note: {unused}")  # fallen back to local), once nothing before the jobs refuses them
                if name == "slurm":
                    left = sorted({n for i, _ in claimed for n in left_out_secrets([i])})
                    if left:  # said, not silent: a job that needs one (a gated model's HF_TOKEN) fails without it
                        echo(f"left out of the jobs' environment (secrets of this shell, which sbatch would store in "
                             f"SLURM's state): {', '.join(left)}; cluster.secrets=[NAME] passes one to a run's job"
                             + (" (an online run reads the W&B key from ~/.netrc: `wandb login`)"
                                if API_KEY_ENV in left and needs_api_key([i for i, _ in claimed]) else ""))
                    # the jobs earlier launches left under way, of runs of this one's items (their sources, their
                    # siblings; a resume's: its sweep's other runs), hold slots of the bound (the dry run's
                    # ``active``: its plan's, as found here)
                    ours = {i.run_id for i, _ in claimed}
                    rows = [*(r for r, _ in claim.skipped), *waits.values()]
                    under_way = {rec.run_id: job for rec in rows
                                 if rec.run_id not in ours and (job := slurm_job_under_way(rec))}
                    starts_from = {r: by_id[r].after for r in under_way if r in by_id}
                    # (the items' states: as the refresh before the claim found them, not asked again)
                    found = {rec.run_id: rec.state for rec in rows if rec.run_id in by_id}
                    beside = siblings_under_way([i for i, _ in claimed], workspace, reg, {*ours, *by_id}, under_way,
                                                found)
                    _submit_slurm([i for i, _ in claimed], workspace, array_parallelism, job_ids, waits, echo,
                                  {**under_way, **beside.jobs}, {**starts_from, **beside.starts_from}, beside.tasks)
                elif name == "local":
                    ids, parallel = _submit_local([i for i, _ in claimed], workspace, array_parallelism)
                    job_ids.update(ids)
                    result.parallelism = parallel
                    result.executor_note += f"; {parallel} at a time on {local_cores()} cores"
                else:
                    job_ids.update({item.run_id: "debug" for item, _ in claimed})
            except BaseException as err:
                every = [(by_id[r.run_id], r) for r in claim.claimed]
                left = []  # what the rollback could not do (a full disk fails it too): said, never masking `err`
                dropped, held = [], []
                try:
                    dropped, held = _record_submitted(reg, name, token,
                                                      [(i, r) for i, r in every if i.run_id in job_ids], job_ids,
                                                      workspace)
                except Exception as also:  # noqa: BLE001 - reported with the original error
                    left.append(f"recording the submitted jobs {sorted(job_ids.values())} ({also})")
                refused = [(i, r) for i, r in every if i.run_id not in job_ids] + held  # held: undone likewise
                interrupted = _roll_back(reg, workspace, token, refused, created, archived, kept, left)
                said = ("; and could not undo: " + "; ".join(left)) if left else ""
                said += "".join(f"; {item.run_id}: {why}"
                                for item, why in _moved_aside(dropped, archived) + _held_back(held, []))
                held_ids = {i.run_id for i, _ in held}
                out = [i.run_id for i, _ in every if i.run_id in job_ids and i.run_id not in held_ids]
                before = _submitted_before(out, job_ids, workspace, left)
                if interrupted is not None or not isinstance(err, Exception):  # Ctrl-C: as it is
                    # what went out before it, said on the CLI's "interrupted" line (from a hunt: a Ctrl-C during
                    # a launch exited 130 without a word of what was submitted)
                    add_note(interrupted or err, "nothing was submitted; its claims are undone" if not out
                              else f"{before}; the others are undone")
                    if said:
                        add_note(interrupted or err, said.removeprefix("; "))
                    raise (interrupted or err) from None
                # a refusal after earlier arrays went out (a later array over the QOS's job limit) says so on its
                # error line, which said only the refusal, as if nothing were submitted (from a hunt)
                if out:
                    n = len(refused)
                    said = (f"; {before}" + (f"; the other {n} {'were' if n > 1 else 'was'} not submitted (undone): "
                                             "run the same command again once sbatch would accept them (a full "
                                             "queue: once it has room); it submits only those" if n else "") + said)
                if isinstance(err, LaunchError):
                    if said:
                        raise LaunchError(f"{err}{said}") from err
                    raise
                if isinstance(err, OSError) and err.filename and err.errno in PLACE_ERRNOS and not said:
                    raise  # e.g. a full disk: the CLI names the path in one line
                if isinstance(err, Exception):
                    raise LaunchError(f"submission failed: {' '.join(str(err).split())[:300]}{said}") from err
                raise
            dropped, held = [], []
            try:  # a Ctrl-C here (the record may wait up to SQLite's busy timeout) says which jobs are out (a hunt)
                try:
                    dropped, held = _record_submitted(reg, name, token, claimed, job_ids, workspace)
                except RegistryError as err:  # e.g. a full disk: the jobs are out, and the user must know it (a hunt)
                    if name != "slurm":
                        raise
                    # the run folders link them (_submit_chunk): once this launch has exited, a refresh adopts them
                    # (refresh.orphaned_job)
                    masters = [array_master(job_id) for job_id in job_ids.values()]
                    several = len(set(masters)) > 1
                    jobs = ", ".join(f"{m} ({masters.count(m)} run{'s' * (masters.count(m) > 1)})"
                                     for m in dict.fromkeys(masters))
                    it = "them" if several else "it"
                    raise RegistryError(f"submitted job{'s' * several} {jobs}, but could not record {it}: {err}; the "
                                        f"next `arctl status` or launch (once the registry can be written) adopts {it}: "
                                        "nothing is submitted twice", err.kind) from err
                dropped = _moved_aside(dropped, archived)
                if held:  # reruns cancelled before their jobs started: the completed runs they were
                    left = []
                    interrupted = _roll_back(reg, workspace, token, held, created, archived, kept, left)
                    dropped += _held_back(held, left)
                    if interrupted is not None:  # a Ctrl-C during the undo (finished first): the jobs are out
                        raise interrupted
            except BaseException as err:
                gone = {item.run_id for item, _ in dropped + held}
                if not isinstance(err, Exception) and name != "debug" and (before := _submitted_before(
                        [i.run_id for i, _ in claimed if i.run_id not in gone], job_ids, workspace, [])):
                    add_note(err, before)  # (a debug run is run by this process: nothing of it is out)
                raise
        gone = {item.run_id for item, _ in dropped}
        result.submitted = [item for item, _ in claimed if item.run_id not in gone]
        result.skipped += dropped
        result.job_ids = {item.run_id: job_ids[item.run_id] for item in result.submitted}
        copy_members()
        if name == "debug":
            result.failed = _run_debug(result.submitted, workspace, reg, echo)
    return result


def _claim(reg: Registry, items: list[LaunchItem], workspace: Workspace, token: str, forced: set[str] | bool,
           members: list[str]):
    """Claim ``items`` (:meth:`Registry.claim`, ``forced``: the --force reruns), and the completed runs whose
    inputs changed since they ran (:func:`inputs_change`, as :func:`plan` plans them "rerun") as --force
    claims them; the others' skip
    lines stay as they were (a completed run's names --force). The claimed in
    the order of ``items`` (a run that starts from another comes after it)."""
    from arctl.launch.registry import ClaimResult

    stale = {i.run_id for i in items if (forced is False or i.run_id not in forced)
             and (rec := reg.get(i.run_id)) is not None and rec.state == states.COMPLETED
             and inputs_change(*recorded_inputs(i, workspace)) is not None}
    if not stale:
        return reg.claim([item.record() for item in items], token, force=forced, members=members)
    if forced is not False:  # --force: every completed run's skip line says so already
        return reg.claim([item.record() for item in items], token, force={*forced, *stale}, members=members)
    rest = reg.claim([item.record() for item in items if item.run_id not in stale], token, members=members)
    again = reg.claim([item.record() for item in items if item.run_id in stale], token, force=stale, members=members)
    order = {item.run_id: n for n, item in enumerate(items)}
    return ClaimResult(sorted(rest.claimed + again.claimed, key=lambda rec: order[rec.run_id]),
                       rest.skipped + again.skipped)


def _wandb_mode_change(item: LaunchItem, workspace: Workspace) -> str | None:
    """Why a resume cannot take the ``wandb.mode`` it was given, or None: ``disabled`` where the run's earlier
    attempts logged W&B history (``wandb`` is launch-only: a resume freezes the newly composed section).
    From a hunt: a run resumed with ``wandb.mode=disabled`` completed with its W&B history, what reports and
    figures read, ending at the stop, without a word."""
    from arctl.launch.rundir import read_run_config

    try:
        before = str(((read_run_config(workspace.run_dir(item.run_id)) or {}).get("wandb") or {}).get("mode"))
    except Exception:  # noqa: BLE001 - an unreadable config.yaml: the job's own start says so
        return None
    now = str((item.config.get("wandb") or {}).get("mode"))
    # W&B turned on at a resume is not refused: the kept history is logged from metrics.jsonl first (the tiny
    # trainer's open_run, a review; verl's repair_history, since a hunt found it skipped a run with no W&B files);
    # turned off, only where the run has W&B history to cut short (a run that never logged has none)
    if now != "disabled" or before == "disabled" or not any((workspace.run_dir(item.run_id) / "wandb").rglob("run-*.wandb")):
        return None
    return (f"{item.experiment}/{item.arm}: resuming run {item.run_id} with wandb.mode={now}, where its earlier "
            f"attempts ran with wandb.mode={before}: its W&B history, which reports read, would end at the stop; "
            f"resume it with wandb.mode={before}")


CLAIM_BEAT_S = 60.0  # how often a launch renews its claims (a claim older than STALE_CLAIM_S is a dead launch's)


@contextmanager
def _claims_kept_fresh(registry_path: Path, token: str) -> Iterator[None]:
    """Renew the claims of ``token`` (their ``updated_at``) every CLAIM_BEAT_S while the block runs, from
    a thread with its own registry connection: a live launch slower than STALE_CLAIM_S (thousands of
    runs, a slow file system, one sbatch that blocks for minutes) had its claims taken for a dead
    launch's by another launch, which submitted second jobs. A renewal that fails is tried again at
    the next beat (a claim goes stale only after ten missed ones)."""
    stop = threading.Event()
    reg = Registry(registry_path)  # here: a registry the launch has just opened opens again (or fails loudly)

    def beat() -> None:
        with reg:
            while not stop.wait(CLAIM_BEAT_S):
                with suppress(Exception):
                    reg.renew_claims(token)

    thread = threading.Thread(target=beat, name="arctl-claim-beat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _submitted_before(out: list[str], job_ids: dict[str, str], workspace: Workspace, left: list[str]) -> str:
    """What a launch stopped part-way (a refusal, a Ctrl-C) had submitted before it: the runs ``out`` (their jobs
    ``job_ids``), recorded unless the rollback ``left`` something undone (said after it). "" when none."""
    if not out:
        return ""
    ids = sorted({str(job_ids[r]) for r in out}, key=job_id_order)
    if len(ids) > 4:  # a whole array's tasks: its job id and how many runs it has
        masters = [array_master(i) for i in ids]
        ids = [f"{m} ({masters.count(m)} runs)" for m in dict.fromkeys(masters)]
    recorded = f"recorded (`arctl status{workdir_arg(workspace.root)}` shows them)" if not left else (
        "see what could not be undone")
    return f"submitted before it: {len(out)} run(s) (job(s) {', '.join(ids)}), {recorded}"


def _roll_back(reg: Registry, workspace: Workspace, token: str, refused: list[tuple[LaunchItem, RunRecord]],
               created: set[str], archived: dict[str, Path], kept: dict[str, dict[Path, bytes | None]],
               left: list[str]) -> BaseException | None:
    """Undo a refused submission of ``refused``: nothing of it stays. New runs leave no row and no run
    dir (``created``: the folders this launch made); resumed and rerun ones are as they were: their
    folders (``archived``: a --force rerun's finished files, put back; ``kept``: the files a resume
    rewrote) and their rows (state, error, generation: :meth:`Registry.unclaim`). Folders first:
    interrupted there, a run keeps its claim, whose row says what it was (the next launch undoes it),
    never a folder without a row. Each step alone, the rows given back whatever fails; what could not
    be undone is appended to ``left``. Returns a second Ctrl-C (or other BaseException) that came
    during the undo, after finishing it, for the caller to raise."""
    interrupted: BaseException | None = None
    try:
        for item, _rec in refused:
            for again in (False, True):  # each undo may run twice (renames and rewrites: idempotent)
                try:
                    if item.run_id in created:
                        shutil.rmtree(workspace.run_dir(item.run_id), ignore_errors=True)
                    elif item.run_id in archived:  # a refused --force rerun: the finished run it was
                        restore_previous(workspace.run_dir(item.run_id), archived[item.run_id])
                    elif item.run_id in kept:  # a refused resume: its status as its last job reported it
                        _put_back(kept[item.run_id])
                    break
                except BaseException as also:  # noqa: BLE001 - reported with the original error
                    if not isinstance(also, Exception):
                        interrupted = also
                        if not again:
                            continue  # a second Ctrl-C: finish this run's undo first
                    where = archived.get(item.run_id)
                    left.append(f"{workspace.run_dir(item.run_id)} ({also or type(also).__name__}"
                                + (f"; its files are in {where})" if where else ")"))
                    break
    finally:
        try:
            reg.unclaim([r for _, r in refused], token)
        except Exception as also:  # noqa: BLE001 - reported with the original error
            left.append(f"the registry rows of {len(refused)} run(s) ({also}; the next launch, or `arctl "
                        "status`, undoes them)")
    return interrupted


# the files of a run folder that preparing a resume writes (and submitting it: a waiting run's phase)
RESUME_REWRITES = ("config", "status", "provenance", "phase", "inputs")


def _contents(run_dir: Path, keys) -> dict[Path, bytes | None]:
    """The bytes of each file of ``run_dir`` named by ``keys`` (:func:`run_paths`; None: absent)."""
    paths = run_paths(run_dir)
    return {paths[k]: paths[k].read_bytes() if paths[k].is_file() else None for k in keys}


def _put_back(contents: dict[Path, bytes | None]) -> None:
    """Write back what :func:`_contents` read (and remove what was absent then)."""
    for path, data in contents.items():
        if data is None:
            if os.path.lexists(path):
                path.unlink(missing_ok=True)
        elif not _holds(path, data):
            atomic_write(path, data)


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` holds ``data`` already: a file the refused launch never changed is not written back (from a
    hunt: a resume refused on a config.yaml it could not write said "could not undo" it, though it was as it was)."""
    try:
        return path.is_file() and path.read_bytes() == data
    except OSError:
        return False


def _waits(reg: Registry, claimed: list[LaunchItem], executor: str,
           workspace: Workspace | None = None) -> dict[str, RunRecord]:
    """Run id -> the record of the run it starts from (``after``), for each claimed run whose
    ``after`` is not done yet: claimed by this launch or active from an earlier one. LaunchError
    (one line, :func:`source_problem`, which the dry run's plan asks too) when it is neither (not in this
    workspace, failed and not relaunched: a resumed run whose parent was not launched with it), runs under
    another kind of executor, or is completed with no checkpoint left (``workspace``: where to look)."""
    waits, ours = {}, {i.run_id for i in claimed}
    for item in claimed:
        if not item.after:
            continue
        parent = reg.get(item.after)
        if problem := source_problem(item, parent, workspace, ours, executor):  # (ours: claimed, SUBMITTING)
            raise LaunchError(problem)
        if parent is not None and parent.state != states.COMPLETED:
            waits[item.run_id] = parent
    return waits


def _record_shared(reg: Registry, workspace: Workspace, by_id: dict[str, LaunchItem],
                   shared: list[LaunchItem], members: Iterable[str] = ()) -> None:
    """The kept runs serve the shared cells: membership rows of their experiments and of the sweep
    (``arctl status EXP``; a kept run outside the launched items, which the workspace already had,
    is listed under the sweep too) and ``shared.json`` in each kept run's dir (merged with what an
    earlier launch wrote). A run dir that does not exist (yet: another launch is preparing it) gets
    its file from that launch."""
    reg.add_members([(item.experiment, item.shares) for item in shared]
                    + [(name, item.shares) for item in shared for name in members])
    for run_id, cells in served(shared).items():
        run_dir = workspace.run_dir(run_id)
        kept = by_id.get(run_id) or reg.get(run_id)
        if run_dir.is_dir() and kept is not None:
            write_shared(run_dir, cells, own=(kept.experiment, kept.arm))


def _record_submitted(reg: Registry, executor: str, token: str, claimed: list[tuple[LaunchItem, RunRecord]],
                      job_ids: dict[str, str], workspace: Workspace | None = None,
                      ) -> tuple[list[tuple[LaunchItem, str]], list[tuple[LaunchItem, RunRecord]]]:
    """Record the jobs of the runs claim ``token`` submitted (PENDING, job id, attempt). A run cancelled
    while this launch submitted it (`arctl cancel` asks a claimed run's launch to cancel it) has its
    job cancelled: a SLURM job (which may have started: its array was released before this record) is
    recorded PENDING with the cancel request, ending CANCELLED as a cancelled job does (a job that had
    started saves its checkpoint first; refresh's merge_state); a local or debug one, which cannot have
    started, is recorded CANCELLED (the local queue skips a run that is not PENDING), but for a --force
    rerun of a completed run: nothing of the rerun ran, so the run is the completed run it was (from a
    hunt: it was left CANCELLED at its new generation, its finished files moved aside, hidden from every
    report); its row is left as the claim holds it, for the caller to undo as a refused submission
    (:func:`_roll_back`). A run whose row the claim no longer holds keeps what it has now: its job
    adopted by a refresh that took this launch for a dead one, or, where the row names another job or
    none, the job cancelled. Returns the runs not submitted after all, with why, and those held back
    (still claimed: the caller undoes them). A local or debug run recorded CANCELLED here says so in its
    ``workspace`` folder's status.json too (:func:`arctl.launch.status_file.mark_cancelled`; it said
    "submitted", and `arctl repair` rebuilt it FAILED, "never started")."""
    now = time.time()

    def values(item: LaunchItem, rec: RunRecord) -> dict:
        # a --force rerun starts from its first step: the completed run's step and metric are not its progress (from a
        # hunt: a queued rerun showed "60/60, train/anytime_score=0" until its job wrote status.json)
        fresh = {"step": None, "metric_name": None, "metric_value": None, "metric_nonfinite": None} \
            if item.action == "rerun" else {}
        return {**fresh, "state": states.PENDING, "executor": executor, "job_id": job_ids[item.run_id],
                "attempts": rec.attempts + 1, "submitted_at": now, "claim": None, "before_claim": None,
                "generation": rec.generation,  # its W&B id's (a claim undone meanwhile gave the row another)
                "error": None,
                "wandb_id": None if item.config.get("wandb", {}).get("mode") == "disabled" else rec.wandb_run_id,
                "started_at": None, "ended_at": None}

    # a local or debug rerun of a completed run, whose job cannot have started: a cancel leaves the row claimed
    # as it is (each row its own values, so one update each)
    rerun = [(item, rec) for item, rec in claimed
             if executor != "slurm" and (rec.previous or {}).get("state") == states.COMPLETED]
    again = {item.run_id for item, _ in rerun}
    rest = [(item, rec) for item, rec in claimed if item.run_id not in again]
    lost, stopped = reg.update_claimed(token, [(item.run_id, values(item, rec)) for item, rec in rest],
                                       cancelled={} if executor == "slurm" else {"state": states.CANCELLED,
                                                                                 "ended_at": now})
    if executor != "slurm" and workspace is not None:  # after the registry's write won: no job of them starts
        for run_id in stopped:
            mark_cancelled(workspace.run_dir(run_id), now, executor)
    held: list[tuple[LaunchItem, RunRecord]] = []
    for item, rec in rerun:
        update = values(item, rec)
        gone, kept = reg.update_claimed(token, [(item.run_id, update)],
                                        cancelled={k: getattr(rec, k) for k in update})  # as the claim has it
        lost += gone
        held += [(item, rec)] if kept else []
    by_id = {item.run_id: item for item, _ in claimed}
    dropped = [(run_id, "cancelled while this launch submitted it") for run_id in stopped]
    for run_id in lost:
        now_rec = reg.get(run_id)
        if now_rec is not None and now_rec.job_id == job_ids[run_id] and now_rec.state in states.ACTIVE:
            continue  # adopted: the row already names this job
        why = "gone from the registry" if now_rec is None else f"made {now_rec.state} by another process"
        dropped.append((run_id, f"{why} while this launch submitted it"))
    if executor == "slurm" and dropped:
        ok = scancel_quietly([job_ids[run_id] for run_id, _ in dropped])
        dropped = [(run_id, why + (f"; its job {job_ids[run_id]} is cancelled" if ok else
                                   f"; {scancel_failed(job_ids[run_id])}"))
                   for run_id, why in dropped]
    return [(by_id[run_id], why) for run_id, why in dropped], held


def _moved_aside(dropped: list[tuple[LaunchItem, str]], archived: dict[str, Path]) -> list[tuple[LaunchItem, str]]:
    """``dropped`` with where a --force rerun's dropped run has the files of the completed run it was
    (``archived``): its job may have started (SLURM), so they stay there, and the user must be able to find
    them (from a hunt: the run ended CANCELLED with empty checkpoints/ and wandb/, and nothing said where they went)."""
    return [(item, why + (f"; the files of the completed run it was (checkpoints, W&B) are in {archived[item.run_id]}"
                          if item.run_id in archived else "")) for item, why in dropped]


UNSTARTED_RERUN = "cancelled while this launch submitted it, before its job started: it stays COMPLETED with its files"


def _held_back(held: list[tuple[LaunchItem, RunRecord]], left: list[str]) -> list[tuple[LaunchItem, str]]:
    """Why each rerun :func:`_record_submitted` held back is not submitted, once :func:`_roll_back` has undone
    it (``left``: what it could not undo, said with each)."""
    said = f"; but could not undo: {'; '.join(left)}" if left else ""
    return [(item, UNSTARTED_RERUN + said) for item, _ in held]


def _entries(folder: Path) -> set[Path]:
    """What ``folder`` holds (nothing when it does not exist yet)."""
    return set(folder.iterdir()) if folder.is_dir() else set()


def _link_job_dir(run_dir: Path, job_dir: Path, job_id: str) -> None:
    link = run_dir / "job" / job_id
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(job_dir, link.parent))
    except OSError:
        pass


def after_parameters(params: dict, parent_job: str, check: bool = True) -> dict:
    """sbatch parameters of a job that starts once job ``parent_job`` (``123`` or an array task
    ``123_4``) has completed: ``--dependency=afterok:<job>``, and ``--kill-on-invalid-dep=yes``, so
    SLURM cancels it when the other job fails instead of leaving it pending forever."""
    if check and not states.SLURM_JOB_ID.match(str(parent_job)):
        raise LaunchError(f"cannot wait for job {parent_job!r}: not a SLURM job id")
    extra = {**params.get("additional_parameters", {}), "dependency": f"afterok:{parent_job}",
             "kill_on_invalid_dep": "yes"}
    return {**params, "additional_parameters": extra}


def slot_parameters(params: dict, ahead_job: str) -> dict:
    """sbatch parameters of a job that takes the slot of job ``ahead_job`` once that job has ended,
    however it ended (``--dependency=afterany:<job>``: failed or cancelled, the slot is free; a
    requeued job keeps it): how a sweep of single jobs keeps to ``array_parallelism``, as an array's
    ``%P`` does for its tasks."""
    extra = dict(params.get("additional_parameters", {}))
    before = extra.get("dependency")  # e.g. afterok on the run it starts from: both must hold (",")
    extra["dependency"] = f"{before},afterany:{ahead_job}" if before else f"afterany:{ahead_job}"
    return {**params, "additional_parameters": extra}


def slurm_arrays(items: list[LaunchItem], array_parallelism: int | None,
                 ask_site: bool = True) -> tuple[list[tuple[dict, list[LaunchItem]]], int]:
    """The arrays that runs of plain job bodies (no Ray, none waiting for another run) go out as, with the bound
    on their tasks at once in all: ``([(sbatch parameters, runs), ...], bound)``. Several arrays (other
    sbatch settings, secrets, chunks of cluster.max_array_size) share the smallest ``array_parallelism`` they ask
    (:func:`array_shares`: each array's ``%p``); which earlier job or array each waits for (more of them than the
    bound) is :func:`slurm_submissions`' slot chain's to say.
    :func:`_submit_slurm` submits them and :func:`dry_run_scripts` previews them from this one answer (from a
    hunt: the preview showed each array with the whole bound, 104 tasks at once where 64 were submitted)."""
    arrays = _groups(items, array_parallelism, ask_site)
    bound = min((int(params["array_parallelism"]) for params, _ in arrays), default=1)
    if len(arrays) <= 1:
        return arrays, bound
    shares = array_shares([len(chunk) for _, chunk in arrays], bound)
    return [({**params, "array_parallelism": share}, chunk) for (params, chunk), share in zip(arrays, shares)], bound


def array_shares(sizes: list[int], bound: int) -> list[int]:
    """Each array's ``%p`` where arrays of ``sizes`` tasks go out together and at most ``bound`` tasks may run
    at once in all: ``bound`` split in proportion to the sizes (each at least 1 and at most its size); with
    more arrays than ``bound``, 1 each (and each array starts only after the one
    ``bound`` places before it has ended). One array keeps ``bound``."""
    if len(sizes) <= 1:
        return [bound] * len(sizes)
    if len(sizes) > bound:
        return [1] * len(sizes)
    shares, left = [1] * len(sizes), bound - len(sizes)
    while left > 0:
        open_ = [i for i, n in enumerate(sizes) if shares[i] < n]
        if not open_:
            break
        i = max(open_, key=lambda i: (sizes[i] / shares[i], -i))  # the array furthest behind its share
        shares[i] += 1
        left -= 1
    return shares


@dataclass(frozen=True)
class UnderWay:
    """A SLURM job of an earlier launch still under way (queued or running), of runs of a launch's items (the runs
    they start from, their siblings): it holds ``slots`` of ``cluster.array_parallelism`` until it has ended, which
    the launch's own jobs keep to with it (:func:`held_slots`). ``run``: one of its runs (a run of its own: the run
    whose job it is). An array frees the first of its slots once its last task under way (``last``) has ended: under
    its ``%p`` SLURM starts its tasks in index order, so that task started last, and once it has ended at most
    ``slots - 1`` of them run and none starts again; the others once all its tasks have ended (:meth:`units`).
    From a review: a failed run's retry waited for the whole array, ~1 task length after the slot the array's last
    round left free, and always ended last."""

    job: str  # its job id (an array's: the array's, all its tasks)
    run: str
    runs: int = 1  # its runs under way: an array's, all its tasks under way (:func:`held_slots`)
    slots: int = 1
    array: bool = False
    last: str | None = None  # an array's last task under way: ``5_3``
    by_last: bool = False  # a slot of the chain (:meth:`units`) that the end of ``last`` alone frees

    @property
    def waited(self) -> str:
        """The job (or array task) whose end frees this slot: what a job that takes it waits for (``afterany``)."""
        return self.last if self.by_last and self.last else self.job

    def units(self) -> list[UnderWay]:
        """What frees each of its slots, in the slot chain's order: an array's first its last task, the others the
        whole array; a job of its own itself."""
        if self.last is None or self.slots < 1:
            return [self] * self.slots
        return [replace(self, by_last=True)] + [self] * (self.slots - 1)


def slurm_job_under_way(rec: RunRecord | None) -> str | None:
    """The SLURM job a run under way has, which a job of a later launch can wait for (``--dependency``), else
    None: not one another launch is still submitting (its job id is its previous attempt's), nor another
    executor's."""
    return (rec.job_id if rec is not None and rec.state in states.SUBMITTED
            and rec.executor == "slurm" and rec.job_id else None)


ARRAY_THROTTLE = re.compile(r"^#SBATCH --array=\S*%(\d+)\s*$", re.M)  # sbatch's --array=0-5%2: its 2


def held_slots(under_way: dict[str, str], workspace: Workspace, starts_from: Mapping[str, str | None] | None = None,
               launched: Collection[str] = (), tasks: Mapping[str, str] | None = None) -> list[UnderWay]:
    """The jobs of ``under_way`` (run id -> its job id, an array's task ``5_1`` among them: the runs of a launch's
    items under way from earlier launches), oldest first, each with the slots it holds: an array
    ``min(its %p, its tasks under way)`` (its ``%p`` read from its sbatch script in the workspace's ``jobs/``; where
    that cannot be read, its tasks under way), a job of its own one. An array counted at all is counted whole: its
    tasks under way are those of the runs counted and every other task of it in ``tasks``, whatever its run's
    experiment (from the re-read of this chain: `arctl run EXP` after `arctl sweep SW` counted EXP's tasks of SW's
    array, not its other experiments' beside them, and P+1 ran at once). From a review: the relaunch arctl advises after
    sbatch refused part of a launch sent the runs starting from runs still under way with no slot, beside the
    earlier launch's array: 4 jobs at once under ``--array-parallelism 2``. A run that starts from one of the runs
    ``launched`` (``starts_from``: run id -> the run it starts from) holds none: its job waits (afterok) for that run's
    earlier attempt, so it cannot run beside the new one, and where that attempt failed it never starts (from a
    review: the retry of a failed source, chained behind its dependent's job, waited for ever).

    ``tasks``: array task id -> its state (PENDING, RUNNING), of every array task under way as the caller found
    them (:func:`siblings_under_way`: the same view the dry run and the launch count from; nothing is read here).
    An array's last task under way (:attr:`UnderWay.last`) is known only where every task of it in ``tasks`` is
    among those counted (a task not counted may start after the last counted), and none of those is PENDING below
    one that has started: the mark a requeue leaves (a requeued task starts again after the array's highest index;
    from a review: the retry waiting for that index ran 3 at once under P=2)."""
    starts_from, tasks = starts_from or {}, tasks or {}
    runs: dict[str, list[str]] = {}
    for run_id, job in sorted(under_way.items(), key=lambda kv: job_id_order(kv[1])):
        if starts_from.get(run_id) in launched and starts_from.get(run_id) is not None:
            continue
        runs.setdefault(array_master(job), []).append(run_id)
    out = []
    for job, of in sorted(runs.items(), key=lambda kv: job_id_order(kv[0])):
        counted = {str(under_way[r]) for r in of if is_array_task(under_way[r])}
        runs_under_way, last = len(of), None
        held = runs_under_way
        if counted:  # an array's tasks: all of them under way, at most its %p at once
            known = {task for task in tasks if array_master(task) == job}
            runs_under_way = held = len(counted | known)
            try:
                found = ARRAY_THROTTLE.search((workspace.jobs_dir / job / f"{job}_submission.sh").read_text())
            except (OSError, UnicodeDecodeError):
                found = None
            if found and int(found.group(1)) > 0:
                held = min(held, int(found.group(1)))
            if known <= counted and not _requeued(counted, tasks):
                last = max(counted, key=job_id_order)
        out.append(UnderWay(job, of[0], runs_under_way, held, bool(counted), last))
    return out


def _requeued(counted: Collection[str], tasks: Mapping[str, str]) -> bool:
    """Whether one of the array tasks ``counted`` is PENDING at a lower index than one that has started (RUNNING),
    in the states ``tasks`` (:func:`held_slots`)."""
    index = {task: int(task.split("_")[1]) for task in counted if task.split("_")[1].isdigit()}
    started = [i for task, i in index.items() if tasks.get(task) == states.RUNNING]
    return bool(started) and any(i < max(started) for task, i in index.items() if tasks.get(task) == states.PENDING)


@dataclass
class Beside:
    """What :func:`siblings_under_way` finds beside a launch: ``jobs`` (run id -> job id) and ``starts_from`` (run
    id -> the run it starts from) of its sweep's other runs under way, and ``tasks`` (array task id -> state) of every
    array task under way it found (:func:`held_slots`)."""

    jobs: dict[str, str] = field(default_factory=dict)
    starts_from: dict[str, str | None] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)


def siblings_under_way(items: list[LaunchItem], workspace: Workspace, reg: Registry | None = None,
                       known: Collection[str] = (), under_way: Mapping[str, str] | None = None,
                       found: Mapping[str, str] | None = None) -> Beside:
    """The jobs under way of the other runs of the sweeps (or experiments) of ``items`` (``beside``), not ``known``
    (the launch's items, the runs it has already), for :func:`held_slots`; with the states of every array task
    under way among them, among the caller's runs ``under_way`` (run id -> job id) and the other tasks of their
    arrays. ``found``: run id -> state, of runs of ``under_way`` as the caller found them now (the launch's refresh
    before its claim, the dry run's plan): taken as they are, not asked again (from the re-read of this chain: each
    launch and dry run asked sacct for them twice). The others' states as a refresh finds them now, all in one:
    written into ``reg`` (the launch's), else nowhere (the dry run's), so that the dry run waits for what the launch
    waits for (from a review: on a stale registry the dry run said ``afterany:59``, the launch sent
    ``afterany:59_4``). From reviews: `arctl resume RUN --array-parallelism 2`, which `status` advises for a failed
    task, and `arctl run EXP --arm A` counted none of them and started beside the array's tasks, 3 and 4 at once."""
    names = sorted({item.beside for item in items})
    under_way, found = under_way or {}, found or {}
    if not names or not workspace.registry_path.exists():
        return Beside()
    from arctl.launch.refresh import fresh_view, refresh, settled

    known = {*known, *under_way, *(item.run_id for item in items)}

    def rows(registry: Registry) -> tuple[list[RunRecord], set[str]]:  # (what to find now, the siblings among it)
        siblings = {rec.run_id: rec for name in names for rec in registry.list(name)
                    if rec.run_id not in known and rec.state in states.ACTIVE}
        every = registry.list(states_in=states.ACTIVE)
        arrays = {array_master(job) for job in [*under_way.values(), *(r.job_id for r in siblings.values())]
                  if is_array_task(job)}
        mates = {rec.run_id: rec for rec in every  # (not the launch's own runs: they are not under way)
                 if (rec.run_id in under_way and rec.run_id not in found)
                 or (rec.run_id not in known and is_array_task(rec.job_id) and array_master(rec.job_id) in arrays)}
        return list({**mates, **siblings}.values()), set(siblings)

    if reg is not None:
        todo, siblings = rows(reg)
        now_found = refresh(reg, workspace, todo) if todo else []
    else:  # the dry run's view, as plan() has the items'
        with Registry.for_reading(workspace.registry_path) as ro:
            todo, siblings = rows(ro)
        now = time.time()
        now_found = fresh_view(workspace, [v for rec in todo
                                           if (v := settled(rec, workspace.run_dir(rec.run_id), now))])
    jobs = {rec.run_id: job for rec in now_found if rec.run_id in siblings and (job := slurm_job_under_way(rec))}
    tasks = {str(job): state for run_id, job in under_way.items()
             if (state := found.get(run_id)) in states.SUBMITTED and is_array_task(job)}
    tasks |= {job: rec.state for rec in now_found if (job := slurm_job_under_way(rec)) and is_array_task(job)}
    return Beside(jobs, {run_id: run_starts_from(workspace.run_dir(run_id)) for run_id in jobs}, tasks)


@dataclass
class Submission:
    """One sbatch of a SLURM launch, as :func:`slurm_submissions` plans it."""

    params: dict  # its sbatch parameters, before its dependencies on other jobs
    runs: list[LaunchItem]  # its runs: an array's tasks, or the one run of a job of its own
    waits: bool = False  # a run that starts from another run not done yet: afterok on that run's job
    # whose ends free the slots it takes (afterany on each): a run id (that run's job), an int (the launch's array of
    # that index: all its tasks) or a job of an earlier launch still under way (:class:`UnderWay`); none where it
    # takes free slots
    slots: tuple[str | int | UnderWay, ...] = ()
    bound: int = 0  # the most jobs (or tasks) at once it keeps to: cluster.array_parallelism
    array: int | None = None  # an array's index among the launch's arrays; None: a job of its own


def in_chain_order(items: list[LaunchItem]) -> list[LaunchItem]:
    """``items`` with each run placed after the run it starts from (``after``) where that run is among them, their
    order kept otherwise: the order a launch submits them in (:func:`slurm_submissions`), whatever the order they
    were selected in (`arctl resume` takes the run ids sorted, or as the user gave them). From a hunt: the resume
    of a chain whose ids sorted dependent-first submitted its last run before its source, waiting for the source's
    previous job. A cycle (refused where runs are resolved) keeps the order it has."""
    by_id: dict[str, LaunchItem] = {}
    for item in items:
        by_id.setdefault(item.run_id, item)
    out: list[LaunchItem] = []
    placed: set[int] = set()

    def place(item: LaunchItem, chain: tuple[str, ...]) -> None:
        if id(item) in placed:
            return
        source = by_id.get(item.after) if item.after else None
        if source is not None and source.run_id not in chain:
            place(source, (*chain, item.run_id))
        if id(item) not in placed:
            placed.add(id(item))
            out.append(item)

    for item in items:
        place(item, ())
    return out


def slurm_submissions(items: list[LaunchItem], array_parallelism: int | None, waiting: Iterable[str],
                      rays: dict[str, dict | None], ask_site: bool = True,
                      held: Iterable[UnderWay] = ()) -> list[Submission]:
    """The sbatch submissions of a SLURM launch of ``items``, in the order they go out: the one plan that
    :func:`_submit_slurm` submits and :func:`dry_run_scripts` previews. ``waiting``: the runs whose source
    (``after``) is not done yet (:func:`_waits`); ``rays``: each run's Ray job setup (verl), None for a plain job
    body; ``ask_site``: whether the controller is asked for its array size limit; ``held``: the jobs of earlier
    launches still under way that hold slots (:func:`held_slots`), oldest first.

    First the Ray jobs (a job each), then the arrays of plain job bodies (:func:`slurm_arrays`), then the runs
    that wait, a job each, each after the run it starts from (:func:`in_chain_order`). They keep to
    ``cluster.array_parallelism`` (P) together, with the jobs ``held``: one slot chain holds those, then the jobs
    of their own and the arrays (an array holds as many slots as its tasks at once, until all of them have ended),
    and a submission past the first P slots takes the slots P places before its own (a job of its own: one; an
    array: as many as it holds), waiting for the end of whatever holds them. From a hunt: a tiny run that starts
    from another went out with no slot, and a sweep with P=2 ran 3 jobs at once; from a review: the arrays took
    no slot of the Ray jobs before them, nor a relaunch's runs one of the jobs still under way."""
    waiting = set(waiting)
    chain: list[str | int | UnderWay] = []  # whose end frees each slot, in turn: a run id (its job), an array's index
    for job in held:
        chain += job.units()
    out: list[Submission] = []

    def ahead(slots: int, taken: int) -> tuple[str | int | UnderWay, ...]:  # whose ends free the slots it takes
        k = len(chain)
        got = tuple(dict.fromkeys(chain[j] for j in range(k - slots, k - slots + taken) if j >= 0))
        # an array's last task and all its tasks: the end of all of them says it
        return tuple(s for s in got if not (isinstance(s, UnderWay) and s.by_last and replace(s, by_last=False) in got))

    def single(item: LaunchItem, params: dict, waits: bool) -> None:
        if (ray := rays[item.run_id]) is not None:
            params = with_ray_setup(params, ray)
        slots = int(params["array_parallelism"])
        out.append(Submission(params, [item], waits, ahead(slots, 1), slots))
        chain.append(item.run_id)

    for item in items:
        if item.run_id not in waiting and rays[item.run_id] is not None:
            single(item, slurm_parameters(item.config["cluster"], item.experiment, array_parallelism), False)
    plain = [item for item in items if item.run_id not in waiting and rays[item.run_id] is None]
    arrays, bound = slurm_arrays(plain, array_parallelism, ask_site)
    for k, (params, chunk) in enumerate(arrays):
        taken = min(int(params["array_parallelism"]), len(chunk))
        out.append(Submission(params, chunk, slots=ahead(bound, taken), bound=bound, array=k))
        chain += [k] * taken
    for item in in_chain_order([item for item in items if item.run_id in waiting]):
        single(item, slurm_parameters(item.config["cluster"], item.sweep or item.experiment, array_parallelism), True)
    return out


def _submit_slurm(items: list[LaunchItem], workspace: Workspace, array_parallelism: int | None,
                  job_ids: dict[str, str], waits: dict[str, RunRecord] | None = None,
                  echo: Callable[[str], None] = lambda _msg: None,
                  under_way: dict[str, str] | None = None,
                  starts_from: Mapping[str, str | None] | None = None,
                  tasks: Mapping[str, str] | None = None) -> dict[str, str]:
    """Submit ``items`` as :func:`slurm_submissions` plans it; ``job_ids`` (run id -> job id) grows as each
    submission is accepted. What sbatch says on stderr as it accepts one (a site's job_submit.lua: a time limit
    reduced, a job routed to another partition) is a ``note:`` given to ``echo``, once per submission.
    A run in ``waits`` (its ``after`` not done yet) goes out alone, after the run it starts from, with a
    dependency on that run's job (:func:`after_parameters`): the job this launch submitted for it where it is one
    of ``items``, else its job under way. A job of its own (a Ray job body, verl; a run that waits) past the
    first ``array_parallelism`` waits for the end of the one that many places before it (:func:`slot_parameters`),
    the jobs ``under_way`` (run id -> job id: of the runs of the launch's items that earlier launches left under
    way, :func:`held_slots`; ``tasks``: the states of the array tasks under way, :func:`siblings_under_way`) first
    in that chain."""
    waits = waits or {}
    ours = {item.run_id for item in items}

    def submit(params: dict, chunk: list[LaunchItem]) -> None:
        if said := _submit_chunk(params, chunk, workspace, job_ids):
            echo(f"note: sbatch, accepting job {array_master(job_ids[chunk[0].run_id])}, said: {said}")

    rays = {item.run_id: backend_job_setup(item.config, workspace.run_dir(item.run_id)) for item in items}
    masters: list[str] = []  # each array's job id, in submission order
    held = held_slots(under_way or {}, workspace, starts_from, ours, tasks)
    for step in slurm_submissions(items, array_parallelism, waits, rays, held=held):
        params, item = step.params, step.runs[0]
        if step.waits:
            parent = waits[item.run_id]
            # this launch's own source: the job it submitted for it, never its previous attempt's (a hunt)
            job = job_ids.get(parent.run_id) if parent.run_id in ours else str(parent.job_id)
            if job is None:
                raise RuntimeError(f"internal error: {item.run_id} was to be submitted before {parent.run_id}, the "
                                   "run it starts from, had a job")
            params = after_parameters(params, job)
            write_phase(workspace.run_dir(item.run_id), waiting_phase(parent.run_id))  # shown by `arctl status`
        for slot in step.slots:
            params = slot_parameters(params, masters[slot] if isinstance(slot, int) else
                                     slot.waited if isinstance(slot, UnderWay) else job_ids[slot])
        if not step.waits and step.array is None and len(step.slots) == 1:  # shown by `arctl status` (a run that
            slot = step.slots[0]  # waits says that)
            if isinstance(slot, str) or (isinstance(slot, UnderWay) and not slot.array):
                write_phase(workspace.run_dir(item.run_id), queued_phase(slot if isinstance(slot, str) else slot.run))
        submit(params, step.runs)
        if step.array is not None:
            masters.append(array_master(job_ids[item.run_id]))
    return job_ids


def _submit_chunk(params: dict, chunk: list[LaunchItem], workspace: Workspace, job_ids: dict[str, str]) -> str:
    """Submit ``chunk`` as one (array) job with ``params``; record its job ids in ``job_ids``. Returns what
    sbatch said on stderr as it accepted the job ("" when nothing), on one line."""
    from arctl.launch.job import RunJob

    folder = workspace.jobs_dir / "%j"
    # submitted held, released once submitit has made the tasks' folders: SLURM opens a task's log
    # in its folder, and a task that starts first (an idle partition, a slow shared filesystem)
    # fails at once without a log
    held = {**params, "additional_parameters": {**params.get("additional_parameters", {}), "hold": True}}
    executor = slurm_executor(folder, held)
    parsed_ids: list[str] = []  # the job id sbatch answered with, as the executor parses it (a single job's)
    parse = executor._get_job_id_from_submission_command

    def parsed(output):
        job_id = parse(output)
        parsed_ids.append(str(job_id))
        return job_id

    executor._get_job_id_from_submission_command = parsed
    before = _entries(workspace.jobs_dir)
    jobs: list = []  # submitit's jobs of the array, once sbatch has answered
    # one try from sbatch's answer to the record in job_ids: a Ctrl-C as the submission's context ends (its lock
    # given back, stderr written back) comes after sbatch answered too, and its held job would stay queued for ever
    try:
        # one submission at a time per workspace (on this machine, for this user): submitit writes its pickles and
        # script into jobs/ under temporary names before sbatch answers, and a refused submission removes the new
        # entries there, which were another launch's own while both submitted (from a review)
        with exclusive(f"sbatch:{workspace.jobs_dir.resolve()}"), job_environment(chunk, scheduler=True), \
                captured_stderr() as captured, sbatch_answers() as answers:  # sbatch's complaint: in our one error line
            try:
                jobs = executor.map_array(RunJob(), [str(workspace.run_dir(i.run_id)) for i in chunk])
            except BaseException as err:  # sbatch refused (submitit's FailedJobError), or submitit failed after
                # the job id sbatch answered with (this launch's only), an array's too (from a review: it was read by
                # the executor's parser only, which the copy of the executor submitit submits an array with never calls)
                accepted = list(dict.fromkeys(parsed_ids + [job_id for job_id, _ in answers]))
                said = said_once(captured.read(), str(err))
                cancelled = scancel_quietly(accepted) if accepted else False  # accepted (held), then submitit failed
                # submitit's pickle and script of it; a job's folder only if it is this launch's job (another
                # launch into the same workspace may be submitting its own meanwhile)
                for left in _entries(workspace.jobs_dir) - before:
                    job = array_master(left.name)  # (a task's folder 5_0, the array's 5_submission.sh)
                    if job.isdigit() and job not in accepted:
                        continue
                    if left.is_dir():
                        shutil.rmtree(left, ignore_errors=True)
                    else:
                        left.unlink(missing_ok=True)
                if not isinstance(err, Exception):  # Ctrl-C: as it is, saying what became of the job sbatch accepted
                    if accepted:
                        add_note(err, _accepted_then(accepted, "the launch was interrupted", cancelled))
                    raise
                if accepted:
                    raise LaunchError(f"{_accepted_then(accepted, 'the submission failed', cancelled)}: "
                                      f"{said[-300:]}") from err
                raise LaunchError(f"sbatch refused the job: {said[-400:]}") from err
        master = array_master(jobs[0].job_id)
        # each run folder links its job while the job is held, before the release: a launch killed after the
        # release (kill -9, a lost session) leaves the next launch the job to adopt (refresh.orphaned_job), where
        # a job released but not linked yet was invisible and submitted again, two jobs training one run (from a
        # hunt); killed before the release, the next launch adopts the held job and releases it
        for item, job in zip(chunk, jobs):
            run_dir = workspace.run_dir(item.run_id)
            _link_job_dir(run_dir, workspace.jobs_dir / str(job.job_id), str(job.job_id))
            for script in (workspace.jobs_dir / master / f"{master}_submission.sh",
                           workspace.jobs_dir / str(job.job_id) / f"{master}_submission.sh"):
                if script.exists():
                    _link_job_dir(run_dir, script, "sbatch.sh")  # the sbatch script of its (array) job
                    break
        _release(master)
        # released: every task may start now
        job_ids.update({item.run_id: str(job.job_id) for item, job in zip(chunk, jobs)})
    except BaseException as err:  # refused (cancelled by _release), or e.g. Ctrl-C: a held job would wait for ever
        if not jobs or job_ids.get(chunk[-1].run_id) == str(jobs[-1].job_id):
            raise  # sbatch's own failure (undone above), or once recorded: the launch's to say
        master = array_master(jobs[0].job_id)
        if not isinstance(err, LaunchError):
            cancelled = scancel_quietly([master])
            if not isinstance(err, Exception):  # said on the "interrupted" line
                add_note(err, _accepted_then([master], "the launch was interrupted", cancelled))
        for item, job in zip(chunk, jobs):  # no link to a cancelled job: a later launch would adopt it
            (workspace.run_dir(item.run_id) / "job" / str(job.job_id)).unlink(missing_ok=True)
        raise
    return said_once(*(warned for _, warned in answers))


def _accepted_then(accepted: list[str], what: str, cancelled: bool) -> str:
    """What became of the jobs sbatch ``accepted`` (held) before ``what`` stopped their submission: cancelled, or
    (``cancelled`` false: scancel failed) the user's to cancel."""
    return (f"sbatch accepted job {', '.join(accepted)}, then {what} ("
            + ("job cancelled" if cancelled else f"scancel {' '.join(accepted)} failed: cancel it yourself") + ")")


def _release(master: str) -> None:
    """Release a held SLURM job (all its array tasks); if SLURM refuses, cancel it (a held job would
    wait forever) and raise a LaunchError, so its runs are unclaimed like a refused submission."""
    try:
        done = subprocess.run(["scontrol", "release", master], capture_output=True, text=True, timeout=60)
        said, ok = done.stderr + " " + done.stdout, done.returncode == 0
    except (OSError, subprocess.SubprocessError) as err:
        said, ok = str(err), False
    if not ok:
        try:
            subprocess.run(["scancel", master], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            pass
        raise LaunchError(f"scontrol release {master} failed (job cancelled): {' '.join(said.split())[-400:]}")


def needs_api_key(items: list[LaunchItem]) -> bool:
    """Whether any of the jobs logs to W&B online (the only case that needs the API key)."""
    return any((item.config.get("wandb") or {}).get("mode") == "online" for item in items)


def _named_secrets(item: LaunchItem) -> set[str]:
    return {str(n) for n in (item.config.get("cluster") or {}).get("secrets") or []}


def passed_secrets(items: list[LaunchItem], scheduler: bool = False) -> set[str]:
    """The secrets of the launching shell the jobs of ``items`` receive: the names of their ``cluster.secrets``,
    and ``WANDB_API_KEY`` where one logs online, except through a ``scheduler`` (sbatch stores the environment
    in SLURM's state): there only where a run names it in ``cluster.secrets`` (:func:`online_key_problem`)."""
    names = {n for item in items for n in _named_secrets(item)}
    return names | ({API_KEY_ENV} if needs_api_key(items) and not scheduler else set())


def left_out_secrets(items: list[LaunchItem], environ=None, passed: set[str] | None = None) -> list[str]:
    """The secrets of this shell (by name: :func:`arctl.track.identity.is_secret_name`) a SLURM submission
    of ``items`` leaves out of the jobs' environment (``passed``: :func:`passed_secrets` of ``items``,
    where the caller has it)."""
    env = os.environ if environ is None else environ
    keep = passed_secrets(items, scheduler=True) if passed is None else passed
    return sorted({name for name in env if is_secret_name(name)} - keep)


@contextmanager
def job_environment(items: list[LaunchItem], scheduler: bool = False):
    """The environment jobs are submitted with: this process's, without ``WANDB_API_KEY`` unless a job
    logs online. With ``scheduler`` (sbatch: it exports the submitting environment into SLURM's state
    directory, and a site may keep job environments in accounting) without every other secret of the
    shell either, but those named in the jobs' ``cluster.secrets``."""
    keep = passed_secrets(items, scheduler)
    names = left_out_secrets(items, passed=keep) if scheduler else ([] if API_KEY_ENV in keep else [API_KEY_ENV])
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def said_once(*texts: str) -> str:
    """``texts`` on one line (whitespace collapsed), each said once: one that another holds is left out (sbatch's
    complaint, which submitit printed on stderr and put in its error too, was said twice; from a hunt)."""
    flat = [" ".join(text.split()) for text in texts]
    kept = [t for i, t in enumerate(flat)
            if t and not any(t in other and (t != other or j < i) for j, other in enumerate(flat) if j != i)]
    return " ".join(kept)


SBATCH_ANSWER_WAIT_S = 10.0  # how long a launch interrupted during an sbatch waits for its answer (then stops it)


@contextmanager
def sbatch_answers() -> Iterator[list[tuple[str, str]]]:
    """While the block runs, submitit's sbatch calls are run here: yields a list that gets, for each submission
    sbatch accepts, its job id and what sbatch said on stderr. submitit's own runner drops that stderr when
    sbatch accepts (a site's job_submit.lua warnings: a time limit reduced, a job routed to another partition;
    from a hunt), and prints it when sbatch refuses, besides its error's text. A refusal is submitit's
    ``FailedJobError`` with sbatch's stderr, as before. (submitit runs sbatch through ``utils.CommandFunction``,
    from a copy of the executor for an array: no hook of the executor sees it; one submission at a time.) An
    interrupt while sbatch runs still gets its job id into the list (:func:`arctl.launch.signals.run_to_its_answer`
    waits for its answer)."""
    from submitit.core import utils
    from submitit.slurm.slurm import SlurmExecutor

    answers: list[tuple[str, str]] = []
    real = utils.CommandFunction

    def accepted(done: subprocess.CompletedProcess) -> tuple[str, str]:
        """The job id of an sbatch that answered, and what it said on stderr."""
        return str(SlurmExecutor._get_job_id_from_submission_command(done.stdout.strip())), done.stderr.strip()

    class Sbatch(real):
        def __call__(self, *args, **kwargs) -> str:
            command = self.command + [str(x) for x in args] + [f"--{x}={y}" for x, y in kwargs.items()]
            # in a session of its own: a terminal's Ctrl-C, sent to the whole foreground group, does not kill it once
            # SLURM may have accepted its job (its answer, the job id, was lost with it; from a hunt); an interrupt
            # waits for its answer, whose job id goes into the list for the caller to cancel (from a hunt: the job
            # SLURM accepted as the launch was interrupted stayed held in the queue for ever, and the launch said
            # "nothing was submitted")
            said: list[subprocess.CompletedProcess] = []  # its answer, as soon as it is read
            try:
                done = run_to_its_answer(command, SBATCH_ANSWER_WAIT_S, cwd=self.cwd, env=self.env, into=said)
                if done.returncode:
                    out, err = done.stdout.strip(), done.stderr.strip()
                    raise utils.FailedJobError(err or out or f"{command[0]} exited with code {done.returncode}") \
                        from subprocess.CalledProcessError(done.returncode, command, out, err)
                answers.append(accepted(done))
                return done.stdout.strip()
            except BaseException as stop:
                if not isinstance(stop, Exception):  # Ctrl-C, SIGTERM, SIGHUP: the answer, awaited or read before
                    # the stop came (from a review: a stop just after it was read lost the job id), names the job
                    answer = said[0] if said else getattr(stop, "answered", False)
                    if answer is None:
                        add_note(stop, f"sbatch had not answered {SBATCH_ANSWER_WAIT_S:g} s after the interrupt and "
                                       "was stopped: it may have queued a held job all the same (`squeue -u $USER "
                                       "-t PD` shows it)")
                    elif answer and answer.returncode == 0:
                        with suppress(Exception):  # an answer without a job id: nothing to cancel
                            if (job := accepted(answer)) not in answers:
                                answers.append(job)
                raise

    utils.CommandFunction = Sbatch
    try:
        yield answers
    finally:
        utils.CommandFunction = real


@contextmanager
def captured_stderr():
    """Capture stderr while the block runs: file descriptor 2 (children such as sbatch) and
    ``sys.stderr`` (Python-level prints, e.g. submitit echoing sbatch's complaint). Yields an object
    whose ``read()`` gives the text so far. On success the text is written back to stderr (nothing
    is lost); on failure the caller puts it into its one error line."""
    import io
    import tempfile

    sys.stderr.flush()
    python_level = io.StringIO()
    with tempfile.TemporaryFile() as tmp:
        saved_fd, saved_stream = os.dup(2), sys.stderr
        os.dup2(tmp.fileno(), 2)
        sys.stderr = python_level

        class Text:
            @staticmethod
            def read() -> str:
                tmp.seek(0)
                return python_level.getvalue() + tmp.read().decode(errors="replace")

        ok = False
        try:
            yield Text
            ok = True
        finally:
            sys.stderr = saved_stream
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            if ok:
                text = Text.read()
                if text:
                    sys.stderr.write(text)


def _submit_local(items: list[LaunchItem], workspace: Workspace,
                  array_parallelism: int | None) -> tuple[dict[str, str], int]:
    """Start one detached local queue that runs the items ``parallelism`` at a time (returned with
    the job ids)."""
    parallel = local_parallelism(items[0].config.get("cluster", {}), len(items), array_parallelism)
    workspace.jobs_dir.mkdir(parents=True, exist_ok=True)
    log_path = workspace.jobs_dir / f"local-queue-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    cmd = [sys.executable, "-m", "arctl.launch.local_queue", str(workspace.root), "--parallelism", str(parallel),
           *[item.run_id for item in items]]
    with open(log_path, "ab") as log, job_environment(items):
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    for item in items:  # before the registry has the job id: the queue waits for that, then names its own jobs
        name_job_process(workspace.run_dir(item.run_id), f"queue:{proc.pid}", proc.pid)
    return {item.run_id: f"queue:{proc.pid}" for item in items}, parallel


def _run_debug(items: list[LaunchItem], workspace: Workspace, reg: Registry, echo) -> dict[str, str]:
    """Run each item in this process (submitit DebugExecutor), one after another."""
    from submitit import DebugExecutor

    from arctl.launch.job import RunJob
    from arctl.launch.status_file import read_status

    failed = {}
    for k, item in enumerate(items):
        run_dir = workspace.run_dir(item.run_id)
        # this process, named before the row says RUNNING: `arctl cancel` and refresh ask whether it lives
        started, before = time.time(), read_status(run_dir)
        write_status(run_dir, pid=os.getpid(), pid_start=process_identity(os.getpid()), uid=os.getuid(),
                     host=socket.gethostname(), started_at=started)
        if not reg.update_if(item.run_id, {"state": states.PENDING, "job_id": "debug"},
                             {"state": states.RUNNING, "started_at": started}):
            if read_status(run_dir).get("pid") == os.getpid():  # not this process's (unless another launch took it)
                kept = {k: before.get(k) for k in ("pid", "pid_start", "uid", "host", "started_at")}
                if kept["pid"] == os.getpid():  # named by this launch's mark_submitted: the run is not its any more
                    kept.update(pid=None, pid_start=None, uid=None, host=None)
                write_status(run_dir, **kept)
            echo(f"not running {item.run_id}: it was cancelled (or relaunched) while the runs before it ran")
            continue
        echo(f"running {item.run_id} in-process")
        job = DebugExecutor(folder=run_dir / "job").submit(RunJob(), str(run_dir))
        error = None
        try:
            job.result()
        except KeyboardInterrupt as stop:  # Ctrl-C, a closed session (SIGHUP), a kill (SIGTERM): the user's stop
            with stops_ignored():  # the user pressing Ctrl-C again while it is recorded (milliseconds)
                _debug_interrupted(stop, item, items[k + 1:], workspace, reg)
            raise
        except Exception as err:  # noqa: BLE001 - recorded in the registry, shown by status/logs
            error = " ".join(str(err).split())[-300:]
        from arctl.launch.repair import REPORTED  # how an attempt's status.json says it ended

        status = read_status(run_dir)
        # (a job that found a cancel's request as it started trained nothing: "cancelled")
        state = REPORTED.get(status.get("state"), states.FAILED)
        values = {"state": state, "ended_at": time.time(), "error": status.get("error") or error,
                  **run_progress(run_dir, status, active=False)}
        if status.get("wandb_id") is not None:
            values["wandb_id"] = status["wandb_id"]
        if not reg.update_if(item.run_id, {"state": states.RUNNING}, values):  # cancelled (--force) meanwhile
            continue
        if state == states.FAILED:
            failed[item.run_id] = values["error"] or "failed"
    return failed


def _debug_interrupted(stop: KeyboardInterrupt, item: LaunchItem, rest: list[LaunchItem], workspace: Workspace,
                       reg: Registry) -> None:
    """Record a debug run the user stopped (``stop``: Ctrl-C; SIGHUP, SIGTERM) as `arctl cancel` records a
    job's: CANCELLED (what `arctl resume` and a sweep relaunch), "interrupted (Ctrl-C)" where its stop
    checkpoint was saved (:func:`arctl.launch.job.run_job`: the first Ctrl-C asks for one, a second stops at
    once); the runs after it, not started, CANCELLED too. What to do next goes on ``stop`` as a note, which
    the CLI's one "interrupted" line says. From a hunt: a Ctrl-C printed a traceback, and the run was FAILED
    "the process running it (debug executor) exited"."""
    from arctl.launch.job import interrupted_line, interruption
    from arctl.launch.status_file import read_status

    how, now = interruption(stop), time.time()
    run_dir = workspace.run_dir(item.run_id)
    status = read_status(run_dir)
    done = status.get("state") == "completed"  # the stop came in its last step, which finished it
    saved = status.get("state") == "preempted"  # its stop checkpoint, at the step it reached
    values = {"state": states.COMPLETED if done else states.CANCELLED, "ended_at": now,
              "error": None if done else interrupted_line(how, saved), **run_progress(run_dir, status, active=False)}
    if status.get("wandb_id") is not None:
        values["wandb_id"] = status["wandb_id"]
    recorded = False
    with suppress(Exception):  # a registry that cannot be written: a refresh fails the run as a dead process's
        recorded = reg.update_if(item.run_id, {"state": states.RUNNING}, values)
    if recorded and not done:  # its folder too: a repair keeps it CANCELLED (from a review: PREEMPTED, FAILED)
        mark_cancelled(run_dir, now, "debug")
    step = run_progress(run_dir, status, active=True).get("step")  # this attempt's: where its checkpoint is
    resume = f"`arctl resume {item.run_id}{workdir_arg(workspace.root)}`"
    if done:
        said = f"{item.run_id} completed"
    elif saved and isinstance(status.get("resume_step"), int) and status["resume_step"] > 0:  # what its job found
        said = f"{resume} goes on from step {status['resume_step']}"
    elif saved and status.get("resume_step") == 0:
        said = f"{resume} starts it from the beginning (it has no complete checkpoint)"
    elif saved and step is not None and "SIGTERM" not in str(status.get("signal")):  # (TERM: verl keeps its last)
        said = f"{resume} goes on from step {step}"
    elif has_checkpoint(run_dir):
        said = f"{resume} goes on from its last checkpoint"
    else:
        said = f"{resume} starts it from the beginning (it has no checkpoint)"
    left = 0
    for other in rest:
        with suppress(Exception):
            if reg.update_if(other.run_id, {"state": states.PENDING, "job_id": "debug"},
                             {"state": states.CANCELLED, "ended_at": now,
                              "error": f"not started: its launch was interrupted ({how})"}):
                left += 1
                mark_cancelled(workspace.run_dir(other.run_id), now, "debug")
    if left:
        said += (f"; {left} more run{'s' * (left > 1)} of this launch did not start: running the command again "
                 f"starts {'them' if left > 1 else 'it'}")
    add_note(stop, said)


TRANSIENT_REGISTRY = ("full", "locked")  # RegistryError kinds a wait outlasts (:func:`wait_for`)
WAIT_THROUGH_S = 600.0


def wait_for(
    workspace: Workspace,
    run_ids: list[str],
    on_update: Callable[[list[RunRecord]], None] | None = None,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> list[RunRecord]:
    """Poll (refresh) until none of ``run_ids`` is active; returns their final records. A registry that cannot be
    written for a while (a full disk, a repair: :data:`TRANSIENT_REGISTRY`) is waited through, said once to
    ``on_problem``, for at most :data:`WAIT_THROUGH_S` at a stretch. A run whose launch died
    before it submitted it (:func:`arctl.launch.refresh.interrupted_launch`: another launch's, waited for here)
    is INTERRUPTED, with why as its error (shown, as `arctl status` shows it; its row stays SUBMITTING until the
    next launch takes it): no job will end it."""
    from arctl.launch.refresh import interrupted_launch, refresh

    start = time.monotonic()
    wanted = set(run_ids)
    stuck_since = None  # a full disk (or a registry locked by a repair) while waiting: the jobs go on (from a hunt:
    # a waiting `arctl run` exited 2, "database or disk is full", and its run completed)
    with Registry(workspace.registry_path) as reg:
        while True:
            try:
                records = [r for r in (reg.get(rid) for rid in run_ids) if r is not None]
                records = refresh(reg, workspace, records)
                stuck_since = None
            except RegistryError as err:
                if err.kind not in TRANSIENT_REGISTRY or (stuck_since is not None
                                                          and time.monotonic() - stuck_since > WAIT_THROUGH_S):
                    raise
                if stuck_since is None:
                    stuck_since = time.monotonic()
                    if on_problem:
                        on_problem(f"{err} (the jobs go on; waiting through it for at most "
                                   f"{WAIT_THROUGH_S / 60:.0f} min)")
                time.sleep(poll_s)
                continue
            now = time.time()
            records = [replace(r, state=states.INTERRUPTED, error=gone)
                       if (gone := interrupted_launch(r, workspace.run_dir(r.run_id), now)) else r
                       for r in records if r.run_id in wanted]
            if on_update:
                on_update(records)
            if not any(r.state in states.ACTIVE for r in records):
                return records
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                return records
            time.sleep(poll_s)


def _differs_in(config: dict, workspace: Workspace, rec: RunRecord, most: int = 2) -> str:
    """``"; differs in KEY: A there, B here"`` for the keys of what a run computes (its identity) in which the run
    ``rec`` (its frozen config.yaml) differs from ``config`` (up to ``most``, then how many more); ``""`` where its
    config cannot be read. A stopped run that differs only in settings neither reads (an earlier arctl's id: a
    launch shares such a run completed or under way, :func:`arctl.launch.shared.mark_same_computation`) is said to
    be resumable (from a review: after an upgrade a failed GRPO run of a grid over reward.alpha started anew)."""
    from arctl.compose.validate import reads_none_of
    from arctl.launch.run_id import identity_differences, with_keys_added_later
    from arctl.launch.rundir import RunDirError, read_run_config

    try:
        frozen = with_keys_added_later(read_run_config(workspace.run_dir(rec.run_id)))
        differ = identity_differences(config, frozen)
    except (RunDirError, OSError, ValueError, TypeError, AttributeError):
        return ""
    if not differ:
        return ""
    if rec.state in states.RELAUNCHABLE and reads_none_of(config, list(differ)) and reads_none_of(frozen, list(differ)):
        return (f"; it differs only in settings this arm does not read, and `arctl resume {rec.run_id}"
                f"{workdir_arg(workspace.root)}` goes on from its checkpoint")
    shown = "; ".join(f"{k}: {there} there, {here} here" for k, (here, there) in list(differ.items())[:most])
    return f"; differs in {shown}" + (f" and {len(differ) - most} more key(s)" if len(differ) > most else "")

"""Runs shared between the cells of a sweep (``share_arms: true``): one run serves several.

Two cells are *the same run* when their resolved configs are equal once the keys that only name a
run are removed: the experiment's and the arm's names (``experiment``, ``arm``), the launch's names
for the run (``run_id``, ``run_dir``) and its W&B names (``wandb.group``, ``wandb.name``,
``wandb.id``, ``wandb.tags``). Everything else (the seed, every training, evaluation, cluster and
W&B destination key) must be equal. Arm ``grpo = [algo=grpo, prior=base]`` of main-grpo and of the
three ablations differs only in ``experiment`` and ``wandb.group``, so a sweep over them runs it
once per seed; AR-base (``main-ar-base``) and GRPO+BRPO+decoupled (``ablation-vr``'s
``grpo-vr-decouple``) are one config under two arm names, so the paper's sweep trains it once.

One run is kept (:func:`mark_shared` says which: a run the workspace already has, else the first
cell in sweep order) and launched if it is not done; every other cell is *shared*: it names the
kept run (:attr:`LaunchItem.shares`), is not launched, and the launcher records that the kept run
serves its cell: a ``members`` row in the registry (``arctl status EXP`` lists the run) and
``shared.json`` in the run dir (``{"cells": [[experiment, arm], ...]}``, the cells it serves besides
its own; :func:`arctl.track.runs.discover.read_served` reads it, and an earlier arctl's
``{"experiments": [...]}``), which ``arctl.track.runs.load_runs(experiments=...)`` reads: the run
is read as a run of those cells.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from arctl.config.files import atomic_write
from arctl.launch import states
from arctl.launch.rundir import READ_KEYS
from arctl.track.runs.discover import SHARED_FILE, read_served  # the reader of what is written here

IDENTITY_KEYS = ("experiment", "arm", *READ_KEYS)
WANDB_IDENTITY_KEYS = ("group", "name", "id", "tags")
REUSABLE = states.ACTIVE | {states.COMPLETED}  # a run a cell may share: done, or under way


def share_key(config: dict) -> str:
    """The config without the keys that only name the run, as canonical JSON."""
    kept = {k: v for k, v in config.items() if k not in IDENTITY_KEYS}
    if isinstance(kept.get("wandb"), dict):
        kept["wandb"] = {k: v for k, v in kept["wandb"].items() if k not in WANDB_IDENTITY_KEYS}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


@dataclass(frozen=True)
class WorkspaceRun:
    """A run a workspace already has, outside the items being launched, that a cell may share."""

    run_id: str
    experiment: str
    arm: str
    seed: int
    state: str
    key: str  # share_key of its config.yaml


def mark_shared(items: list, existing: dict[str, str] | None = None, elsewhere: Iterable[WorkspaceRun] = ()) -> list:
    """Mark each item (a :class:`arctl.launch.launcher.LaunchItem`) that is the same run as another:
    ``shares`` = the kept run's id, ``run_id`` = that id (the run the cell is), ``action`` =
    "shared" and a reason naming the kept run. Returns ``items`` (same order).

    Of the cells that are one run (equal :func:`share_key`), the kept run is, in this order: the
    first cell whose own run the workspace already has, completed or under way (``existing``: run id
    -> registry state); else a run of the workspace outside these items (``elsewhere``: another
    experiment's, or another arm name's; completed first), so ``arctl run ablation-vr`` and then
    ``arctl sweep paper`` trains GRPO and AR-base (= GRPO+BRPO+decoupled) no second time; else the
    first cell with a run to resume (failed, preempted, cancelled); else the first cell in sweep
    order. A run that another starts from (``trainer.init_from``: its ``after``) is never shared
    away: the other run's identity names it."""
    existing = existing or {}
    needed = {getattr(item, "after", None) for item in items} - {None}
    groups: dict[str, list] = {}
    for item in items:
        if item.run_id not in needed:
            groups.setdefault(share_key(item.config), []).append(item)
    outside: dict[str, WorkspaceRun] = {}
    for run in sorted(elsewhere, key=lambda r: (r.state != states.COMPLETED, r.run_id)):
        if run.state in REUSABLE:
            outside.setdefault(run.key, run)
    for key, group in groups.items():  # of the cells' own runs, a completed one first
        going = sorted((i for i in group if existing.get(i.run_id) in REUSABLE),
                       key=lambda i: existing[i.run_id] != states.COMPLETED)
        kept = (going[0] if going else outside.get(key)
                or next((i for i in group if i.run_id in existing), group[0]))
        where = " in this workspace" if isinstance(kept, WorkspaceRun) else ""
        for item in group:
            if item is kept:
                continue
            item.shares = item.run_id = kept.run_id
            item.action = "shared"
            item.reason = f"same run as {kept.experiment}/{kept.arm}/s{kept.seed}{where} (share_arms)"
    return items


def workspace_runs(items: list, workspace, force: bool = False) -> tuple[dict[str, str], list[WorkspaceRun]]:
    """What :func:`mark_shared` needs of ``workspace`` (an :class:`arctl.launch.workspace.Workspace`):
    the registry state of each item's own run, and the runs outside the items that a cell may share
    (completed or under way, at the items' seeds; their config.yaml read). The states are refreshed first
    (the scheduler asked, dead claims settled) on a read-only registry: a run whose job died is not
    under way (a cell shared with it would never run; from a review). Read-only. With ``force``
    (rerun completed cells) nothing outside is shared: the sweep's own cells are rerun."""
    from arctl.launch.registry import Registry
    from arctl.launch.run_id import with_keys_added_later
    from arctl.launch.rundir import RunDirError, read_run_config

    if not workspace.exists():
        return {}, []
    ids = {item.run_id for item in items}
    seeds = {item.seed for item in items}
    from arctl.launch.refresh import fresh_view

    with Registry.for_reading(workspace.registry_path) as reg:  # an export's or a dry run's read-only workspace
        mine = [rec for rid in sorted(ids) if (rec := reg.get(rid)) is not None]
        others = [] if force else [r for r in reg.list(states_in=REUSABLE) if r.run_id not in ids and r.seed in seeds]
    fresh = fresh_view(workspace, mine + others)  # states as they are now, nothing written
    existing = {rec.run_id: rec.state for rec in fresh if rec.run_id in ids}
    records = [rec for rec in fresh if rec.run_id not in ids and rec.state in REUSABLE]
    elsewhere = []
    for rec in records:
        try:
            config = read_run_config(workspace.run_dir(rec.run_id))
        except RunDirError:
            continue
        # a run frozen before a key existed is the cell it computes: compared with the key at its value
        config = with_keys_added_later(config)
        elsewhere.append(WorkspaceRun(rec.run_id, rec.experiment, rec.arm, rec.seed, rec.state, share_key(config)))
    return existing, elsewhere


def served(items: Iterable) -> dict[str, list[tuple[str, str]]]:
    """Kept run id -> the (experiment, arm) cells its shared items are (sweep order, no repeats)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for item in items:
        if getattr(item, "shares", None):
            cells = out.setdefault(item.shares, [])
            if (item.experiment, item.arm) not in cells:
                cells.append((item.experiment, item.arm))
    return out


def read_shared(run_dir: str | Path) -> list[str]:
    """The experiments ``run_dir/shared.json`` says the run serves (a cell of) besides its own
    cell, sorted ([] if none)."""
    return sorted({experiment for experiment, _ in read_served(run_dir)})


def write_shared(run_dir: str | Path, cells: Iterable[tuple[str, str]], own: tuple[str, str]) -> list[tuple[str, str]]:
    """Merge ``cells`` (minus the run's ``own`` (experiment, arm)) into ``run_dir/shared.json``,
    written atomically and only when its content changes (launching the sweep again rewrites
    nothing); returns the merged, sorted cells. An earlier arctl's file (experiments only) is read
    as those experiments under the run's own arm."""
    path = Path(run_dir) / SHARED_FILE
    named = read_served(run_dir)
    old_format = any(arm is None for _, arm in named)  # rewritten as cells
    before = sorted({(e, own[1] if a is None else a) for e, a in named})
    merged = sorted({*before, *((str(e), str(a)) for e, a in cells)} - {tuple(own)})
    if merged != before or old_format or not path.is_file():
        if not merged:
            return merged
        atomic_write(path, json.dumps({"cells": [list(c) for c in merged]}, indent=2) + "\n")
    return merged


def mark_same_computation(items: list, workspace, force: bool = False) -> list:
    """Mark each item (a :class:`arctl.launch.launcher.LaunchItem`) whose own run the workspace does not have, but
    has a run of its very cell (experiment, arm, seed), completed or under way, whose config differs from the
    item's only in settings that neither reads (:func:`arctl.compose.validate.unread_settings`: ``reward.alpha``
    beside no length penalty): that run computes what the item would, so the item shares it as :func:`mark_shared`
    marks a cell. From a hunt of an upgrade: an earlier arctl put such a setting in the run id (``arctl run
    ablation-dense reward.alpha=0.3``; a sweep's grid over it), and after the upgrade the same command planned
    GRPO "new" beside its completed run, to train it again. Not with ``force``; not a run another starts from
    (its identity names it). Read-only. Returns ``items``.

    Where the workspace has no such run completed or under way but has one stopped or failed (a relaunchable state),
    the item becomes that run, from its frozen config (as `arctl resume` takes it): the launch resumes it from its
    checkpoint, as it resumes a run of its own id (from a review: after an upgrade a failed GRPO run of a grid over
    reward.alpha was named, and a new run trained from step 0 beside it). Not a run that starts from another, nor an
    item that does (which run it starts from is part of its identity)."""
    from arctl.launch.refresh import fresh_view
    from arctl.launch.registry import Registry
    from arctl.launch.run_id import LAUNCH_ONLY_KEYS, with_keys_added_later
    from arctl.launch.rundir import PATH_KEYS, RunDirError, read_frozen_run, read_run_config

    needed = {getattr(item, "after", None) for item in items} - {None}
    open_ = [i for i in items if not getattr(i, "shares", None) and i.run_id not in needed]
    if force or not open_ or not workspace.exists():
        return items
    ids = {item.run_id for item in items}
    with Registry.for_reading(workspace.registry_path) as reg:
        have = {rid for rid in ids if reg.get(rid) is not None}
        cells = {(i.experiment, i.arm, i.seed) for i in open_ if i.run_id not in have}
        others = [r for r in reg.list(states_in=REUSABLE | states.RELAUNCHABLE) if r.run_id not in ids
                  and (r.experiment, r.arm, r.seed) in cells] if cells else []
    if not others:
        return items
    # completed first, then under way, then one to resume
    records = sorted((r for r in fresh_view(workspace, others) if r.state in REUSABLE | states.RELAUNCHABLE),
                     key=lambda r: (r.state != states.COMPLETED, r.state not in REUSABLE, r.run_id))
    taken: set[str] = set()  # runs an item resumes: one item each

    for item in open_:
        if item.run_id in have:
            continue
        for rec in (r for r in records if (r.experiment, r.arm, r.seed) == (item.experiment, item.arm, item.seed)):
            run_dir = workspace.run_dir(rec.run_id)
            try:
                config = with_keys_added_later(read_run_config(run_dir))
            except RunDirError:
                continue
            keys = unread_differences(item.config, config)
            if not keys:
                continue
            said = f"{', '.join(keys)}, which this arm does not read"
            if rec.state in REUSABLE:
                item.shares = item.run_id = rec.run_id
                item.action = "shared"
                item.reason = f"same run as {rec.run_id} in this workspace ({rec.state.lower()}): it differs only in {said}"
                break
            if rec.run_id in taken or item.after or (config.get("trainer") or {}).get("init_run"):
                continue
            try:
                frozen = read_frozen_run(run_dir, rec.run_id, rec.experiment, rec.arm, rec.seed)
            except RunDirError:
                continue
            for key in PATH_KEYS:  # this machine's folders: the launcher adds them again
                frozen.pop(key, None)
            # what the run computes as it was frozen; where and how it runs as this launch says, as a resume of a
            # run of its own id takes them (from a review: a run failed for memory was resumed with its old
            # cluster.mem_gb, the launch's cluster.mem_gb=16 dropped without a word)
            for section in (k for k in LAUNCH_ONLY_KEYS if k not in READ_KEYS):  # cluster, wandb
                if section in item.config:
                    frozen[section] = copy.deepcopy(item.config[section])
            item.config, item.run_id = frozen, rec.run_id
            item.note = f"the same run as this cell's under an earlier id: it differs only in {said}"
            taken.add(rec.run_id)
            break
    return items


def unread_differences(config: dict, other: dict) -> list[str]:
    """The keys of what a run computes (its identity) in which two configs of one cell differ, where every one of
    them is a setting that neither config reads (:func:`arctl.compose.validate.unread_settings`): the two compute
    the same thing (:func:`mark_same_computation`). ``[]`` where they are equal or differ in a key one of them reads."""
    from arctl.compose.validate import reads_none_of
    from arctl.launch.run_id import identity_differences

    keys = list(identity_differences(config, other))
    return keys if keys and reads_none_of(config, keys) and reads_none_of(other, keys) else []


MEMBERS_FILE = "members.json"  # in a run's folder: the sweeps and experiments a launch listed it under (repair reads it)


def read_members(run_dir: str | Path) -> list[str]:
    """The names (sweeps, experiments) ``run_dir/members.json`` lists the run under, sorted ([] if none or unreadable)."""
    try:
        names = json.loads((Path(run_dir) / MEMBERS_FILE).read_text()).get("members")
    except (OSError, ValueError, AttributeError):
        return []
    return sorted({str(n) for n in names if isinstance(n, str)}) if isinstance(names, list) else []


def write_members(run_dir: str | Path, names: Iterable[str]) -> None:
    """Merge ``names`` into ``run_dir/members.json`` (written atomically, only when it changes; nothing where the folder
    is not there). The registry's ``members`` rows list a run under every sweep that launched or kept it; this is their
    copy in the run's folder, so that ``arctl repair`` rebuilds them (from a hunt: a completed run a sweep kept, launched
    by its experiment before, was no longer the sweep's after a repair: `arctl status SWEEP` lost it)."""
    folder = Path(run_dir)
    before = read_members(folder)
    merged = sorted({*before, *(str(n) for n in names)})
    if merged != before and folder.is_dir():
        atomic_write(folder / MEMBERS_FILE, json.dumps({"members": merged}, indent=2) + "\n")

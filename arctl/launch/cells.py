"""Cells of one launch that are one run (the same run id): when that is fine, when it is a mistake.

A run's id hashes what it computes (:mod:`arctl.launch.run_id`), so two cells of a sweep can be one run:

- cells whose configs are equal (a grid point that changes nothing: the command line or the experiment sets
  what the grid varies). The run is launched once, and ``arctl sweep`` says so (:func:`same_run_notes`):
  from a hunt, a grid over the ``prior`` group beside ``thinking.prior=linear`` on the command line gave 1 run
  for 3 points without a word;
- cells that differ in what is no part of the identity but decides how or where the run runs (``cluster.*``,
  ``wandb.*``, ``scale.mem_gb``, ``verl.keep_checkpoints``): one run cannot have both values. From a hunt: ``grid: {cluster.mem_gb: [1, 2]}`` launched every cell once, with
  1 GB, silently. :func:`conflict` makes that one error line naming the key, both values and where it is set.
"""

from __future__ import annotations

from arctl.compose.errors import SpecError
from arctl.compose.overrides import override_key
from arctl.compose.resolve import names_shown
from arctl.compose.run import ResolvedRun
from arctl.track.runs.tidy import flatten_config


def conflict(kept: ResolvedRun, other: ResolvedRun, run_id: str) -> SpecError | None:
    """None when ``other`` may be launched as ``kept``: their configs are equal, or differ only where a run
    reads nothing (an inactive ``budget_control``, another method's section: the identity leaves them out as
    inert, and a grid point there is a moot one, :func:`same_run_notes`). Else the one line naming the key that
    decides how or where the one run runs (:func:`runs_differently`), both values and where it is set."""
    if other.config == kept.config:
        return None
    a, b = flatten_config(kept.config), flatten_config(other.config)
    differing = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and runs_differently(k))
    if not differing:
        return None
    # the key an override writes, before one derived from it (scale.mem_gb before cluster.mem_gb, its ${...})
    key = next((k for k in differing if _place(other, k) or _place(kept, k)), differing[0])
    more = f" (and {len(differing) - 1} more keys)" if len(differing) > 1 else ""
    return SpecError(
        f"two cells of {kept.name} set {key}={_shown(a.get(key))} and {key}={_shown(b.get(key))}{more}, but "
        f"{key} is no part of what a run computes: they are one run ({run_id}), which cannot have both",
        _place(other, key) or _place(kept, key) or kept.name,
        "give it one value for every cell (the sweep's overrides or the command line): a grid varies what runs compute")


def runs_differently(key: str) -> bool:
    """Whether dotted ``key`` is one the run id leaves out though the run uses it: where and how it runs or logs
    (``cluster.*``, ``wandb.*``, :data:`arctl.launch.run_id.NOT_COMPUTED`), not what it computes."""
    from arctl.launch.run_id import LAUNCH_ONLY_KEYS, NOT_COMPUTED

    section, _, rest = key.partition(".")
    return section in LAUNCH_ONLY_KEYS or (section, rest.split(".", 1)[0]) in NOT_COMPUTED


def same_run_notes(items, overrides_noted: set[str] = frozenset()) -> list[str]:
    """One note per set of grid keys whose points gave one run: ``items`` are launch items
    (:class:`arctl.launch.launcher.LaunchItem`) with the cells merged into each (``cells``). Keys in
    ``overrides_noted`` are left out (the command line's override of that very key is noted already)."""
    collapsed: dict[tuple[str, ...], list] = {}
    for item in items:
        cells = getattr(item, "cells", [])
        if len(cells) < 2:
            continue
        texts = [{*c.sweep_overrides, *c.sweep_not_read} for c in cells]  # a point's, also those a cell does not read
        varied = sorted(set().union(*texts) - set.intersection(*texts))
        keys = tuple(sorted({override_key(t) for t in varied} - set(overrides_noted)))
        if keys:
            collapsed.setdefault(keys, []).append((item, varied))
    notes = []
    for found in collapsed.values():
        item, varied = found[0]
        names = names_shown([i.run.name for i, _ in found])
        notes.append(f"the sweep's grid points {' / '.join(varied)} are one run of {names}, launched once (equal "
                     "values, a setting the run does not read, or an override in the experiment, the sweep or on the "
                     "command line that sets what they vary)")
    return notes


def same_arms_notes(items, overrides: list[str] | None) -> list[str]:
    """One note per set of arms of one launch (``items``: launch items of ``arctl run``) that are one run but for
    their names (:func:`arctl.launch.shared.share_key`: the arm, W&B's names) where the command line's
    ``overrides`` set what the arms' own overrides differ in: each is launched and trains the same numbers. From a
    hunt: ``arctl run r1-7b --scale paper prior=uniform`` started three identical 7B runs without a word (a sweep
    says so of its grid points: :func:`same_run_notes`)."""
    from arctl.launch.shared import share_key

    if not overrides:
        return []
    same: dict[tuple[int, str], list[ResolvedRun]] = {}
    for item in items:
        if getattr(item, "needed_by", None) is None:  # asked for, not a run another starts from
            same.setdefault((item.run.seed, share_key(item.run.config)), []).append(item.run)
    arms: dict[tuple[str, ...], list[int]] = {}  # the arms that are one run -> the seeds where they are
    for runs in same.values():
        names = tuple(dict.fromkeys(f"{r.experiment}/{r.arm}" for r in runs))
        if len(names) > 1:
            arms.setdefault(names, []).append(runs[0].seed)
    notes = []
    for names, seeds in arms.items():
        setting = _settings_of(names, overrides)
        if setting:
            notes.append(f"{' '.join(setting)} on the command line {'sets' if len(setting) == 1 else 'set'} what "
                         f"the arms {names_shown(list(names))} differ in: they are one run (seed{'s' * (len(seeds) > 1)} "
                         f"{', '.join(map(str, seeds))}), each launched under its own name with the same numbers")
    return notes


def _settings_of(names: tuple[str, ...], overrides: list[str]) -> list[str]:
    """The command line's ``overrides`` that write a key or config group that the spec's overrides of the arms
    ``names`` (``EXPERIMENT/ARM``) write."""
    from arctl.compose.experiment import load_experiment
    from arctl.compose.overrides import split_overrides
    from arctl.compose.resolve import GROUP_KEYS

    def writes(texts: list[str]) -> set[str]:
        part = split_overrides(list(texts), "command line")
        return {*part.groups, *part.written, *(k for g in part.groups for k in GROUP_KEYS.get(g, ()))}

    def meets(a: str, b: str) -> bool:
        return a == b or a.startswith(b + ".") or b.startswith(a + ".")

    armed: set[str] = set()
    for name in names:
        experiment, arm = name.rsplit("/", 1)
        armed |= writes(load_experiment(experiment).arms[arm])
    return [text for text in overrides if any(meets(k, w) for k in writes([text]) for w in armed)]


def _place(run: ResolvedRun, key: str) -> str | None:
    """Where ``run``'s value of ``key`` was written: the command line or the sweep (its grid point or overrides)."""
    def sets(text: str) -> bool:
        written = override_key(text)
        return written == key or key.startswith(written + ".")

    if any(sets(t) for t in run.user_overrides):
        return "command line"
    if run.sweep and any(sets(t) for t in run.sweep_overrides):
        from arctl.compose.paths import spec_files
        from arctl.compose.sweep import load_sweep

        grid = {override_key(k) for k in load_sweep(run.sweep).grid}
        found = spec_files("sweeps").get(run.sweep)
        where = str(found.path) if found else f"sweep {run.sweep}"
        written = [override_key(t) for t in run.sweep_overrides if sets(t)][-1]  # the last one wins
        return f"{where}: grid.{written}" if written in grid else f"{where}: overrides"
    return None


def _shown(value) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."

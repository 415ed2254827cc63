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


def same_arms_notes(items, overrides: list[str] | None, sweep=None) -> list[str]:
    """One note per set of arms of one launch (``items``: launch items of ``arctl run`` or ``arctl sweep``) that are
    one run but for their names (:func:`arctl.launch.shared.share_key`: the arm, W&B's names), saying what makes
    them one: the command line's ``overrides``, the ``sweep``'s (:class:`arctl.compose.sweep.Sweep`) overrides or
    grid point (a note per point), or, where none of those sets what the arms differ in, the experiment itself (arms
    written alike: a copy-paste, a YAML alias; one arm of several experiments is no note: each experiment is a
    comparison of its own, and ``share_arms`` trains it once). Each such arm is launched and trains the same numbers (with the
    sweep's ``share_arms``, once). Grouped over seeds. From hunts: ``arctl run r1-7b --scale paper prior=uniform``
    started three identical 7B runs without a word; ``grid: {thinking.lam: [0.3]}`` trained arms ``lam=0.5`` and
    ``lam=0.9`` at 0.3 each under its own name, silently (a sweep's grid points that are one run of one arm:
    :func:`same_run_notes`)."""
    from arctl.launch.shared import share_key

    same: dict[tuple[int, str], list] = {}
    for item in items:
        if getattr(item, "needed_by", None) is None:  # asked for, not a run another starts from
            same.setdefault((item.run.seed, share_key(item.run.config)), []).append(item)
    grid = {override_key(k) for k in (sweep.grid if sweep is not None else {})}
    found: dict[tuple, list[int]] = {}  # (the arms that are one run, what makes them one, shared) -> the seeds
    for group in same.values():
        names = tuple(dict.fromkeys(f"{i.run.experiment}/{i.run.arm}" for i in group))
        if len(names) < 2:
            continue
        differ = _differing(names)
        point = list(dict.fromkeys(t for i in group for t in i.run.sweep_overrides if override_key(t) in grid))
        causes = tuple((tuple(setting), where) for texts, where in (
            (overrides or [], "on the command line"),
            (sweep.overrides if sweep is not None else [], "in the sweep's overrides"),
            (point, "in the sweep's grid"),
        ) if (setting := _settings_of(differ, texts)))
        shared = any(getattr(i, "shares", None) for i in group)
        experiments = {name.rsplit("/", 1)[0] for name in names}
        if not causes and len(experiments) > 1:
            continue  # one arm in several experiments, each a comparison of its own (or share_arms trains it once)
        seeds = found.setdefault((names, causes, shared), [])
        if group[0].run.seed not in seeds:
            seeds.append(group[0].run.seed)
    notes = []
    for (names, causes, shared), seeds in found.items():
        how = ("launched once (share_arms)" if shared else
               "each launched under its own name with the same numbers")
        which = f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"
        if causes:
            many = sum(len(setting) for setting, _ in causes) > 1
            said = " and ".join(f"{' '.join(setting)} {where}" for setting, where in causes)
            notes.append(f"{said} {'set' if many else 'sets'} what the arms "
                         f"{names_shown(list(names))} differ in: they are one run ({which}), {how}")
        else:
            notes.append(f"the arms {names_shown(list(names))} are written alike in experiment "
                         f"{names[0].rsplit('/', 1)[0]} (the same settings): they are one run ({which}), {how}")
    return notes


def replaced_arm_values_notes(items, sweep, overrides: list[str] | None = None) -> list[str]:
    """One note per key of the ``sweep``'s (:class:`arctl.compose.sweep.Sweep`) grid or overrides that replaces a
    value an arm of its cells writes itself (``thinking.lam=0.9`` in arm ``ar-quad-lam9``) in every cell of that
    arm: the arm's own value is never run, though its name and label may say it (a grid that has the arm's value
    among its points runs it: no note). Keys the command line ``overrides`` write are left out (they replace the
    sweep's too: :func:`arctl.cli.cmd_sweep.grid_overridden`). From a hunt: ``grid: {thinking.lam: [0.3]}``
    trained ``ar-quad-lam9`` at 0.3, its figure label saying lam9, without a word."""
    from arctl.compose.experiment import load_experiment

    grid = {override_key(k) for k in sweep.grid}
    given = {override_key(t) for t in overrides or []}
    swept: dict[tuple[str, str, str], set[str]] = {}  # (experiment, arm, key the arm writes) -> the sweep's values
    for item in items:
        run = item.run
        if getattr(item, "needed_by", None) is None and run.sweep:
            for text in run.sweep_overrides:
                swept.setdefault((run.experiment, run.arm, override_key(text)), set()).add(_value(text))
    replaced: dict[str, dict[str, str]] = {}  # where the sweep writes the key -> arm -> the arm's own value
    for experiment, arm in dict.fromkeys((e, a) for e, a, _ in swept):
        for text in load_experiment(experiment).arms[arm]:
            key, theirs = override_key(text), _value(text)
            values = swept.get((experiment, arm, key))
            if values and key not in given and not any(_same(theirs, v) for v in values):
                where = (f"the sweep's grid over {key}" if key in grid else
                         f"the sweep's override {key}={' '.join(sorted(values))}")
                replaced.setdefault(where, {})[f"{experiment}/{arm}"] = f"{key}={theirs}"
    notes = []
    for where, by_arm in replaced.items():
        theirs = names_shown([f"{arm}'s {text}" for arm, text in by_arm.items()])
        notes.append(f"{where} replaces {theirs}: every cell of {'those arms' if len(by_arm) > 1 else 'that arm'} "
                     "takes the sweep's value")
    return notes


def _value(text: str) -> str:
    return text.split("=", 1)[1].strip()


def _same(a: str, b: str) -> bool:
    """Whether two override values are one (``0.5`` and ``0.50``)."""
    try:
        return a == b or float(a) == float(b)
    except ValueError:
        return False


def _differing(names: tuple[str, ...]) -> set[str]:
    """The keys and config groups that the spec's overrides of the arms ``names`` (``EXPERIMENT/ARM``) give
    different values (one writing a key another does not, too), with the keys a differing group choice sets."""
    from arctl.compose.experiment import load_experiment
    from arctl.compose.resolve import GROUP_KEYS

    written = []
    for name in names:
        experiment, arm = name.rsplit("/", 1)
        written.append({override_key(t): _value(t) for t in load_experiment(experiment).arms[arm]})
    keys = {k for arm in written for k in arm if len({a.get(k) for a in written}) > 1}
    return keys | {k for g in keys for k in GROUP_KEYS.get(g, ())}


def _settings_of(differ: set[str], overrides: list[str]) -> list[str]:
    """The ``overrides`` that write a key or config group of ``differ`` (what the arms differ in:
    :func:`_differing`)."""
    from arctl.compose.overrides import split_overrides
    from arctl.compose.resolve import GROUP_KEYS

    def writes(text: str) -> set[str]:
        part = split_overrides([text], "command line")
        return {*part.groups, *part.written, *(k for g in part.groups for k in GROUP_KEYS.get(g, ()))}

    def meets(a: str, b: str) -> bool:
        return a == b or a.startswith(b + ".") or b.startswith(a + ".")

    return [text for text in overrides if any(meets(k, w) for k in writes(text) for w in differ)]


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

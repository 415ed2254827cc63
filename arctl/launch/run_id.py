"""A run's identity: a stable hash of what it computes, not of how or where it is launched.

``run_id = f"{experiment}_{arm}_s{seed}_{hash}"`` where ``hash`` is the first 10 hex digits of
SHA-256 over the canonical JSON of the resolved config without
- its launch-only fields (``cluster``: where it runs; ``wandb``: where it logs; ``run_id``/``run_dir``/
  ``init_dir``: added by launch; the run a run starts from counts by its id, ``trainer.init_run``);
- the sections that installed backend packages add to every config, except the run's own backend's
  (the built-ins' always count): installing a backend renames no run;
- an inactive ``budget_control`` section (no method, no budget forcing: it changes nothing, so runs
  keep the ids they had before the section existed), and the sections of methods other than the
  chosen one (``budget_control.<method>``: installing a method's package renames no run);
- the keys of :data:`ADDED_AT_DEFAULT` while they hold their default (added later: every earlier run
  keeps its id; a run that sets one gets an id of its own);
- the keys of :data:`NOT_COMPUTED` at any value (how a run keeps its files or what it asks of the machine,
  not what it computes);
- the keys of :data:`NEW_DEFAULT` (added later with a default that changed what their backend computes)
  at the value that reproduces the earlier runs, in runs of that backend, and at their default in
  other backends' runs: earlier runs keep their ids, a run of the new default gets an id of its own.

The same cell of the same sweep always maps to the same id, so resubmitting a sweep finds it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re

from arctl.algo.settings import BudgetControl, Loss, Summary
from arctl.algo.verify import DEFAULT_GRADER, GRADER_BEFORE_THE_KEY
from arctl.backends.base import BUILTIN as BUILTIN_BACKENDS
from arctl.config.schema import ClusterConfig, RunConfig
from arctl.launch.rundir import READ_KEYS

LAUNCH_ONLY_KEYS = ("cluster", "wandb", *READ_KEYS)
# (section, key) -> the default at which the key stays out of the identity
ADDED_AT_DEFAULT = {("verl", "device"): "cuda", ("trainer", "init_from"): None, ("trainer", "init_run"): None,
                    ("budget_control", "thinkprune_round"): None, ("optim", "kl_coef"): Loss.kl_coef,
                    ("optim", "kl_type"): Loss.kl_type, ("summary", "inserted"): Summary.inserted,
                    ("cluster", "secrets"): ClusterConfig().secrets}  # launch-only: a config frozen before it resumes and shares as it did
# (section, key) never in the identity: they change what stays on disk or what a run asks of the machine
# (the scale's memory, cluster.mem_gb's default), not one number a run computes
NOT_COMPUTED = {("verl", "keep_checkpoints"), ("scale", "mem_gb")}
# (section, key) whose value is a path into another run's folder (an eval-only run's checkpoint): in the identity as
# written, but each seed's names its own seed's run, so runs at several seeds are one config where these keys name the
# same folder of their runs (its last part: ``global_step_N``, or ``model``): reports compare them so
RUN_PATH_KEYS = {("verl", "eval_checkpoint")}
# (backend, key) -> (the value earlier runs of that backend computed with, the key's default)
NEW_DEFAULT = {("verl", "grader"): (GRADER_BEFORE_THE_KEY, DEFAULT_GRADER)}
HASH_LEN = 10
_UNSAFE = re.compile(r"[^A-Za-z0-9-]+")
# what a run id read back from disk (the registry, a runs/ folder name) must look like before it names a
# folder or reaches a command line: one path component, never "..", never an option ("--user=root")
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")  # \Z: $ also matches before a trailing newline
_PREFIX_MAX = 48


def identity_config(config: dict) -> dict:
    """The part of a resolved config that defines what the run computes."""
    out = {k: v for k, v in config.items() if k not in LAUNCH_ONLY_KEYS and k not in _other_plugin_sections(config)}
    if "budget_control" in out and not BudgetControl.from_config(out).active:
        del out["budget_control"]
    elif isinstance(out.get("budget_control"), dict):  # only the chosen method's own section counts
        chosen = out["budget_control"].get("method")
        out["budget_control"] = {k: v for k, v in out["budget_control"].items()
                                 if not isinstance(v, dict) or k == chosen}
    for path, silent in _added_later(config).items():
        *parents, key = path
        if isinstance(inner := _section(out, parents), dict) and key in inner and inner[key] == silent:
            out = _replaced(out, parents, {k: v for k, v in inner.items() if k != key})
    for section, key in NOT_COMPUTED:
        if isinstance(out.get(section), dict) and key in out[section]:
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return out


def identity_differences(config: dict, other: dict) -> dict[str, tuple[object, object]]:
    """The dotted keys of what a run computes (:func:`identity_config`) in which two configs differ, each with its
    value in ``config`` and in ``other`` (:data:`MISSING` where one has no such key), sorted by key."""
    from arctl.track.runs.tidy import flatten_config

    mine, theirs = flatten_config(identity_config(config)), flatten_config(identity_config(other))
    absent = object()  # (not MISSING: a value "(none)" is no missing key)
    return {k: (mine.get(k, MISSING), theirs.get(k, MISSING)) for k in sorted(mine.keys() | theirs.keys())
            if k not in mine or k not in theirs or repr(mine.get(k, absent)) != repr(theirs.get(k, absent))}


MISSING = "(none)"  # identity_differences' value of a key one config lacks


def keys_added_later(backend: str | None) -> dict[tuple[str, str], object]:
    """Each key added after runs were written -> the value a run of ``backend`` without it computed
    with: :data:`ADDED_AT_DEFAULT`'s default; :data:`NEW_DEFAULT`'s earlier value in a run of that
    backend, its default in other backends' runs. At that value a key stays out of the identity."""
    return {**ADDED_AT_DEFAULT,
            **{(b, k): (earlier if backend == b else default) for (b, k), (earlier, default) in NEW_DEFAULT.items()}}


def with_keys_added_later(config: dict) -> dict:
    """A config written before some keys existed (a run's frozen config.yaml), with each missing key at
    the value the run computed with (:func:`keys_added_later`): the schema's keys, the same
    computation, the same identity. Keys present are left as they are."""
    out = dict(config)
    for path, value in _added_later(config).items():
        *parents, key = path
        if isinstance(inner := _section(out, parents), dict) and key not in inner:
            out = _replaced(out, parents, {**inner, key: copy.deepcopy(value)})  # a list default is each config's own
    return out


def _added_later(config: dict) -> dict[tuple[str, ...], object]:
    """Every key added after runs were written that ``config``'s run reads, as a path -> the value its runs
    from before computed with: arctl's (:func:`keys_added_later`) and its plugins' (:func:`plugin_keys_added_later`)."""
    return {**keys_added_later(config.get("backend")), **plugin_keys_added_later(config)}


def plugin_keys_added_later(config: dict) -> dict[tuple[str, ...], object]:
    """The keys a plugin marks ``added_later`` (:func:`arctl.algo.ranges.checks`) in the sections this run
    reads, as paths -> their defaults: its backend's section (a backend outside the built-ins:
    ``(backend, key)``) and its compared method's (a method outside the built-ins: ``("budget_control", method,
    key)``). A plugin's new key at its default renames no run, as :data:`ADDED_AT_DEFAULT` does for arctl's."""
    from arctl.algo.methods.registry import BUILTIN as BUILTIN_METHODS
    from arctl.algo.methods.registry import get_method
    from arctl.algo.ranges import added_later_defaults

    out: dict[tuple[str, ...], object] = {}
    backend = config.get("backend")
    if isinstance(backend, str) and backend not in BUILTIN_BACKENDS:
        from arctl.compose.plugins import backends

        if (loaded := backends().get(backend)) is not None:
            out.update({(backend, k): v for k, v in added_later_defaults(loaded.settings_type()).items()})
    method = (config.get("budget_control") or {}).get("method") if isinstance(config.get("budget_control"), dict) else None
    if isinstance(method, str) and method not in BUILTIN_METHODS:
        try:
            settings = get_method(method).settings
        except ValueError:  # not installed here: its keys are the config's as written
            settings = None
        out.update({("budget_control", method, k): v for k, v in added_later_defaults(settings).items()})
    return out


def _section(config: dict, path: list[str]):
    """The mapping at ``path`` inside ``config``, or None."""
    node = config
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _replaced(config: dict, path: list[str], value) -> dict:
    """``config`` with the mapping at ``path`` replaced by ``value`` (copies along the path; the rest shared)."""
    if not path:
        return value
    head, *rest = path
    return {**config, head: _replaced(config.get(head) or {}, rest, value)}


def _other_plugin_sections(config: dict) -> set[str]:
    """The sections that installed backend packages add to every config (``arctl.compose.plugins``),
    except the run's own backend's: they change nothing this run computes, and installing a backend
    must rename no run. The core sections and the built-in backends' (``tiny``, ``verl``, part of
    every id since they exist) always count."""
    core = {f.name for f in dataclasses.fields(RunConfig)} | set(BUILTIN_BACKENDS) | {config.get("backend")}
    return {k for k, v in config.items() if isinstance(v, dict) and k not in core}


def config_hash(config: dict) -> str:
    canonical = json.dumps(identity_config(config), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_LEN]


def make_run_id(config: dict) -> str:
    """``{experiment}_{arm}_s{seed}_{hash}``; only ``[A-Za-z0-9_-]``, so it is a safe path and W&B id."""
    prefix = "_".join(_UNSAFE.sub("-", str(config.get(k, "x"))) for k in ("experiment", "arm"))
    prefix = prefix[:_PREFIX_MAX].strip("-_") or "run"
    return f"{prefix}_s{int(config.get('seed', 0))}_{config_hash(config)}"

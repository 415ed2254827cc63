"""The compared budget-control methods, registered by name (verl's ``register_adv_est`` is the model).

A method is one object, :class:`ControlMethod`, that changes a GRPO arm through hooks; the defaults
change nothing (the ``none`` method). Both backends reach a run's method through
:func:`method_of` (``arctl.algo.methods.control`` dispatches there) and never test its name:

=============================  ===================================================================
hook                           what it changes
=============================  ===================================================================
``question_target``            a training question's target in the prompt (L1; ``writes_target``)
``target_choices``             the fixed targets a prompt may carry (None: any integer)
``eval_target_groups``         evaluation rollouts: one per target, each cut at its budgets
``instruction``                the prompt text for a target (verl appends it to the question)
``prompt_tokens``              room the prompt change takes (verl sizes its prompt length)
``step_limit``                 the thinking limit in force at a training step (ThinkPrune's round)
``generation_limit``           the most thinking tokens a training step generates (None: b_m)
``shape_rewards``              a tree's verifier rewards as the method scores them
``config_problem``             a config the method cannot run: (what, key, hint), at validation
=============================  ===================================================================

Where a method is found: the built-ins (:data:`BUILTIN`, loaded by name when first used, so choosing
a method's name does not import torch), the ``arctl.methods`` entry points of installed packages
(``name = "package.module:METHOD"``), and :func:`register_method` (a module that registers on import,
a test). The config's choice list ``budget_control.method`` is :func:`method_names`.

A method's flags (``shapes_rewards``, ``writes_target``) say which of its hooks the backends call; validation
refuses a method whose flags and overridden hooks disagree, and calls a plugin's overridden hooks once on
synthetic arguments (:func:`arctl.algo.methods.control.hooks_problem`), so that a mistake there is one error line
at ``--dry-run``, not a job that fails on the cluster or trains plain GRPO under the method's name.

This module imports no torch; a method's module may.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

ENTRY_POINT_GROUP = "arctl.methods"
BUILTIN = {
    "none": "arctl.algo.methods.registry:NONE",
    "thinkprune": "arctl.algo.methods.thinkprune:METHOD",
    "l1": "arctl.algo.methods.l1:METHOD",
}
"""name -> ``module:attribute`` of the built-in methods (docs/baselines.md). Elastic Reasoning and s1
budget forcing are no entry: Elastic is GRPO at one thinking budget with a solution budget
(``experiments/baselines-elastic.yaml``), s1 a decoding rule at evaluation (``budget_control.forcing_*``)."""
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
"""A plugin's name (a method's, a backend's): it names a config section (``budget_control.<method>``,
``<backend>``), so an identifier: lower case, digits and ``_`` (from a review: a hyphen, or an entry point
named ``verl.megatron``, made every command fail at building the schema)."""

_REGISTERED: dict[str, ControlMethod] = {}
_LOADED: dict[str, ControlMethod] = {}


class ControlMethod:
    """A compared method's hooks; these defaults leave the arm as it is (GRPO on verifier rewards).

    ``control`` is the run's :class:`arctl.algo.settings.BudgetControl`: the built-ins' flat keys, and
    the chosen method's own section, read typed through :meth:`options`."""

    name: str = "none"
    settings: type | None = None
    """The method's own keys, a dataclass whose fields carry their default and range
    (:func:`arctl.algo.ranges.checks` as field metadata), at ``budget_control.<name>.<key>``: composed,
    validated and part of the run's identity like the core keys (only for runs of this method). The
    built-ins keep their flat ``budget_control.l1_*`` / ``thinkprune_*`` keys (existing run ids)."""
    prompt_tokens: int = 0
    # the flags are what both backends read before calling the hooks; validation refuses a method whose flags and
    # overridden hooks disagree (arctl.algo.methods.control.flags_problem)
    shapes_rewards: bool = False  # whether shape_rewards changes anything: set it where shape_rewards is overridden
    writes_target: bool = False  # whether question_target puts a target into the prompt: set it where
    # question_target and instruction are overridden (question_target is not asked otherwise)
    targets_key: str | None = None  # the config key of target_choices' list (what an error about it names)

    def options(self, control: Any) -> Any:
        """This run's values of :attr:`settings` (``budget_control.<name>``; defaults where not set)."""
        if self.settings is None:
            raise TypeError(f"budget_control.method={self.name} declares no settings of its own")
        return self.settings(**dict(control.own))

    def question_target(self, control: Any, key: str, max_budget: int) -> int | None:
        """The target written into the prompt of training question ``key`` (a function of ``key``
        only, so every sample of a question sees it); None: the prompt is unchanged."""
        return None

    def target_choices(self, control: Any) -> tuple[int, ...] | None:
        """The targets a prompt may carry when they are a fixed list (None: any integer, or none)."""
        return None

    def eval_target_groups(self, control: Any, budgets: Sequence[int]) -> list[tuple[int | None, list[int]]]:
        """Evaluation rollouts ``[(target, budgets), ...]``: one thinking rollout per target, cut at
        its budgets. Default: one rollout with no target covers every budget."""
        return [(None, [int(b) for b in budgets])]

    def instruction(self, control: Any, target: int) -> str:
        """The prompt text for ``target`` (only asked of a method whose question_target is not None)."""
        raise NotImplementedError(f"budget_control.method={self.name} writes no target into the prompt")

    def step_limit(self, control: Any, step: int, total_steps: int) -> int | None:
        """The thinking limit in force at training ``step`` (1-based); None: no limit."""
        return None

    def generation_limit(self, control: Any, step: int, total_steps: int) -> int | None:
        """The most thinking tokens a training rollout at ``step`` generates (it stops there, as the
        method's own sampler would); None: up to the largest budget."""
        return None

    def shape_rewards(self, control: Any, rows: list[list[float]], cuts: Sequence[int],
                      summary_lens: Sequence[Sequence[int]], think_len: int, finished: bool,
                      limit: int | None, target: int | None) -> list[list[float]]:
        """A tree's verifier rewards ``rows`` [m][A] (0/1) as the method scores them; ``cuts`` [m]
        thinking tokens each budget's summaries saw, ``summary_lens`` [m][A] each summary's tokens,
        ``think_len`` thinking tokens sampled, ``finished`` the thinking ended by itself, ``limit``
        the step's :meth:`step_limit`, ``target`` the question's :meth:`question_target`."""
        return rows

    def config_problem(self, control: Any, max_budget: int, total_steps: int | None) -> tuple[str, str, str] | None:
        """(what, key, hint) of a config the method cannot run; ``max_budget``: the run's largest thinking
        budget (what its training rollout reaches); ``total_steps``: training steps (None: a dataset's size)."""
        return None

    def new_run_problem(self, control: Any, max_budget: int, total_steps: int | None) -> tuple[str, str, str] | None:
        """(what, key, hint) of a config the method runs but that would not do what it asks (e.g. a limit that
        never applies): refused where a run is composed, not where a run already started is resumed from its
        frozen config (it goes on as it began). Arguments as :meth:`config_problem`'s."""
        return None


NONE = ControlMethod()


def register_method(method: ControlMethod) -> ControlMethod:
    """Register ``method`` under ``method.name`` (returns it: usable as ``METHOD = register_method(...)``)."""
    name = getattr(method, "name", None)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"a method's name must match {NAME.pattern}, got {name!r}")
    if not isinstance(method, ControlMethod):
        raise TypeError(f"method {name!r} must be a ControlMethod (arctl.algo.methods.registry)")
    _check_settings(method, "registered")
    known = _REGISTERED.get(name) or _LOADED.get(name)
    if known is not None and known is not method:
        raise ValueError(f"a budget-control method named {name!r} is already registered")
    if known is None:  # a built-in's or an installed package's name, not yet loaded (from a review: registered
        # first, it replaced the built-in `l1` unseen); the entry point's own module registering itself is fine
        table, _ = plugin_table(BUILTIN, ENTRY_POINT_GROUP)
        if name in BUILTIN or (name in table and table[name].partition(":")[0] not in sys.modules):
            raise ValueError(f"a budget-control method named {name!r} exists ({BUILTIN.get(name) or table.get(name)}): "
                             "choose another name")
    _REGISTERED[name] = method
    _GENERATION[0] += 1
    return method


_GENERATION = [0]


def generation() -> int:
    """How many methods :func:`register_method` added in this process (the schema of the methods' settings
    is rebuilt when it changes). A registered method lives in this process only: a job, another process,
    finds the built-ins and the installed entry points."""
    return _GENERATION[0]


@functools.cache
def _scan(group: str) -> tuple[dict[str, tuple[str, str]], dict[str, str], tuple[str, ...]]:
    """The ``group`` entry points of the installed packages: (name → (``module:attribute``, package), name →
    why it cannot be used, packages whose metadata cannot be read). Read once per process and group: reading
    them scans every installed package's metadata (~50 ms with verl's ~180 packages), and composing a sweep
    asks several times per cell; a plugin installed later is seen by a new process. The one home of this for
    every plugin group (methods here, backends in :mod:`arctl.backends.base`, through :func:`plugin_table`).
    Package by package: one package's malformed entry_points.txt hid every plugin (from a review)."""
    from importlib import metadata

    found: dict[str, tuple[str, str]] = {}
    problems: dict[str, str] = {}
    unreadable: list[str] = []
    seen: set[str] = set()
    try:
        dists = list(metadata.distributions())
    except Exception:  # noqa: BLE001 - broken metadata must not hide the built-ins
        return {}, {}, ()
    for dist in dists:
        try:
            package = str(dist.metadata["Name"] or "?")
            key = re.sub(r"[-_.]+", "-", package).lower()
            if key in seen:  # the first on the path, as importlib.metadata.entry_points() takes it
                continue
            seen.add(key)
            points = [(ep.name, ep.value) for ep in dist.entry_points if ep.group == group]
        except Exception:  # noqa: BLE001 - this package's metadata alone is left out
            unreadable.append(str(getattr(dist, "_path", "") or "a package"))
            continue
        for name, target in points:
            if not NAME.fullmatch(name):
                problems[name] = (f"package {package} declares the {group} entry point {name!r}, which is not a "
                                  f"name arctl can use (lower case letters, digits and _; {NAME.pattern})")
            elif name in found and found[name][0] != target:
                problems[name] = (f"packages {found[name][1]} ({found[name][0]}) and {package} ({target}) both "
                                  f"declare the {group} entry point {name!r}: uninstall one")
            else:
                found.setdefault(name, (target, package))
    return found, problems, tuple(unreadable)


def plugin_table(builtin: dict[str, str], group: str) -> tuple[dict[str, str], dict[str, str]]:
    """(name → ``module:attribute``: ``builtin``, then the installed ``group`` entry points; name → why that
    name cannot be used: declared by two packages, not a name, or an installed package's entry point that
    names a built-in for another object, which arctl will not choose between silently)."""
    found, problems, _ = _scan(group)
    problems = dict(problems)
    table = dict(builtin)
    for name, (target, package) in found.items():
        if name in builtin and target != builtin[name]:
            problems[name] = (f"package {package} declares the {group} entry point {name!r} ({target}), the name "
                              f"of arctl's built-in ({builtin[name]}): uninstall it, or have it renamed")
        elif name not in problems:
            table.setdefault(name, target)
    for name in problems:
        table.pop(name, None)
    return table, problems


def plugin_package(group: str, name: str) -> str | None:
    """The installed package that declares ``group``'s entry point ``name`` (the first on the path, the one
    :func:`plugin_table` loads), or None where none does."""
    found = _scan(group)[0].get(name)
    return found[1] if found else None


def unreadable_packages(group: str) -> tuple[str, ...]:
    """Installed packages whose entry points could not be read (for an "unknown" error: a plugin there is lost)."""
    return _scan(group)[2]


def method_names() -> tuple[str, ...]:
    """Every method a config may choose (``budget_control.method``): built-ins first; a name an installed
    package declares that cannot be used is among them, so that choosing it says why."""
    table, problems = plugin_table(BUILTIN, ENTRY_POINT_GROUP)
    names = list(BUILTIN)
    names += sorted((set(table) | set(_REGISTERED) | {n for n in problems if NAME.fullmatch(n)}) - set(BUILTIN))
    return tuple(names)


def _check_settings(method: ControlMethod, where: str) -> None:
    """ValueError where ``method``'s own settings cannot be a section ``budget_control.<name>``: not a
    dataclass, or named like one of arctl's ``budget_control`` keys (from a review: either made every
    command fail at building the schema, a plugin that was never chosen included)."""
    if method.settings is None:
        return
    import dataclasses

    from arctl.algo.settings import BudgetControl

    if not dataclasses.is_dataclass(method.settings):
        raise ValueError(f"budget_control.method {method.name!r} ({where}): its settings {method.settings!r} must be "
                         "a dataclass")
    if method.name in {f.name for f in dataclasses.fields(BudgetControl)}:
        raise ValueError(f"budget_control.method {method.name!r} ({where}) has settings of its own, whose section "
                         f"budget_control.{method.name} would be arctl's key of that name: the method needs another name")
    from arctl.algo.ranges import fields_problem

    if problem := fields_problem(method.settings):
        # a section every config holds: a field it cannot fill or check made every run fail, of any method (a hunt)
        raise ValueError(f"budget_control.method {method.name!r} ({where}) cannot be used: "
                         f"budget_control.{method.name}.{problem}")


def get_method(name: str) -> ControlMethod:
    """The method registered as ``name``; ValueError (one line) naming the known ones, or why it cannot be used."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _LOADED:
        return _LOADED[name]
    table, problems = plugin_table(BUILTIN, ENTRY_POINT_GROUP)
    if name in problems:
        raise ValueError(f"budget_control.method {name!r} cannot be used: {problems[name]}")
    if name not in table:
        lost = unreadable_packages(ENTRY_POINT_GROUP)
        raise ValueError(f"unknown budget_control.method {name!r}; known: {', '.join(method_names())}"
                         + (f" (the entry points of {', '.join(lost)} cannot be read)" if lost else ""))
    module_name, _, attr = table[name].partition(":")
    try:
        # what a plugin prints at import goes to stderr: stdout may be a command's --json, and the schema loads
        # every installed plugin before the command redirects anything (from a hunt: a print corrupted --json)
        with contextlib.redirect_stdout(sys.stderr):
            method = getattr(importlib.import_module(module_name), attr or "METHOD")
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a plugin that fails to import (or exits) is one line
        raise ValueError(f"cannot load budget_control.method {name!r} from {table[name]!r}: "
                         f"{type(err).__name__}: {' '.join(str(err).split())}") from err
    if not isinstance(method, ControlMethod) or method.name != name:
        raise ValueError(f"{table[name]!r} is not the ControlMethod named {name!r}")
    _check_settings(method, table[name])
    _LOADED[name] = method
    return method


def settings_types() -> dict[str, type]:
    """name -> settings dataclass of every method outside :data:`BUILTIN` that declares one (entry
    points and registered methods; loading a plugin's module here is why it must import no torch at
    module level). A plugin that fails to load, or that cannot be used, adds nothing: choosing it reports
    why, as one line."""
    out: dict[str, type] = {}
    for name in method_names():
        if name in BUILTIN:
            continue
        try:
            settings = get_method(name).settings
        except ValueError:
            continue
        if settings is not None:
            out[name] = settings
    return out


def method_of(control: Any) -> ControlMethod:
    """The method of a :class:`arctl.algo.settings.BudgetControl` (its ``method`` field)."""
    return get_method(str(control.method))

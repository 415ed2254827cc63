"""The range of every numeric key of a run config: limits that a machine could ever meet.

Validation (:mod:`arctl.compose.validate`) checks each numeric value of a resolved config against
:func:`ranges` (lists: every element against :func:`list_ranges`); a numeric key without a range is
refused, so a new key cannot slip in unchecked (``tests/spec`` walks every experiment's configs).
The typed sections' ranges are written on their fields in the schema (:mod:`arctl.config.schema`); the
open sections' here (``scale``: set by a group option), and a backend's section by the backend
(typed: ``Backend.settings_type``; open: ``Backend.config_ranges``; :mod:`arctl.compose.plugins`).
Keys that users add under a backend's section where it reads them (``+tiny.task.<task>.<knob>=...``, a
plugin's open section: ``Backend.added_keys``; elsewhere refused) only need to be finite and of a sane size
here (:data:`OPEN_RANGE`): the backend checks them.
"""

from __future__ import annotations

from typing import Any

from arctl.compose import plugins
from arctl.config.ranges import CORES, MEM_GB, TOKENS, F, I, Range
from arctl.config.schema import field_item_ranges, field_ranges, nullable_lists, number_fields

OPEN_SECTION_RANGES: dict[str, Range] = {
    # scale
    "scale.cpus_per_task": CORES,
    "scale.mem_gb": MEM_GB,
    "scale.preempt_warning_s": I(1, 65535),
    "scale.rollout_n": I(1, 1024),
    "scale.summary_max_tokens": I(1, 10**5),
}


def ranges() -> dict[str, Range]:
    """dotted key -> range of every declared numeric key: the schema's typed sections (the backends'
    typed sections included), the open sections of :data:`OPEN_SECTION_RANGES`, the backends'."""
    return {**field_ranges(plugins.run_config()), **OPEN_SECTION_RANGES, **plugins.backend_ranges()}


def list_ranges() -> dict[str, Range]:
    """dotted key -> range of each entry of a list key."""
    return {**field_item_ranges(plugins.run_config()), "scale.budgets": TOKENS}


def nullable() -> tuple[str, ...]:
    """The list keys that may be null: eval budgets derived from the thinking budgets
    (compose.resolve._finalize), L1 targets sampled."""
    return nullable_lists(plugins.run_config())


# the sections whose keys are other keys' values (``thinking.budgets: ${scale.budgets}``, ``rollout.n:
# ${scale.rollout_n}``, the scale's limits for ThinkPrune and L1): checked first, so a value out of range is said as
# the key the user wrote (from a hunt: scale.budgets=[8,16,24,100000000] was blamed on thinking.budgets, "no
# override writes it")
SOURCE_SECTIONS = ("scale.",)

OPEN_RANGE = F(-1e15, 1e15)  # a key a user added under an open section: finite and sane


def _leaves(node: Any, prefix: str = ""):
    """(dotted key, value) of every leaf; list items too, as ``key[i]`` (a list of numbers under an
    open section is checked number by number)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, f"{prefix[:-1]}[{i}].")
    else:
        yield prefix[:-1], node


def _list_key(key: str) -> str:
    """``a.b[2]`` -> ``a.b`` (the key a list item belongs to)."""
    return key.split("[", 1)[0]


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_MISSING = object()


def _lookup(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def range_problem(cfg: dict) -> tuple[str, str] | None:
    """(key, problem) of the first value outside its range, or None. A declared key must hold its
    kind of value (a number, or a list of numbers: never a mapping, whose leaves would pass as keys
    of their own); every other numeric leaf needs a declared range, or an open section's."""
    declared, lists, open_sections, may_be_null = ranges(), list_ranges(), plugins.open_sections(), nullable()
    checks = [(key, r, False) for key, r in declared.items()] + [(key, r, True) for key, r in lists.items()]
    checks.sort(key=lambda c: not c[0].startswith(SOURCE_SECTIONS))  # the sources first, else in order
    for key, r, is_list in checks:
        value = _lookup(cfg, key)
        if not is_list:
            if value is not _MISSING and not r.contains(value):
                return key, f"{key}={value!r} is invalid: expected {r.describe()}"
            continue
        if value is _MISSING or (value is None and key in may_be_null):
            continue
        if not isinstance(value, list):
            return key, f"{key}={value!r} is invalid: expected a list of numbers, each {r.describe()}"
        bad = [v for v in value if not r.contains(v)]
        if bad:
            return key, f"{key} holds {bad[0]!r}: each entry must be {r.describe()}"
    for key, value in _leaves(cfg):
        if key in declared or _list_key(key) in lists:
            continue
        if _numeric(value):
            if not key.startswith(open_sections):
                if key in number_fields(plugins.run_config()):  # a plugin's number without a range (arctl's own
                    # all have one: tests/spec): the plugin's to declare (from a review)
                    return key, (f"{key}={value!r}: {key} declares no range (a plugin's setting declares one with "
                                 "arctl.algo.ranges.checks(range=...))")
                return key, f"{key}={value!r} is invalid: this key takes no number"  # a text or true/false key
            if not OPEN_RANGE.contains(value):
                return key, f"{key}={value!r} is out of range: expected a finite number of magnitude <= 1e15"
    return None

"""Ranges of numbers, and the metadata a typed setting carries for validation.

A setting's field carries what validation checks in its metadata (:func:`checks`: ``range`` of a
number, ``items``: the range of each entry of a list, ``choices`` of a string). The algorithm's
settings (:mod:`arctl.algo.settings`) carry theirs; the run config's schema (``arctl.config.schema``)
and the backends' sections use the same helper, and validation (``arctl.compose``) reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUDGET_MAX = 10**6  # thinking tokens: far above any context window


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    integer: bool = True
    lo_open: bool = False
    hi_open: bool = False
    nullable: bool = False

    def contains(self, v: Any) -> bool:
        if v is None:
            return self.nullable
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if not math.isfinite(v):
            return False
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below

    def describe(self) -> str:
        what = "an integer" if self.integer else "a number"
        num = lambda x: str(int(x)) if float(x).is_integer() else f"{x:g}"  # noqa: E731
        lo = f"> {num(self.lo)}" if self.lo_open else f">= {num(self.lo)}"
        hi = f"< {num(self.hi)}" if self.hi_open else f"<= {num(self.hi)}"
        return f"{'null or ' if self.nullable else ''}{what} {lo} and {hi}"


def I(lo: float, hi: float, **kw) -> Range:  # noqa: E743 - short names keep the table readable
    return Range(lo, hi, integer=True, **kw)


def F(lo: float, hi: float, **kw) -> Range:
    return Range(lo, hi, integer=False, **kw)


TOKENS = I(1, BUDGET_MAX)
PROB = F(0, 1)


ADDED_LATER = "added_later"
"""A settings field's metadata key: the field was added after runs were written, and at its default it stays out
of a run's identity (:func:`added_later_defaults`)."""


def checks(range: Range | None = None, items: Range | None = None,
           choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None,
           added_later: bool = False) -> dict[str, Any]:
    """A field's metadata for validation: ``range`` of a number, ``items`` the range of each entry of
    a list, ``choices`` of a string (a tuple, or a function returning the names registered when it
    is asked: the compared methods, the priors). ``added_later``: a plugin's setting added in a later
    version of its package: at its default, the runs written before it keep their ids (the run id hashes
    the config), so they resume and are found as before."""
    meta = {k: v for k, v in (("range", range), ("items", items), ("choices", choices)) if v is not None}
    return {**meta, ADDED_LATER: True} if added_later else meta


def added_later_defaults(settings: type | None) -> dict[str, Any]:
    """field name -> default of each field of the dataclass ``settings`` marked ``added_later``
    (:func:`checks`); {} for None or a class that is not a dataclass."""
    import dataclasses

    if settings is None or not dataclasses.is_dataclass(settings):
        return {}
    out = {}
    for f in dataclasses.fields(settings):
        if f.metadata.get(ADDED_LATER):
            out[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return out


def fields_problem(settings: type, ranged: frozenset[str] = frozenset()) -> str | None:
    """What a plugin's settings dataclass's key (a field of its config section) lacks: a default (OmegaConf's
    ``???`` is none: the section is in every config, so a key without one failed every run), a range for a number (declared with :func:`checks`, or one of ``ranged``: a
    backend's ``config_ranges``), a default of its type, inside its range, among its choices; None when all have
    it. A default that is an interpolation (``${scale.rollout_n}``) is the config's to resolve: not checked here.
    From a hunt of plugin paths: each of these made every run fail, or let any number through."""
    import dataclasses
    import typing

    from arctl.algo.settings import section_fields

    try:
        hints = typing.get_type_hints(settings)
    except Exception as err:  # noqa: BLE001 - an annotation that does not resolve
        return f"(its annotations) cannot be read: {type(err).__name__}: {err}"
    for f in section_fields(settings):
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else _MISSING_TEXT)
        kind = hints.get(f.name)
        if kind in (int, float) and f.metadata.get("range") is None and f.name not in ranged:
            return f"{f.name} declares no range (a plugin's setting declares one with arctl.algo.ranges.checks(range=...))"
        if default == _MISSING_TEXT:
            return f"{f.name} has no default"
        if isinstance(default, str) and default.startswith("${"):
            continue
        if kind in (int, float) and (isinstance(default, bool) or not isinstance(default, (int, float))
                                     or (kind is int and isinstance(default, float))):
            return f"{f.name}'s default {default!r} is no {kind.__name__}"
        if (r := f.metadata.get("range")) is not None and not r.contains(default):
            return f"{f.name}'s default {default!r} is outside its range: {r.describe()}"
        if (r := f.metadata.get("items")) is not None and isinstance(default, (list, tuple)) and \
                (bad := [v for v in default if not r.contains(v)]):
            return f"{f.name}'s default holds {bad[0]!r}: each entry must be {r.describe()}"
        choices = f.metadata.get("choices")
        choices = choices() if callable(choices) else choices
        if choices is not None and default is not None and default not in choices:
            return f"{f.name}'s default {default!r} is not one of its choices: {', '.join(map(str, choices))}"
    return None


_MISSING_TEXT = "???"  # OmegaConf's MISSING: what arctl.config.schema.setting() holds without a default

"""What a config value may interpolate, and arctl's own resolvers.

A value may refer to another key of the run config (``${scale.budgets}``), call arctl's own
resolvers (:data:`RESOLVERS`: ``arctl.last``, ``arctl.grid``, ``arctl.part``) and OmegaConf's ``oc.select`` (a key's
value or a default: the config only). Nothing else: OmegaConf's and Hydra's
resolvers read the environment (``oc.env``), build new interpolations from text (``oc.decode``,
``oc.create``: a way to reach ``oc.env`` that no text match sees), read the clock (``now``: every
launch would be a new run id) or the launching process (``hydra:``). The rule is checked on every
override a user or a spec writes (:func:`interpolation_problem`, with its place) and on the composed
config before it is resolved (:func:`composed_problem`: arctl/conf and every option too); a
resolved config may hold no ``${`` at all (:func:`leftover_problem`: a frozen config is data, and a
job that read it with OmegaConf would resolve it again).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from arctl.config.ranges import BUDGET_MAX


def budget_grid(max_budget: int, size: int) -> list[int]:
    """``size`` budgets evenly spaced up to ``max_budget`` (paper: 32 budgets every 250 to 8000)."""
    from arctl.compose.errors import SpecError

    found = _grid_problem(max_budget, size)
    if found:
        key, value, expected = found
        shown = f"{key}={value!r}" if key == "eval.grid_size" else f"budget {value!r}"
        raise SpecError(f"{shown} is invalid: expected {expected}", key)
    return _spaced(max_budget, size)


def _spaced(max_budget: int, size: int) -> list[int]:
    return sorted({max(1, round(max_budget * i / size)) for i in range(1, size + 1)})


def _grid_problem(max_budget, size) -> tuple[str, Any, str] | None:
    """(the key whose rule the value breaks, the value, what that key takes) of a grid's size or largest
    budget, or None. A size is an integer, never a number YAML would truncate (2.5) or a boolean (true):
    from a review, both gave a grid silently."""
    from arctl.config.schema import field_ranges

    sizes = field_ranges()["eval.grid_size"]
    if isinstance(size, bool) or not isinstance(size, int) or not sizes.contains(size):
        return "eval.grid_size", size, sizes.describe()
    if isinstance(max_budget, bool) or not (isinstance(max_budget, int) and 1 <= max_budget <= BUDGET_MAX):
        return "thinking.budgets", max_budget, f"an integer >= 1 and <= {BUDGET_MAX}"
    return None


def _top(budgets, resolver: str):
    """A support's largest budget; SpecError (named after the key that calls ``resolver``) where the value it
    reads is no non-empty list (from a review: ``scale.budgets=[]`` was "IndexError raised while resolving")."""
    from arctl.compose.errors import SpecError

    if (isinstance(budgets, (str, bytes)) or not isinstance(budgets, Sequence) or not budgets
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in budgets)):
        raise SpecError(f"{resolver} reads the budgets {budgets!r}, which are not a non-empty list of token budgets "
                        "(integers)",
                        hint="the budgets it reads come from another key (e.g. scale.budgets=[...], "
                             "thinking.budgets=[...]): give that key a list")
    from arctl.compose.validate import increasing

    if not increasing(budgets):  # the last entry would not be the largest (from a hunt: scale.budgets=[2000,8000,
        # 4000,6000] gave main-grpo the thinking budget 6000, its other derived values 8000)
        fixed = ",".join(map(str, sorted(set(budgets))))
        raise SpecError(f"{resolver} reads the budgets {list(budgets)!r}, which are not strictly increasing: it takes "
                        "the last as the largest",
                        hint="the budgets it reads come from another key (e.g. scale.budgets=[...]): sort that key's "
                             f"budgets and drop repeats, e.g. scale.budgets=[{fixed}]")
    return list(budgets)[-1]


def _last(budgets) -> list:
    """The largest budget of a support, as a one-budget support (GRPO's single final budget)."""
    return [_top(budgets, "arctl.last")]


def _grid(budgets, size) -> list[int]:
    """The evaluation grid up to a support's largest budget (an arm evaluated past its training budget).
    A bad argument is this resolver's error, not the key whose rule it shares (from a review: a user who wrote
    ``thinking.budgets='${arctl.grid:${scale.budgets},0}'`` read "eval.grid_size=0 is invalid")."""
    from arctl.compose.errors import SpecError

    top = _top(budgets, "arctl.grid")
    found = _grid_problem(top, size)
    if found:
        what = "size" if found[0] == "eval.grid_size" else "largest budget"
        shown = str(found[1]).lower() if isinstance(found[1], bool) else repr(found[1])  # as written: true
        raise SpecError(f"arctl.grid: {what} {shown} is invalid: expected {found[2]} (as {found[0]} takes)",
                        hint=f"e.g. {USAGE['arctl.grid'][1]}")
    return _spaced(top, size)


def _part(budgets, fraction) -> int | list[int]:
    """A fraction of a support's largest budget b_m, rounded to a whole token and at least 1; a list of
    fractions gives one each. A scale's settings that are proportions of its b_m (ThinkPrune's limits
    b_m/2, 3b_m/8, b_m/4; Elastic's t = s = b_m/8; the tiny Dr. GRPO constant b_m) follow the scale's
    budgets when a user or a test changes them: ``${arctl.part:${scale.budgets},[0.5,0.375,0.25]}``."""
    from arctl.compose.errors import SpecError

    top = _top(budgets, "arctl.part")
    one = isinstance(fraction, (int, float, str)) or not isinstance(fraction, Sequence)
    fractions = [fraction] if one else list(fraction)
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise SpecError(f"arctl.part: fraction {f!r} is invalid: expected a number > 0 and <= 1 (a part of the "
                            "largest budget)", hint="e.g. ${arctl.part:${scale.budgets},0.5}")
    parts = [max(1, round(top * f)) for f in fractions]
    return parts[0] if one else parts


# each resolver's arguments and an example, for the error of a call with too few or too many
USAGE: dict[str, tuple[str, str]] = {
    "arctl.last": ("BUDGETS (a list of token budgets)", "${arctl.last:${scale.budgets}}"),
    "arctl.grid": ("BUDGETS,SIZE (a list of token budgets, the number of grid budgets)",
                   "${arctl.grid:${scale.budgets},32}"),
    "arctl.part": ("BUDGETS,FRACTION (a list of token budgets, a fraction or a list of fractions)",
                   "${arctl.part:${scale.budgets},0.5}"),
}


def _counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that takes exactly its arguments, else a SpecError naming the resolver and its arguments (from a
    review: ``${arctl.last:}`` printed Python's "missing 1 required positional argument")."""
    from arctl.compose.errors import SpecError

    count = len(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def call(*args):
        if len(args) != count:
            arguments, example = USAGE[name]
            raise SpecError(f"{name} takes {count} argument{'s' if count > 1 else ''}, {arguments}, "
                            f"not {len(args)}", hint=f"e.g. {example}")
        return fn(*args)

    return call


RESOLVERS: dict[str, Callable[..., Any]] = {
    name: _counted(name, fn) for name, fn in {"arctl.last": _last, "arctl.grid": _grid, "arctl.part": _part}.items()}
# what a value may call: arctl's resolvers, and OmegaConf's oc.select (another key's value, or a default:
# it reads the config only)
ALLOWED = (*RESOLVERS, "oc.select")


def register() -> None:
    from omegaconf import OmegaConf

    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


@functools.lru_cache(maxsize=4096)
def _resolver_names(text: str) -> tuple[str, ...]:
    """Every resolver called in ``text`` (nested calls too); ValueError if it is not OmegaConf text.
    Cached: OmegaConf's grammar parser takes ~1 ms a text, and every cell of a sweep holds the same
    interpolations of the shipped specs (480 parses for `arctl sweep paper`)."""
    from omegaconf import grammar_parser
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser as P

    try:
        tree = grammar_parser.parse(text, parser_rule="configValue")
    except (GrammarParseError, RecursionError) as err:
        raise ValueError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    names, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, P.InterpolationResolverContext):
            names.append(node.resolverName().getText())
        todo.extend(node.getChild(i) for i in range(node.getChildCount()) if hasattr(node, "getChildCount"))
    return tuple(names)


def interpolation_problem(text: str) -> str | None:
    """Why ``text`` may not be a config value (a resolver arctl does not allow), or None."""
    if "${" not in text:
        return None
    try:
        names = _resolver_names(text)
    except ValueError as err:
        return f"{text!r} is not a valid interpolation ({err})"
    bad = [n for n in names if n not in ALLOWED]
    if bad:
        return (f"{text!r} calls the resolver {bad[0]!r}: a value may only refer to other keys (${{key}}) and "
                f"call {', '.join(ALLOWED)} (others read the environment, the clock or build interpolations)")
    return None


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def value_problem(value: Any) -> str | None:
    """:func:`interpolation_problem` of every string inside a parsed override value."""
    for text in _strings(value):
        found = interpolation_problem(text)
        if found:
            return found
    return None


def composed_problem(cfg) -> tuple[str, str] | None:
    """(key, problem) of the first value of a composed, unresolved OmegaConf config that calls a
    resolver arctl does not allow, or None."""
    from omegaconf import DictConfig, ListConfig

    todo = [("", cfg)]
    while todo:
        prefix, node = todo.pop()
        keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
        for key in keys:
            child = node._get_node(key)
            path = f"{prefix}.{key}".lstrip(".") if isinstance(node, DictConfig) else f"{prefix}[{key}]"
            raw = child._value()
            if isinstance(raw, str) and (found := interpolation_problem(raw)):
                return path, found
            if isinstance(child, (DictConfig, ListConfig)) and not child._is_interpolation():
                todo.append((path, child))
    return None


def leftover_problem(data: Any, prefix: str = "") -> tuple[str, str] | None:
    """(key, problem) of the first string of a resolved config that still holds ``${``, or None."""
    if isinstance(data, dict):
        items = ((f"{prefix}{k}", v) for k, v in data.items())
    elif isinstance(data, list):
        items = ((f"{prefix[:-1]}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    for key, value in items:
        if isinstance(value, str) and "${" in value:
            return key, (f"{key} resolves to {value!r}, which still holds '${{': a run config is data and may "
                         "not carry interpolation text (write the value itself)")
        found = leftover_problem(value, f"{key}.")
        if found:
            return found
    return None

"""Figure, table and claims specs under ``reports/`` (one YAML per figure or table, ``kind:
figure|table|claims``): the one reader of them, over the spec search path (:mod:`arctl.compose.paths`:
a user's ``reports/<file>.yaml`` overlays the shipped file of the same name), and the schema of figure
and table specs (:data:`FIELDS`: every field, its type, the builders that read it). ``arctl ls``
lists them; the report layer renders them, each checked by :func:`check_report_spec` first: a
mistake is one :class:`SpecError` line naming the file and the field, never a traceback from the
builder that reads it.

The field checks (``*_problem``) are shared with the claims file (``arctl.report.claims``) and the
display names (``reports/labels.yaml``): each says what is wrong with a value, or None."""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.experiment import NAME_RE, read_yaml_mapping
from arctl.compose.paths import (
    ORIGIN_ENV,
    ORIGIN_PROJECT,
    ORIGIN_SHIPPED,
    find_spec,
    spec_files,
    spec_path_hint,
)
from arctl.track.metrics_schema import NAME_ACC, eval_key

NOT_SPECS = ("labels",)  # reports/labels.yaml: display names, not a report
SPEC_KINDS = ("figure", "table", "claims")
# the figure builders (arctl.report.render.BUILDERS, a test keeps the two equal) and the tables' one
FIGURE_BUILDERS = ("score_curve", "training_curves", "cov_variance", "tree_mask")
TABLE_BUILDER = "table"
DATASET, BUDGET = "{dataset}", "{budget}"  # a report spec's metric-key placeholders
SCORE_CURVE_KEY = eval_key(NAME_ACC, DATASET, BUDGET)  # what score_curve draws, whatever its spec says


def key_glob(template: str) -> str:
    """The glob of the logged keys a report spec's key ``template`` reads: each placeholder a ``*``
    (``eval/{dataset}/acc@{budget}`` -> ``eval/*/acc@*``)."""
    return template.replace(DATASET, "*").replace(BUDGET, "*")


# ---------------------------------------------------------------------------------------------
# field checks: what is wrong with a value, or None
def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def text_problem(v) -> str | None:
    """Free text (a description, a label): a string or a plain number."""
    return None if isinstance(v, str) or _number(v) else f"expected text, got {_shown(v)}"


def name_problem(v) -> str | None:
    """One name (an arm, a dataset, a statistic): a non-empty string."""
    if isinstance(v, str) and v.strip():
        return None
    return f"expected a name, got {_shown(v)}"


def names_problem(v) -> str | None:
    """A list of names. A single string is refused, not read letter by letter."""
    if isinstance(v, str):
        return f"expected a list of names, got the text {v!r}; write [{v}]"
    if not isinstance(v, list):
        return f"expected a list of names like [a, b], got {_shown(v)}"
    for i, item in enumerate(v):
        if problem := name_problem(item):
            return f"item {i}: {problem}"
    return None


def flag_problem(v) -> str | None:
    return None if isinstance(v, bool) else f"expected true or false, got {_shown(v)}"


def positive_problem(v) -> str | None:
    return None if _number(v) and v > 0 else f"expected a number > 0, got {_shown(v)}"


def fraction_problem(v) -> str | None:
    return None if _number(v) and 0 < v <= 1 else f"expected a fraction 0 < f <= 1, got {_shown(v)}"


def margin_problem(v) -> str | None:
    return None if _number(v) and 0 <= v < 1 else f"expected a margin 0 <= m < 1, got {_shown(v)}"


def count_problem(v, least: int = 1) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and least <= v <= 10_000
    return None if ok else f"expected a whole number {least}..10000, got {_shown(v)}"


def choice_problem(v, choices) -> str | None:
    return None if v in choices else f"{_shown(v)} is not one of {', '.join(choices)}"


def key_problem(v, allowed: tuple[str, ...], needed: tuple[str, ...] = ()) -> str | None:
    """A metric key template: a string whose ``{placeholders}`` are among ``allowed`` and include
    ``needed`` (e.g. ``eval/{dataset}/final_acc``)."""
    if not isinstance(v, str) or not v.strip():
        return f"expected a metric key like eval/{DATASET}/final_acc, got {_shown(v)}"
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(v) if f is not None]
    except ValueError as err:
        return f"{v!r} is not a key template ({err}); write a placeholder as {DATASET}"
    names = ", ".join(allowed) or "none"
    for f, spec, conv in fields:
        if "{" + f + "}" not in allowed or spec or conv:
            return f"{v!r}: unknown placeholder {{{f}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}; the placeholders here: {names}"
    for need in needed:
        if need not in v:
            return f"{v!r} has no {need}: the key of each {need[1:-1]} is needed"
    return None


def _shown(v) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ---------------------------------------------------------------------------------------------
# the schema of figure and table specs
def _sweep_problem(v) -> str | None:
    if problem := name_problem(v):
        return problem
    if find_spec("sweeps", str(v)) is None:
        return (f"unknown sweep {v!r}; {did_you_mean(str(v), spec_files('sweeps'))} (`arctl ls sweeps` lists them)"
                + spec_path_hint())
    return None


def _experiments_problem(v) -> str | None:
    if problem := names_problem(v):
        return problem
    for name in v:
        if find_spec("experiments", name) is None:
            return (f"unknown experiment {name!r}; {did_you_mean(name, spec_files('experiments'))} "
                    "(`arctl ls experiments` lists them)" + spec_path_hint())
    return None


def _spec_name_problem(v) -> str | None:
    if isinstance(v, str) and NAME_RE.match(v):
        return None
    return (f"{_shown(v)} is not a name (lowercase letters, digits, '.', '_' and '-': it names the "
            "report's output files)")


def _cuts_problem(v) -> str | None:
    if isinstance(v, list) and v and all(count_problem(c) is None for c in v):
        return None
    return f"expected a list of thinking lengths >= 1 like [6, 12], got {_shown(v)}"


PANEL_FIELDS: dict[str, Callable[[Any], str | None]] = {
    "key": lambda v: key_problem(v, (DATASET,)),
    "label": text_problem,
    "scale": positive_problem,
}


def _panels_problem(v) -> str | None:
    if not isinstance(v, list) or not v:
        return f"expected a list of panels like [{{key: eval/{DATASET}/final_acc, label: ...}}], got {_shown(v)}"
    for i, panel in enumerate(v):
        if not isinstance(panel, dict):
            return f"item {i}: expected a mapping {{key: ..., label: ..., scale: ...}}, got {_shown(panel)}"
        if "key" not in panel:
            return f"item {i}: a panel needs a key (the metric it draws, e.g. eval/{DATASET}/final_acc)"
        for name, value in panel.items():
            if name not in PANEL_FIELDS:
                return f"item {i}: unknown field {name!r}; {did_you_mean(str(name), PANEL_FIELDS)}"
            if problem := PANEL_FIELDS[name](value):
                return f"item {i}.{name}: {problem}"
    return None


@dataclass(frozen=True)
class Field:
    check: Callable[[Any], str | None]
    builders: tuple[str, ...] | None = None  # the builders that read it; None: every one
    required: bool = False


FIELDS: dict[str, Field] = {
    "kind": Field(lambda v: choice_problem(v, ("figure", "table")), required=True),
    "name": Field(_spec_name_problem),
    "description": Field(text_problem),
    "paper": Field(text_problem),
    "builder": Field(lambda v: choice_problem(v, (*FIGURE_BUILDERS, TABLE_BUILDER))),
    "sweep": Field(_sweep_problem),  # the sweep that produces its runs (the command a missing run names)
    "experiments": Field(_experiments_problem),  # [] or left out: every experiment
    "arms": Field(names_problem),  # shown first, in this order
    "only_listed_arms": Field(flag_problem),  # shown only
    "hint": Field(text_problem),  # the command that produces its runs, where no experiment names it
    "requires": Field(lambda v: key_problem(v, ())),  # a glob: only runs that logged a metric it matches
    "datasets": Field(names_problem, ("training_curves",)),
    "panels": Field(_panels_problem, ("training_curves",)),
    "per_seed": Field(flag_problem, ("score_curve",)),
    "key": Field(lambda v: key_problem(v, (DATASET,), (DATASET,)), (TABLE_BUILDER,), required=True),
    "scale": Field(positive_problem, (TABLE_BUILDER,)),
    "paper_table": Field(name_problem, (TABLE_BUILDER,)),  # its rows of reports/paper_tables.csv
    "prompt_len": Field(count_problem, ("tree_mask",)),
    "thinking_len": Field(count_problem, ("tree_mask",)),
    "inserted_len": Field(lambda v: count_problem(v, 0), ("tree_mask",)),
    "summary_len": Field(count_problem, ("tree_mask",)),
    "cuts": Field(_cuts_problem, ("tree_mask",)),
}
# score_curve always draws eval/{dataset}/acc@{budget}; a spec may say so, and nothing else
SCORE_CURVE_FIELDS = {"key": Field(lambda v: None if v == SCORE_CURVE_KEY else (
    f"score_curve draws {SCORE_CURVE_KEY}, not {v!r}; leave key out (or write that one)"), ("score_curve",))}


def spec_builder(data: dict) -> str:
    """The builder that renders a (checked) figure or table spec."""
    return TABLE_BUILDER if data.get("kind") == "table" else str(data.get("builder", data.get("name")))


def check_report_spec(data: dict, path: str) -> dict:
    """``data`` (a figure or table spec read from ``path``) if every field is known to its builder and
    of its type, else :class:`SpecError`: ``path: field: what is wrong — what to do``."""
    def bad(where: str, what: str, hint: str | None = None):
        return SpecError(what, f"{path}: {where}", hint or "fix the file (docs/reports.md lists the fields)")

    if isinstance(data.get("_problem"), SpecError):  # a file that could not be read as a spec (all_report_specs)
        raise data["_problem"]
    kind = data.get("kind")
    if problem := FIELDS["kind"].check(kind):
        raise bad("kind", problem)
    if kind == "table" and data.get("builder", TABLE_BUILDER) != TABLE_BUILDER:
        raise bad("builder", f"a table is built by builder {TABLE_BUILDER!r}, not {data.get('builder')!r}")
    if (problem := FIELDS["name"].check(data.get("name"))):
        raise bad("name", problem)
    builder = spec_builder(data)
    if kind == "figure" and builder not in FIGURE_BUILDERS:
        where = "builder" if "builder" in data else "name"
        raise bad(where, f"no figure builder {builder!r}",
                  f"set builder: to one of {', '.join(FIGURE_BUILDERS)}")
    what = kind if builder == TABLE_BUILDER else f"{builder} {kind}"  # "a table", "a score_curve figure"
    fields = {**FIELDS, **(SCORE_CURVE_FIELDS if builder == "score_curve" else {})}
    mine = {n: f for n, f in fields.items() if f.builders is None or builder in f.builders}
    for name, value in data.items():
        if str(name).startswith("_"):
            continue  # _path, _origin: where it was read
        if name not in mine:
            others = sorted(b for b in (f.builders or ()) if b != builder) if (f := fields.get(name)) else []
            hint = (f"{name!r} is read by {', '.join(others)}, not by {builder}" if others
                    else did_you_mean(str(name), mine))
            raise bad(str(name), f"unknown field for a {what}", hint)
        if value is None:
            continue  # `sweep:` left empty: not given (a required one is missing, below)
        if problem := mine[name].check(value):
            raise bad(str(name), problem)
    for name, f in mine.items():
        if f.required and data.get(name) is None:
            raise bad(name, "missing", f"a {what} needs {name}:")
    if builder == "tree_mask":
        t = data.get("thinking_len", 24)
        if (c := next((c for c in data.get("cuts") or () if c > t), None)) is not None:
            raise bad("cuts", f"cut {c} is beyond the thinking ({t} tokens)", "cut at 1..thinking_len")
    if data.get("sweep") and data.get("experiments") and data.get("_origin") != ORIGIN_SHIPPED:
        _check_sweep_runs(str(data["sweep"]), [str(e) for e in data["experiments"]], bad)
    if data.get("arms") and data.get("experiments") and data.get("_origin") != ORIGIN_SHIPPED:
        exps = [str(e) for e in data["experiments"]]
        defined = _arms_of(exps)
        if defined is not None and (arm := next((str(a) for a in data["arms"] if str(a) not in defined), None)):
            raise bad("arms", f"no experiment of {', '.join(exps)} defines arm {arm!r}",
                      f"{did_you_mean(arm, defined)} (`arctl show EXPERIMENT` lists its arms)")
    return data


def _check_sweep_runs(name: str, experiments: list[str], bad) -> None:
    """A spec's ``sweep`` must run each of its ``experiments``: it is the command a missing run names, and the runs a
    report prefers where a workspace holds several. From a hunt: ``sweep: priors`` beside ``experiments: [my-lam]``
    said "produce them with arctl sweep priors", twelve runs that never produce my-lam's. A sweep that cannot be
    read says so where it is launched. Shipped specs are not held to it (the caller), as for their arms: a user's
    copy of a shipped sweep may drop an experiment."""
    from arctl.compose.sweep import load_sweep

    try:
        sweep = load_sweep(name)
    except SpecError:
        return
    missing = [e for e in experiments if e not in sweep.experiments]
    if not missing:
        return
    others = []
    for other in spec_files("sweeps"):
        try:
            if other != name and all(e in load_sweep(other).experiments for e in experiments):
                others.append(other)
        except SpecError:
            continue
    instead = f"name a sweep that runs them all ({', '.join(others)}), " if others else ""
    shipped = (found := find_spec("sweeps", name)) is not None and found.origin == ORIGIN_SHIPPED
    add = f"{'copy it (arctl cp ' + name + ') and ' if shipped else ''}add {', '.join(missing)} to its experiments"
    raise bad("sweep", f"sweep {name!r} ({sweep.path}) does not run experiment{'s' if len(missing) > 1 else ''} "
              f"{', '.join(missing)}, which experiments: lists (it runs {', '.join(sweep.experiments)})",
              f"{instead}{add}, or leave sweep: out")


def _arms_of(experiments: list[str]) -> set[str] | None:
    """Every arm the experiments define, or None where one of them cannot be read (its own error says why, where
    its runs are asked for): the arms a spec that lists its ``experiments`` can show. A typo in the spec's ``arms``
    was a line or a row that vanished without a word (from a hunt: ``arms: [lin, unii]``, ``missing_arms: []``).
    Shipped specs are not held to it (the caller): a user's copy of a shipped experiment may drop an arm of its
    figure, which then shows the arms it has."""
    from arctl.compose.experiment import load_experiment

    arms: set[str] = set()
    for name in experiments:
        try:
            arms.update(load_experiment(name).arms)
        except SpecError:
            return None
    return arms


# ---------------------------------------------------------------------------------------------
# the reader
_PRECEDENCE = (ORIGIN_ENV, ORIGIN_PROJECT, ORIGIN_SHIPPED)  # the search path's order (arctl.compose.paths)


def all_report_specs(kind: str) -> dict[str, dict]:
    """name → spec (with ``_path`` and ``_origin``) of every ``reports/*.yaml`` of ``kind``, as read
    (:func:`check_report_spec` checks the one used). A YAML without ``kind`` is not a report spec (notes, a
    helper file) and is skipped. Two specs of one name: the one earlier on the search path wins (a user's copy,
    ``arctl cp score_curve reports/mine.yaml``, overlays the shipped spec it names).

    A file that is no report spec one can read (invalid YAML, a ``kind`` none of :data:`SPEC_KINDS`) and two
    specs of one name and origin do not stop the others (from a hunt: one draft with a YAML error stopped every
    ``arctl report``). Each is an entry of every kind under the name it would have (its ``name:``, else its
    file's name) that holds its :class:`SpecError` in ``_problem``: :func:`check_report_spec` raises it, so
    the report of that name, and ``arctl ls``, stop on it; each other spec names it in ``_skipped`` (a warning
    of the report, :func:`arctl.report.data.read_report_runs`)."""
    out: dict[str, dict] = {}
    for stem, found in spec_files("reports").items():
        if stem in NOT_SPECS:
            continue
        try:
            data = read_yaml_mapping(found.path, confined=True)
        except SpecError as err:
            _put(out, _broken(stem, found.path, found.origin, err), kind)
            continue
        if "kind" not in data:
            continue
        data.setdefault("name", stem)
        if (problem := choice_problem(data.get("kind"), SPEC_KINDS)):
            err = SpecError(problem, f"{found.path}: kind", "every report spec under reports/ says "
                            f"kind: {' | '.join(SPEC_KINDS)}")
            _put(out, _broken(str(data["name"]), found.path, found.origin, err), kind)
            continue
        if data["kind"] != kind:
            continue
        data["_path"], data["_origin"] = str(found.path), found.origin
        _put(out, data, kind)
    skipped = [f"{data['_path']}: {data['_problem'].what}; skipped it (fix it, or move it out of reports/)"
               for data in out.values() if "_problem" in data]
    for data in out.values():
        if skipped and "_problem" not in data:
            data["_skipped"] = skipped
    return dict(sorted(out.items()))


def _broken(name: str, path, origin: str, err: SpecError) -> dict:
    """The entry of a file :func:`all_report_specs` cannot read as a report spec: its error, where it was read."""
    return {"name": name, "_path": str(path), "_origin": origin, "_problem": err}


def _put(out: dict[str, dict], data: dict, kind: str) -> None:
    """Enter ``data`` in ``out`` under its name: over one of an origin later on the search path, not over one
    earlier; two of one origin are an entry whose ``_problem`` says so (a broken file keeps its own)."""
    name = str(data["name"])
    other = out.get(name)
    if other is not None:
        rank, theirs = _PRECEDENCE.index(data["_origin"]), _PRECEDENCE.index(other["_origin"])
        if rank > theirs:
            return  # the shipped spec a user's copy overlays
        if rank == theirs:
            if "_problem" in other:
                return
            if "_problem" not in data:
                data = _broken(name, data["_path"], data["_origin"], SpecError(
                    f"two {kind} specs are named {name!r}: this one and {other['_path']}",
                    f"{data['_path']}: name", "rename one of them (its name: field)"))
    out[name] = data


def list_report_specs(kind: str) -> list[dict]:
    """Rows {name, experiments, sweep, description, source, path} of every report spec of this kind
    (each checked: a mistake in one is its one error line)."""
    rows = []
    for name, data in all_report_specs(kind).items():
        if kind != "claims" or "_problem" in data:
            check_report_spec(data, data["_path"])
        rows.append({"name": name, "experiments": data.get("experiments") or [], "sweep": data.get("sweep"),
                     "description": data.get("description", ""), "source": data["_origin"], "path": data["_path"]})
    return rows

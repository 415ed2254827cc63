"""Figure and table specs: ``reports/<name>.yaml`` (``kind: figure|table``) and the display names
in ``reports/labels.yaml``."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path

from arctl.compose.errors import did_you_mean
from arctl.compose.paths import report_file, reports_dir, spec_path_hint
from arctl.compose.report_specs import (
    all_report_specs,
    check_report_spec,
    name_problem,
    names_problem,
    text_problem,
)
from arctl.config import safe_yaml
from arctl.report.errors import ReportError


def all_specs(kind: str) -> dict[str, dict]:
    """name → spec of every report spec of ``kind`` ("figure", "table", "claims") on the spec search
    path: :func:`arctl.compose.report_specs.all_report_specs`, the one reader of ``reports/*.yaml``
    (what ``arctl ls`` lists is what ``arctl report`` renders)."""
    return all_report_specs(kind)


def load_spec(kind: str, name: str) -> dict:
    """The spec of figure/table ``name``, checked (:func:`arctl.compose.report_specs.check_report_spec`);
    an unknown name suggests the closest ones."""
    specs = all_specs(kind)
    if name in specs:
        return check_report_spec(specs[name], specs[name]["_path"])
    where = reports_dir()
    if not specs:
        raise ReportError(f"no {kind} specs in {where}; set ARCTL_SPECS to a directory holding reports/")
    near = difflib.get_close_matches(name, list(specs), n=2, cutoff=0.5)
    hint = ("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else (
        "choose one of: " + ", ".join(sorted(specs)))
    broken = sorted(str(s["_path"]) for s in specs.values() if "_problem" in s)  # one may be the one meant
    unread = f"; {len(broken)} file(s) under reports/ could not be read: {', '.join(broken[:3])}" if broken else ""
    raise ReportError(f"unknown {kind} {name!r}; {hint} (`arctl ls {kind}s` lists them){unread}{spec_path_hint()}")


@lru_cache(maxsize=4)
def _labels(path: str) -> dict:
    if not path or not Path(path).is_file():
        return {}
    try:
        data = safe_yaml.load(Path(path).read_text(encoding="utf-8"))
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError) as err:
        raise ReportError(f"{path}: not a readable YAML file ({err})") from None
    return _checked_labels(data, path)


# field -> (what its keys are, what its values are, an example); None: a list of dataset ids
LABEL_FIELDS = {
    "arms": ("arm id", "display name", "{grpo: GRPO}"),
    "datasets": ("dataset id", "display name", "{aime24: AIME24}"),
    "colors": ("arm id", "colour", "{grpo: '#0072B2'}"),
    "dataset_order": None,
}
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")


def color_problem(v) -> str | None:
    """An arm's colour in ``labels.yaml``: ``'#rrggbb'``, quoted (unquoted, YAML reads ``#`` as a comment)."""
    if isinstance(v, str) and _HEX_COLOR.fullmatch(v):
        return None
    got = "nothing (quote it: an unquoted # starts a YAML comment)" if v is None else repr(v)
    return f"expected a colour '#rrggbb' like '#0072B2', got {got}"


def _checked_labels(data, path: str) -> dict:
    """``reports/labels.yaml``'s mapping, each mistake one :class:`ReportError` line naming the file and the
    field (not a traceback from the first figure that reads it)."""
    example = "arms: {grpo: GRPO}, datasets: {aime24: AIME24}, dataset_order: [aime24]"
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a mapping like {{{example}}}, got {type(data).__name__}")
    for name, value in data.items():
        if name not in LABEL_FIELDS:
            raise ReportError(f"{path}: {name}: unknown field; {did_you_mean(str(name), LABEL_FIELDS)}")
        if value is None:
            continue
        if LABEL_FIELDS[name] is None:
            if problem := names_problem(value):
                raise ReportError(f"{path}: {name}: {problem}")
            continue
        keys, values, like = LABEL_FIELDS[name]
        if not isinstance(value, dict):
            raise ReportError(f"{path}: {name}: expected a mapping {keys} -> {values}, "
                              f"like {like}, got {type(value).__name__}")
        check_value = color_problem if name == "colors" else text_problem
        for key, label in value.items():
            if problem := name_problem(key) or check_value(label):
                raise ReportError(f"{path}: {name}.{key}: {problem}")
    return data


def labels() -> dict:
    """The display names and arm colours (``reports/labels.yaml`` on the search path)."""
    return _labels(str(report_file("labels.yaml") or ""))


def arm_label(arm: str) -> str:
    """Display name of an arm id (``ar-uniform`` → ``AR-uniform``); the id itself if unknown."""
    return str((labels().get("arms") or {}).get(arm, arm))


def fixed_arm_colors() -> dict[str, str]:
    """arm id -> colour, from ``labels.yaml``'s ``colors`` (:func:`arctl.report.style.arm_color` reads it)."""
    return {str(a): str(c) for a, c in (labels().get("colors") or {}).items()}


def dataset_label(dataset: str) -> str:
    return str((labels().get("datasets") or {}).get(dataset, dataset))


def order(items, preferred) -> list:
    """``items`` sorted with the ``preferred`` ones first, in that order, the others after (sorted)."""
    items = list(dict.fromkeys(items))
    pref = [p for p in (preferred or []) if p in items]
    return pref + sorted(i for i in items if i not in pref)


def dataset_order(datasets) -> list[str]:
    return order(datasets, labels().get("dataset_order"))


def paper_tables_path() -> Path:
    return report_file("paper_tables.csv") or reports_dir() / "paper_tables.csv"

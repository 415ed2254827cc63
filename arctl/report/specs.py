"""Figure and table specs: ``reports/<name>.yaml`` (``kind: figure|table``) and the display names
in ``reports/labels.yaml``."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

import yaml

from arctl.report.errors import ReportError
from arctl.spec.paths import reports_dir


def _read(path: Path) -> dict:
    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise ReportError(f"{path}: a report spec must be a YAML mapping")
    return data


def all_specs(kind: str, root: Path | None = None) -> dict[str, dict]:
    """name → spec of every ``reports/*.yaml`` of ``kind`` ("figure" or "table")."""
    root = root or reports_dir()
    out = {}
    for path in sorted(root.glob("*.yaml")):
        data = _read(path)
        if data.get("kind") == kind:
            data.setdefault("name", path.stem)
            data["_path"] = str(path)
            out[data["name"]] = data
    return out


def load_spec(kind: str, name: str, root: Path | None = None) -> dict:
    """The spec of figure/table ``name``; an unknown name suggests the closest ones."""
    specs = all_specs(kind, root)
    if name in specs:
        return specs[name]
    root = root or reports_dir()
    if not specs:
        raise ReportError(f"no {kind} specs in {root}; set ARCTL_SPECS to the directory holding reports/")
    near = difflib.get_close_matches(name, list(specs), n=2, cutoff=0.5)
    hint = ("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else (
        "choose one of: " + ", ".join(sorted(specs)))
    raise ReportError(f"unknown {kind} {name!r} (specs in {root}); {hint}")


@lru_cache(maxsize=4)
def _labels(root: str) -> dict:
    path = Path(root) / "labels.yaml"
    return _read(path) if path.is_file() else {}


def labels(root: Path | None = None) -> dict:
    return _labels(str(root or reports_dir()))


def arm_label(arm: str, root: Path | None = None) -> str:
    """Display name of an arm id (``ar-uniform`` → ``AR-uniform``); the id itself if unknown."""
    return str((labels(root).get("arms") or {}).get(arm, arm))


def dataset_label(dataset: str, root: Path | None = None) -> str:
    return str((labels(root).get("datasets") or {}).get(dataset, dataset))


def order(items, preferred) -> list:
    """``items`` sorted with the ``preferred`` ones first, in that order, the others after (sorted)."""
    items = list(dict.fromkeys(items))
    pref = [p for p in (preferred or []) if p in items]
    return pref + sorted(i for i in items if i not in pref)


def dataset_order(datasets, root: Path | None = None) -> list[str]:
    return order(datasets, labels(root).get("dataset_order"))


def paper_tables_path(root: Path | None = None) -> Path:
    return (root or reports_dir()) / "paper_tables.csv"

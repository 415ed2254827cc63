"""Figure and table specs under ``reports/`` (one YAML per figure or table): listing only.

Each spec names its ``kind`` (figure|table), a ``description`` and the experiments or sweep whose
runs it needs; the report layer renders them.
"""

from __future__ import annotations

from arctl.spec.experiment import read_yaml_mapping
from arctl.spec.paths import reports_dir


def list_report_specs(kind: str) -> list[dict]:
    """Rows {name, description, experiments, sweep} of every ``reports/**/*.yaml`` of this kind."""
    rows = []
    root = reports_dir()
    if not root.is_dir():
        return rows
    for path in sorted(root.rglob("*.yaml")):
        data = read_yaml_mapping(path)
        if data.get("kind") != kind:
            continue
        rows.append(
            {
                "name": data.get("name", path.stem),
                "experiments": data.get("experiments", []),
                "sweep": data.get("sweep"),
                "description": data.get("description", ""),
            }
        )
    return rows

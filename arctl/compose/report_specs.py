"""Figure, table and claims specs under ``reports/`` (one YAML per figure or table, ``kind:
figure|table|claims``): the one reader of them, over the spec search path (:mod:`arctl.compose.paths`:
a user's ``reports/<file>.yaml`` overlays the shipped file of the same name). ``arctl ls`` lists
them; the report layer renders them."""

from __future__ import annotations

from arctl.compose.experiment import read_yaml_mapping
from arctl.compose.paths import spec_files

NOT_SPECS = ("labels",)  # reports/labels.yaml: display names, not a report


def all_report_specs(kind: str) -> dict[str, dict]:
    """name → spec (with ``_path`` and ``_origin``) of every ``reports/*.yaml`` of ``kind``."""
    out = {}
    for stem, found in spec_files("reports").items():
        if stem in NOT_SPECS:
            continue
        data = read_yaml_mapping(found.path, confined=True)
        if data.get("kind") != kind:
            continue
        data.setdefault("name", stem)
        data["_path"], data["_origin"] = str(found.path), found.origin
        out[str(data["name"])] = data
    return dict(sorted(out.items()))


def list_report_specs(kind: str) -> list[dict]:
    """Rows {name, experiments, sweep, description, source, path} of every report spec of this kind."""
    return [
        {"name": name, "experiments": data.get("experiments", []), "sweep": data.get("sweep"),
         "description": data.get("description", ""), "source": data["_origin"], "path": data["_path"]}
        for name, data in all_report_specs(kind).items()
    ]

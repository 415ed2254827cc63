"""A test's own spec folder: ``experiments/``, ``sweeps/`` and ``reports/`` written from text.

    root = write_specs(tmp_path / "specs", experiments={"evx": "description: ..."}, sweeps={"evs": "..."})
    monkeypatch.setenv("ARCTL_SPECS", str(root))   # or pass monkeypatch= to have it set
"""

from __future__ import annotations

from pathlib import Path

KINDS = ("experiments", "sweeps", "reports")


def write_specs(root: Path, experiments: dict[str, str] | None = None, sweeps: dict[str, str] | None = None,
                reports: dict[str, str] | None = None, monkeypatch=None) -> Path:
    """The three spec folders under ``root`` (made where missing), each ``NAME: text`` written as ``NAME.yaml``;
    ``ARCTL_SPECS`` set to ``root`` where ``monkeypatch`` is given. Returns ``root``."""
    for kind, files in zip(KINDS, (experiments, sweeps, reports)):
        (root / kind).mkdir(parents=True, exist_ok=True)
        for name, text in (files or {}).items():
            (root / kind / f"{name}.yaml").write_text(text)
    if monkeypatch is not None:
        monkeypatch.setenv("ARCTL_SPECS", str(root))
    return root

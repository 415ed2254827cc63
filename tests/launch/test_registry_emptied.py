"""A registry cut to zero bytes (or replaced by an empty one) beside run folders: the commands that look a run, sweep
or experiment up name `arctl repair`, not "no run" or "launch them" (from a hunt of the registry: after
``: > registry.sqlite``, `arctl status SWEEP` pointed at retraining what was there)."""

from __future__ import annotations

import pytest

from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.workspace import Workspace


@pytest.fixture
def emptied(specs, tmp_path):
    from arctl.compose import resolve_experiment

    ws = Workspace(tmp_path / "ws")
    launch(items_from_resolved(resolve_experiment("lt", [], None, None, None)), ws, executor="debug")
    runs = sorted(p.name for p in (ws.root / "runs").iterdir())
    (ws.root / "registry.sqlite").write_bytes(b"")
    return ws, runs


@pytest.mark.parametrize("command", ["logs", "cancel", "resume"])
def test_a_run_the_registry_lost_names_repair(emptied, cli, command):
    ws, runs = emptied
    out = cli(command, runs[0], "--workdir", str(ws.root))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.stdout, out.stderr)
    assert f"no row for {runs[0]!r} in the registry, but {ws.root / 'runs'} holds {runs[0]}" in lines[0]
    assert f"`arctl repair --workdir {ws.root}` rebuilds it" in lines[0]


def test_an_experiment_whose_runs_the_registry_lost_names_repair_not_a_launch(emptied, cli):
    ws, runs = emptied
    out = cli("status", "lt", "--workdir", str(ws.root))
    assert out.returncode == 2 and "arctl repair" in out.stderr and "launch them" not in out.stderr, out.stderr
    assert cli("repair", "--workdir", str(ws.root)).returncode == 0
    assert cli("status", "lt", "--workdir", str(ws.root)).returncode == 0

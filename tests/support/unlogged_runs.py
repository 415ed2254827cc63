"""Runs of a workspace that have logged nothing yet, made for the tests of reports that must name them: a registry row
in a state, and a run folder with config.yaml (and status.json) but no W&B file."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace


def add_unlogged(ws: Path, cell, state: str, *, status: str | None = None, generation: int = 0, scale: str = "tiny",
                 folder: bool = True) -> str:
    """A run of ``cell`` (experiment, arm, seed) without W&B files: its registry row in ``state`` (of ``generation``),
    its folder with config.yaml (and status.json ``status``) unless ``folder`` is False. Returns its run id."""
    rid = run_id(*cell)
    if folder:
        run_dir = ws / "runs" / rid
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump({"experiment": cell[0], "arm": cell[1], "seed": cell[2],
                                                              "scale": scale, "backend": "tiny", "run_id": rid}))
        if status:
            (run_dir / "status.json").write_text(json.dumps({"state": status}))
    with Registry(Workspace(ws).registry_path) as reg:
        reg.claim([RunRecord(run_id=rid, experiment=cell[0], arm=cell[1], seed=cell[2], scale=scale)],
                  new_claim_token())
        reg.update(rid, state=state, claim=None, before_claim=None, generation=generation)
    return rid


def waiting_text(*cells_states) -> str:
    """"RUN (state), RUN (state)" as a report's "not read" line lists them."""
    return ", ".join(f"{run_id(*cell)} ({state})" for cell, state in cells_states)


def add_mid_sweep(ws: Path, *, running, pending, rerun, ended, elsewhere, other_scale) -> None:
    """The runs of a sweep peeked at midway, each a cell: one ``running`` (its job started, nothing logged), one
    ``pending`` (the registry's row alone, no folder yet), a ``--force`` ``rerun`` queued (generation 1), one that
    ``ended`` (failed before it logged anything: not waited for), one of an experiment the report does not read
    (``elsewhere``, pending) and one of another scale (``other_scale``, pending, at paper)."""
    from arctl.launch import states

    add_unlogged(ws, running, states.RUNNING, status="running")
    add_unlogged(ws, pending, states.PENDING, folder=False)
    add_unlogged(ws, rerun, states.PENDING, generation=1)
    add_unlogged(ws, ended, states.FAILED, status="failed")
    add_unlogged(ws, elsewhere, states.PENDING)
    add_unlogged(ws, other_scale, states.PENDING, scale="paper")

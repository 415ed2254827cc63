"""The bad-input harness's run folders (tests/support/bad_input.py, ``Sandbox.add_run_dirs``): a process launches
experiment ``lt`` once and copies that workspace into later sandboxes. A copy must read as a launch into that
sandbox would: the same files, the same registry rows, the same answers from arctl, its paths the sandbox's own."""

from __future__ import annotations

import json
import os

import bad_input
import pytest
from bad_input import Sandbox

FIELDS = ("run_id", "experiment", "arm", "seed", "state", "executor", "attempts", "wandb_id", "error", "scale",
          "backend")


def _box(root, monkeypatch) -> Sandbox:
    box = Sandbox(root)
    monkeypatch.setenv("ARCTL_SPECS", str(box.specs))
    return box


def _read(box: Sandbox) -> dict:
    status = box.run("status", "--workdir", str(box.ws), "--json")
    assert status.code == 0, status.err + (status.crash or "")
    files = {}
    for path in sorted(box.ws.rglob("*")):
        if path.is_file() and path.suffix in (".yaml", ".json", ".log"):
            text = path.read_text().replace(str(box.root), "<root>")
            files[str(path.relative_to(box.ws))] = json.loads(text) if path.suffix == ".json" else text
    return {"rows": sorted(tuple(r[f] for f in FIELDS) for r in json.loads(status.out)), "files": files,
            "layout": sorted(str(p.relative_to(box.ws)) for p in box.ws.rglob("*") if "job" not in p.parts)}


def _without_times(doc):
    """A JSON document without what differs between two launches: times, process ids, submitit's job ids."""
    if isinstance(doc, dict):
        return {k: _without_times(v) for k, v in doc.items()
                if not (k.endswith(("_at", "time", "pid", "job_id", "started", "ended", "host_start")) or k in ("at", "t"))}
    if isinstance(doc, list):
        return [_without_times(v) for v in doc]
    return doc


def test_a_copied_workspace_reads_as_a_launch_into_that_sandbox(tmp_path, monkeypatch):
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    monkeypatch.setattr(bad_input, "_RUN_DIRS", {})
    launched_first = _box(tmp_path / "first", monkeypatch)
    ids = launched_first.add_run_dirs()
    assert len(bad_input._RUN_DIRS) == 1  # kept for the next sandbox
    copied = _box(tmp_path / "second", monkeypatch)
    assert copied.add_run_dirs() == ids
    monkeypatch.setattr(bad_input, "_RUN_DIRS", {})
    launched = _box(tmp_path / "third", monkeypatch)
    assert launched.add_run_dirs() == ids
    a, b = _read(copied), _read(launched)
    assert a["rows"] == b["rows"] and {r[4] for r in a["rows"]} == {"COMPLETED"}
    assert a["layout"] == b["layout"]
    assert a["files"].keys() == b["files"].keys()
    for name in a["files"]:
        assert _without_times(a["files"][name]) == _without_times(b["files"][name]), name
    assert str(tmp_path / "first") not in json.dumps(a["files"])  # every path is the copy's own
    logs = [box.run("logs", ids[0], "--workdir", str(box.ws)) for box in (copied, launched)]
    assert logs[0].code == logs[1].code == 0, logs
    assert logs[0].out.replace(str(copied.root), "<root>").count("<root>") > 0


def test_a_sandbox_whose_workspace_changed_gets_a_launch_of_its_own(tmp_path, monkeypatch):
    """A workspace that holds more than its fresh registry is not replaced by a copy (what the test put there stays)."""
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    _box(tmp_path / "first", monkeypatch).add_run_dirs()
    box = _box(tmp_path / "second", monkeypatch)
    (box.ws / "note.txt").write_text("mine")
    made = dict(bad_input._RUN_DIRS)
    box.add_run_dirs()
    assert (box.ws / "note.txt").read_text() == "mine" and bad_input._RUN_DIRS == made
    assert len(os.listdir(box.ws / "runs")) == 3


@pytest.mark.parametrize("change", ["spec", "env"])
def test_other_inputs_get_a_launch_of_their_own(tmp_path, monkeypatch, change):
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    monkeypatch.setattr(bad_input, "_RUN_DIRS", {})
    _box(tmp_path / "first", monkeypatch).add_run_dirs()
    box = _box(tmp_path / "second", monkeypatch)
    if change == "spec":
        (box.specs / "experiments" / "other.yaml").write_text("description: x\narms: {a: [algo=grpo]}\n")
    else:
        monkeypatch.setenv("ARCTL_TEST_ANYTHING", "1")
    box.add_run_dirs()
    assert len(bad_input._RUN_DIRS) == 2

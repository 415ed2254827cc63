"""`arctl export`: what a user finds in an export, its export.json and its --json summary, from a mutation hunt of
arctl/report/export.py (changes of the code that the other export tests let pass): the registry is read during an
`arctl repair` without waiting for it; an export writes nothing in the workspace, its cache included; a skipped run
is named by a report of the export under every cell it serves; each run's experiment, arm, seed and state as they
are; a run without status.json one step short is not completed; an index that does not contradict itself; the same
command brings back a file missing from the export and leaves no unfinished export; --out naming the workspace by
another path is refused."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

from interrupts import interrupt_placing  # tests/support/interrupts.py
from typer.testing import CliRunner
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.launch import registry as registry_module
from arctl.launch.registry import Registry, RunRecord, new_claim_token
from arctl.launch.workspace import Workspace
from arctl.report.export import INDEX_FILE, SKIPPED, interrupted_export

runner = CliRunner()

RUNNING = ("main-grpo", "grpo", 1)
EVIDENCE_RUNS = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "baselines" / "data" / "runs"


def _export(ws: Path, out: Path, *args: str) -> dict:
    res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(out), "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_export_during_an_arctl_repair_reads_the_registry_without_waiting(completed_ws, tmp_path, monkeypatch):
    """The registry is only read, opened read-only: an `arctl repair` holding the workspace's folder lock (as it
    does while it rebuilds the registry) neither holds the export up nor hides the registry's word. A killed run
    whose status.json still says running is skipped as failed, as `arctl status` says it."""
    killed = run_id(*RUNNING)
    (completed_ws / "runs" / killed / "status.json").write_text(json.dumps({"state": "running"}))
    path = Workspace(completed_ws).registry_path
    with Registry(path) as reg:
        reg.claim([RunRecord(run_id=killed, experiment=RUNNING[0], arm=RUNNING[1], seed=RUNNING[2])],
                  new_claim_token())
        reg.update(killed, state="FAILED", claim=None, before_claim=None, error="killed")
    monkeypatch.setattr(registry_module, "LOCK_WAIT_S", 0.0)  # a writer's open gives up at once (not after 60 s)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what `arctl repair` holds while it rebuilds the registry
        done = _export(completed_ws, tmp_path / "out", "--experiment", "main-grpo")
    finally:
        os.close(fd)
    assert {s["run_id"]: s["why"] for s in done["skipped"]} == {
        killed: "not completed (state failed); --unfinished exports it as it is"}


def test_an_export_writes_nothing_in_the_workspace_not_even_its_cache(completed_ws, tmp_path):
    """A workspace a report has read holds its cache of parsed runs (.arctl-cache); an export reads it and writes
    nothing in the workspace (a colleague's workspace, an archive): every file is as it was, and no file is added,
    though a run's config.yaml was written again since the report cached it."""
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir",
                              str(completed_ws), "--out", str(tmp_path / "table")])
    assert res.exit_code == 0, res.output
    assert (completed_ws / ".arctl-cache").is_dir()
    config = completed_ws / "runs" / run_id("main-grpo", "grpo", 0) / "config.yaml"
    config.write_text(config.read_text() + "# written again\n")
    before = _tree(completed_ws)
    _export(completed_ws, tmp_path / "out")
    assert _tree(completed_ws) == before


def test_a_report_of_an_export_names_a_skipped_run_under_the_other_cell_it_serves(completed_ws, tmp_path):
    """A running run that also serves a cell of another experiment (shared.json) is skipped by an export of that
    experiment and kept in the index with the cell it serves: a table of the export for that experiment names it
    as not in the export (not read as if that cell had no other run)."""
    rid = run_id(*RUNNING)
    run_dir = completed_ws / "runs" / rid
    (run_dir / "status.json").write_text(json.dumps({"state": "running"}))
    (run_dir / "shared.json").write_text(json.dumps({"cells": [["ablation-vr", "grpo"]]}))
    out = tmp_path / "exp"
    done = _export(completed_ws, out, "--experiment", "ablation-vr")
    assert rid in {s["run_id"] for s in done["skipped"]}
    assert json.loads((out / INDEX_FILE).read_text())[SKIPPED][rid]["serves"] == [["ablation-vr", "grpo"]]
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "ablation-vr", "--workdir", str(out),
                              "--out", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    said = " ".join(json.loads(res.stdout)["warnings"])
    assert f"not read: 1 run(s) of this table's cells are not in this export: {rid} (running, not exported)" in said, said


def test_the_json_summary_and_the_index_say_each_runs_experiment_arm_seed_and_state(completed_ws, tmp_path):
    """`arctl export --json` and export.json say of each run the cell it is (experiment, arm, seed: seed 0 as 0, not
    null) and its state, as the workspace's run folders are named; what a user reads to know which seeds an export
    holds."""
    out = tmp_path / "exp"
    cells = [("main-grpo", "grpo", 0), ("main-grpo", "grpo", 1), ("main-ar-uniform", "ar-uniform", 0),
             ("main-ar-uniform", "ar-uniform", 1)]
    done = _export(completed_ws, out, "--experiment", "main-grpo", "--experiment", "main-ar-uniform")
    want = {run_id(*c): {"experiment": c[0], "arm": c[1], "seed": c[2], "state": "completed"} for c in cells}
    assert {r["run_id"]: {k: r[k] for k in ("experiment", "arm", "seed", "state")} for r in done["runs"]} == want
    index = json.loads((out / INDEX_FILE).read_text())["runs"]
    assert {rid: {k: e[k] for k in ("experiment", "arm", "seed", "state")} for rid, e in index.items()} == want


def test_a_run_without_status_json_one_step_short_of_its_total_steps_is_not_completed(tmp_path):
    """A run without status.json (from before the file, or the file lost) counts completed only where its W&B
    history reaches trainer.total_steps: one whose history ends at step 100 of 101 (an attempt preempted at its last
    step finishes its W&B run cleanly too) is skipped with why, not exported as completed."""
    name = sorted(p.name for p in EVIDENCE_RUNS.iterdir())[0]
    ws = tmp_path / "ws"
    shutil.copytree(EVIDENCE_RUNS / name, ws / "runs" / name)
    cfg = ws / "runs" / name / "config.yaml"
    assert "total_steps: 100," in cfg.read_text()
    cfg.write_text(cfg.read_text().replace("total_steps: 100,", "total_steps: 101,"))
    res = runner.invoke(app, ["export", "--workdir", str(ws), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 2 and "its W&B history ends at step 100 of 101" in res.output, res.output
    assert not (tmp_path / "out").exists()


def test_a_run_exported_unfinished_and_still_running_is_held_not_listed_as_skipped(completed_ws, tmp_path):
    """A run exported with --unfinished while it ran, and still running at the next export (without --unfinished):
    that export says it skipped it, and export.json keeps it among the runs it holds (as it was exported), not
    also among the runs it skipped (the index would contradict itself)."""
    rid = run_id(*RUNNING)
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    out = tmp_path / "exp"
    _export(completed_ws, out, "--experiment", "main-grpo", "--unfinished")
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert [s["run_id"] for s in done["skipped"]] == [rid]
    index = json.loads((out / INDEX_FILE).read_text())
    assert index["runs"][rid]["state"] == "running" and (out / "runs" / rid).is_dir()
    assert rid not in (index.get(SKIPPED) or {})


def test_the_same_export_again_brings_back_a_run_file_missing_from_the_export(completed_ws, tmp_path):
    """A file of an exported run that is gone from the export (deleted by hand, lost with a disk) is copied again by
    the same command: the export holds every file its index lists, and the run is not "unchanged"."""
    rid = run_id("main-grpo", "grpo", 0)
    out = tmp_path / "exp"
    _export(completed_ws, out, "--experiment", "main-grpo")
    files = json.loads((out / INDEX_FILE).read_text())["runs"][rid]["files"]
    wandb = next(p for p in files if p.endswith(".wandb"))
    (out / "runs" / rid / wandb).unlink()
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert {r["run_id"]: r["action"] for r in done["runs"]}[rid] != "unchanged"
    assert (out / "runs" / rid / wandb).read_bytes() == (completed_ws / "runs" / rid / wandb).read_bytes()


def test_a_run_exported_running_and_completed_since_leaves_no_unfinished_export(completed_ws, tmp_path):
    """A run exported with --unfinished while it ran, completed since with the same W&B files: the next export
    records it completed and leaves an export that is finished: a report of it gives no "export interrupted"
    warning."""
    rid = run_id(*RUNNING)
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    out = tmp_path / "exp"
    _export(completed_ws, out, "--experiment", "main-grpo", "--unfinished")
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "completed"}))
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert {r["run_id"]: r["action"] for r in done["runs"]}[rid] == "updated"
    assert json.loads((out / INDEX_FILE).read_text())["runs"][rid]["state"] == "completed"
    res = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(out),
                              "--out", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    assert not [w for w in json.loads(res.stdout)["warnings"] if "export interrupted" in w]


def test_an_export_into_its_own_workspace_spelled_another_way_is_refused(completed_ws, tmp_path):
    """`--out` naming the folder of --workdir by another path (`..` in it) is the workspace itself: refused in one
    line, exit 2, for a workspace and for an export exported into itself alike."""
    exp = tmp_path / "exp"
    _export(completed_ws, exp, "--experiment", "main-grpo")
    for workdir in (completed_ws, exp):
        res = runner.invoke(app, ["export", "--workdir", str(workdir), "--out",
                                  str(workdir.parent / ".." / workdir.parent.name / workdir.name)])
        assert res.exit_code == 2 and "is the workspace itself" in res.output, res.output


def _pending_grpo_folder(ws, rid: str, seed: int, extra: str = "") -> None:
    """A main-grpo run folder of ``seed`` that has logged nothing yet (submitted), its config.yaml plus ``extra``."""
    (ws / "runs" / rid).mkdir()
    (ws / "runs" / rid / "config.yaml").write_text(f"experiment: main-grpo\narm: grpo\nseed: {seed}\n{extra}")
    (ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "submitted"}))


def test_a_pending_run_whose_config_names_no_scale_is_kept_with_its_registry_rows_scale(completed_ws, tmp_path):
    """A run that has logged nothing yet, whose config.yaml names no scale: the export's index keeps it as skipped
    with the scale its registry row says (a report of the export matches it to the scale of the runs it reads), and
    a folder such as that one with no registry row is kept with none (not a crash)."""
    with_row, without_row = run_id("main-grpo", "grpo", 4), run_id("main-grpo", "grpo", 5)
    for rid, seed in ((with_row, 4), (without_row, 5)):
        _pending_grpo_folder(completed_ws, rid, seed)
    with Registry(Workspace(completed_ws).registry_path) as reg:
        reg.claim([RunRecord(run_id=with_row, experiment="main-grpo", arm="grpo", seed=4, scale="paper")],
                  new_claim_token())
        reg.update(with_row, state="PENDING", claim=None, before_claim=None)
    out = tmp_path / "exp"
    _export(completed_ws, out, "--experiment", "main-grpo")
    skipped = json.loads((out / INDEX_FILE).read_text())[SKIPPED]
    assert skipped[with_row]["scale"] == "paper" and skipped[without_row]["scale"] is None


def test_an_export_interrupted_stays_unfinished_after_an_export_of_other_runs_into_it(completed_ws, tmp_path,
                                                                                     monkeypatch):
    """An export of main-grpo stopped after its first run (Ctrl-C), then an export of another experiment into the same
    folder that completes: the export still lacks main-grpo's second run, and a report of it still warns, naming how
    many runs are not there, until the interrupted command is run again."""
    out = tmp_path / "exp"
    interrupt_placing(monkeypatch, after=1)
    res = runner.invoke(app, ["export", "--workdir", str(completed_ws), "--out", str(out), "--experiment",
                              "main-grpo"])
    assert res.exit_code == 130, res.output
    monkeypatch.undo()
    _export(completed_ws, out, "--experiment", "main-ar-base")
    warning = interrupted_export(out)
    assert warning is not None and "(1 run(s) it was to copy are not there)" in warning, warning
    _export(completed_ws, out, "--experiment", "main-grpo")
    assert interrupted_export(out) is None


def test_an_export_that_updates_two_runs_at_once_updates_both(completed_ws, tmp_path):
    """Two exported runs a later sweep shares with another cell (their shared.json alone changed): one export
    updates both (each placed in turn where the one before it was), exit 0, the new shared.json of each in the
    export."""
    out = tmp_path / "exp"
    _export(completed_ws, out, "--experiment", "main-grpo")
    rids = [run_id("main-grpo", "grpo", 0), run_id("main-grpo", "grpo", 1)]
    for rid in rids:
        (completed_ws / "runs" / rid / "shared.json").write_text(json.dumps({"cells": [["ablation-vr", "grpo"]]}))
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert {r["run_id"]: r["action"] for r in done["runs"]} == {rid: "updated" for rid in rids}
    for rid in rids:
        assert json.loads((out / "runs" / rid / "shared.json").read_text()) == {"cells": [["ablation-vr", "grpo"]]}
    assert interrupted_export(out) is None


def test_an_export_of_a_workspace_whose_registry_cannot_be_read_goes_by_the_runs_own_words(completed_ws, tmp_path):
    """A registry that is not an SQLite file (damaged; `arctl status` and `arctl repair` say so): an export reads
    the runs' status.json instead, exit 0, completed runs exported and a running one skipped."""
    Workspace(completed_ws).registry_path.write_bytes(b"not a database\n" * 64)
    rid = run_id(*RUNNING)
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    done = _export(completed_ws, tmp_path / "exp", "--experiment", "main-grpo")
    assert [r["run_id"] for r in done["runs"]] == [run_id("main-grpo", "grpo", 0)]
    assert [s["run_id"] for s in done["skipped"]] == [rid]


def test_an_export_of_chosen_runs_names_and_keeps_only_their_pending_ones(completed_ws, tmp_path):
    """An export of chosen run ids (what `--sweep S --seeds N` passes: the runs of its cells) with one of them pending
    (nothing logged yet) and another run of the workspace pending that it did not ask for: it names the one asked for
    as skipped and keeps it in its index, so that a report of the export names it; the other is not its business."""
    from arctl.report.export import export_runs

    asked, other = run_id("main-grpo", "grpo", 4), run_id("main-grpo", "grpo", 5)
    for rid, seed in ((asked, 4), (other, 5)):
        _pending_grpo_folder(completed_ws, rid, seed, "scale: tiny\n")
    out = tmp_path / "exp"
    result = export_runs(completed_ws, out, run_ids=[run_id("main-grpo", "grpo", 0), asked])
    assert [rid for rid, _ in result.skipped] == [asked]
    assert list(json.loads((out / INDEX_FILE).read_text())[SKIPPED]) == [asked]


def test_a_run_an_interrupted_export_left_to_copy_and_the_next_one_skips_leaves_no_unfinished_export(
        completed_ws, tmp_path, monkeypatch):
    """An export with --unfinished stopped before it copied the running seed (Ctrl-C), then the same selection
    without --unfinished: that one skips the running seed, so nothing is left for an export to complete; the export
    is finished (no "export interrupted" warning for a run no command of the user's would copy)."""
    rid = run_id(*RUNNING)
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    out = tmp_path / "exp"
    placed = interrupt_placing(monkeypatch, after=1)
    res = runner.invoke(app, ["export", "--workdir", str(completed_ws), "--out", str(out), "--experiment",
                              "main-grpo", "--unfinished"])
    assert res.exit_code == 130 and [p.name for p in placed] == [run_id("main-grpo", "grpo", 0)], res.output
    monkeypatch.undo()
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert [s["run_id"] for s in done["skipped"]] == [rid]
    assert interrupted_export(out) is None


def test_a_running_run_that_has_logged_nothing_is_said_running(completed_ws, tmp_path):
    """A run whose job runs (status.json) and that has logged nothing yet is skipped by an export as "running,
    nothing logged yet" and kept so in the index (a report of the export names it as such), not as a folder whose
    state is unknown."""
    rid = run_id("main-grpo", "grpo", 4)
    (completed_ws / "runs" / rid).mkdir()
    (completed_ws / "runs" / rid / "config.yaml").write_text("experiment: main-grpo\narm: grpo\nseed: 4\nscale: tiny\n")
    (completed_ws / "runs" / rid / "status.json").write_text(json.dumps({"state": "running"}))
    out = tmp_path / "exp"
    done = _export(completed_ws, out, "--experiment", "main-grpo")
    assert {s["run_id"]: s["why"] for s in done["skipped"]} == {rid: "running, nothing logged yet"}
    assert json.loads((out / INDEX_FILE).read_text())[SKIPPED][rid]["state"] == "running, nothing logged yet"

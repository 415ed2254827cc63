"""`arctl export`: the runs' report files, nothing else; a report rebuilt from the export equals the
workspace's; adding to an export; one-line refusals that write nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from interrupts import interrupt_placing  # tests/support/interrupts.py
from typer.testing import CliRunner
from wandb_workspace import RESUMED, run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app

runner = CliRunner()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def ws(workspace, tmp_path) -> Path:
    """A copy of the shared workspace of real W&B runs, each run completed (status.json) with a
    checkpoint, a job log and a provenance record beside what reports read, except main-grpo seed 1,
    still running; main-ar-base seed 0 also serves ablation-decouple (shared.json)."""
    root = tmp_path / "ws"
    shutil.copytree(workspace, root, ignore=shutil.ignore_patterns(".arctl-cache", "report"))
    for run in (root / "runs").iterdir():
        state = "running" if run.name == run_id("main-grpo", "grpo", 1) else "completed"
        (run / "status.json").write_text(json.dumps({"state": state}))
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "step_20.pt").write_bytes(b"\0" * 4096)
        (run / "job").mkdir()
        (run / "job" / "log.out").write_text("training...\n")
        (run / "provenance.json").write_text(json.dumps({"arctl": {"commit": "abc"}, "run": run.name}))
    (root / "runs" / run_id("main-ar-base", "ar-base", 0) / "shared.json").write_text(
        json.dumps({"experiments": ["ablation-decouple"]}))
    return root


def _export(*args: str):
    return runner.invoke(app, ["export", *args])


def test_the_export_holds_exactly_what_reports_read_and_rebuilds_the_same_table(ws, tmp_path):
    out = tmp_path / "evidence"
    res = _export("--workdir", str(ws), "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    running = run_id("main-grpo", "grpo", 1)
    exported = {r["run_id"] for r in done["runs"]}
    assert running not in exported and [s["run_id"] for s in done["skipped"]] == [running]
    assert exported == {p.name for p in (ws / "runs").iterdir() if any((p / "wandb").rglob("run-*.wandb"))} - {running}
    for rid in exported:
        src, dst = ws / "runs" / rid, out / "runs" / rid
        want = {str(p.relative_to(src)) for p in src.rglob("*") if p.is_file() and (
            p.name in ("config.yaml", "provenance.json", "shared.json") or (p.suffix == ".wandb" and not p.is_symlink()))}
        got = {str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()}
        assert got == want, rid  # no checkpoint, no job log, no status
        assert all((dst / f).read_bytes() == (src / f).read_bytes() for f in got)
    resumed = out / "runs" / run_id(*RESUMED)
    fragments = [p for p in (ws / "runs" / resumed.name).rglob("*.wandb") if not p.is_symlink()]
    assert len(fragments) >= 2 and len(list(resumed.rglob("*.wandb"))) == len(fragments)  # every fragment
    index = json.loads((out / "export.json").read_text())
    assert sorted(index["runs"]) == sorted(exported) and index["runs"][run_id(*RESUMED)]["state"] == "completed"

    tables = []
    for workdir in (ws, out):
        res = runner.invoke(app, ["report", "--table", "final", "--workdir", str(workdir),
                                  "--out", str(tmp_path / f"table-{workdir.name}"), "--experiment", "main-ar-uniform",
                                  "--experiment", "main-ar-base"])
        assert res.exit_code == 0, res.output
        tables.append((tmp_path / f"table-{workdir.name}" / "final.csv").read_text())
    assert tables[0] == tables[1] and "AR-uniform" in tables[0]


def test_selected_experiments_include_the_runs_that_serve_them(ws, tmp_path):
    out = tmp_path / "evidence"
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "ablation-decouple", "--json")
    assert res.exit_code == 0, res.output
    got = {r["run_id"] for r in json.loads(res.output)["runs"]}
    assert got == {run_id("ablation-decouple", "grpo", 0), run_id("ablation-decouple", "grpo-decouple", 0),
                   run_id("main-ar-base", "ar-base", 0)}
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "sweep"), "--sweep", "priors", "--unfinished", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["runs"]
    assert {r["experiment"] for r in rows} == {"main-grpo", "main-ar-base", "main-ar-linear", "main-ar-uniform"}
    assert any(r["state"] == "running" for r in rows)  # --unfinished: exported as it is


def test_a_sweep_s_cells_at_given_seeds_are_the_runs_the_sweep_launches_there(ws, tmp_path):
    """`--sweep S --scale X --seeds N`: exactly the run ids `arctl sweep S --scale X --seeds N` launches
    (not the workspace's other runs of those experiments: other seeds, other configs); a cell without
    a history to read is named in `skipped` with why."""
    res = runner.invoke(app, ["sweep", "priors", "--scale", "tiny", "--seeds", "0", "--dry-run", "--json",
                              "--workdir", str(ws)])
    assert res.exit_code == 0, res.output
    cells = {(r["experiment"], r["seed"]): r["run_id"] for r in json.loads(res.output)["runs"]}
    assert set(cells) == {(e, 0) for e in ("main-grpo", "main-ar-base", "main-ar-linear", "main-ar-uniform")}
    for exp, arm in (("main-grpo", "grpo"), ("main-ar-uniform", "ar-uniform")):  # this sweep's runs, done
        shutil.copytree(ws / "runs" / run_id(exp, arm, 0), ws / "runs" / cells[(exp, 0)])
    (ws / "runs" / cells[("main-ar-linear", 0)]).mkdir()  # launched, nothing logged yet
    (ws / "runs" / cells[("main-ar-linear", 0)] / "status.json").write_text(json.dumps({"state": "running"}))
    out = tmp_path / "evidence"
    res = _export("--workdir", str(ws), "--out", str(out), "--sweep", "priors", "--scale", "tiny", "--seeds", "0", "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    assert {r["run_id"] for r in done["runs"]} == {cells[("main-grpo", 0)], cells[("main-ar-uniform", 0)]}
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted([cells[("main-grpo", 0)], cells[("main-ar-uniform", 0)]])
    why = {s["run_id"]: s["why"] for s in done["skipped"]}
    assert set(why) == {cells[("main-ar-linear", 0)], cells[("main-ar-base", 0)]}
    assert "nothing logged yet (state running)" in why[cells[("main-ar-linear", 0)]]
    assert "not in the workspace" in why[cells[("main-ar-base", 0)]]
    # another seed: none of its runs is there, one line, nothing written
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "other"), "--sweep", "priors", "--scale", "tiny",
                  "--seeds", "5")
    assert res.exit_code == 2 and "none of the 4 runs asked for" in res.output and not (tmp_path / "other").exists()


def test_a_later_export_adds_runs_keeps_equal_ones_and_replaces_others_only_when_forced(ws, tmp_path):
    out = tmp_path / "evidence"
    assert _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo").exit_code == 0
    first = _tree(out)
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--experiment",
                  "main-ar-uniform", "--json")
    assert res.exit_code == 0, res.output
    actions = {r["run_id"]: r["action"] for r in json.loads(res.output)["runs"]}
    assert actions[run_id("main-grpo", "grpo", 0)] == "unchanged"
    assert actions[run_id("main-ar-uniform", "ar-uniform", 0)] == "added"
    assert all(_tree(out)[k] == v for k, v in first.items() if k != "export.json")

    # a later sweep shares a finished run with another cell: its shared.json alone changes, updated unforced
    (ws / "runs" / run_id("main-grpo", "grpo", 0) / "shared.json").write_text(
        json.dumps({"cells": [["ablation-vr", "grpo"]]}))
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--json")
    assert res.exit_code == 0, res.output
    assert {r["run_id"]: r["action"] for r in json.loads(res.output)["runs"]}[run_id("main-grpo", "grpo", 0)] == "updated"
    exported = out / "runs" / run_id("main-grpo", "grpo", 0) / "shared.json"
    assert json.loads(exported.read_text()) == {"cells": [["ablation-vr", "grpo"]]}
    (ws / "runs" / run_id("main-grpo", "grpo", 0) / "shared.json").write_text(
        json.dumps({"cells": [["ablation-dense", "grpo"], ["ablation-vr", "grpo"]]}))
    assert "1 updated" in _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo").output

    config = ws / "runs" / run_id("main-grpo", "grpo", 0) / "config.yaml"
    config.write_text(config.read_text() + "# another attempt\n")
    before = _tree(out)
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo")
    assert res.exit_code == 2 and "--force" in res.output and _tree(out) == before
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--force", "--json")
    assert res.exit_code == 0, res.output
    assert {r["run_id"]: r["action"] for r in json.loads(res.output)["runs"]}[run_id("main-grpo", "grpo", 0)] == "replaced"
    assert (out / "runs" / run_id("main-grpo", "grpo", 0) / "config.yaml").read_text().endswith("# another attempt\n")


@pytest.mark.parametrize("case", ["not-an-export", "inside-workspace", "unknown-experiment", "no-workspace", "both",
                                  "no-out", "bad-index", "nothing-completed", "seeds-without-sweep",
                                  "scale-without-seeds", "bad-seeds", "unknown-sweep", "bad-index-entry"])
def test_refusals_are_one_line_and_write_nothing(ws, tmp_path, case):
    out = tmp_path / "out"
    args = ["--workdir", str(ws), "--out", str(out)]
    if case == "not-an-export":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif case == "inside-workspace":
        out = ws / "runs" / "x"
        args = ["--workdir", str(ws), "--out", str(out)]
    elif case == "unknown-experiment":
        args += ["--experiment", "main-nothing"]
    elif case == "no-workspace":
        args = ["--workdir", str(tmp_path / "nope"), "--out", str(out)]
    elif case == "both":
        args += ["--experiment", "main-grpo", "--sweep", "priors"]
    elif case == "no-out":
        args = ["--workdir", str(ws)]
    elif case == "bad-index":
        out.mkdir()
        (out / "export.json").write_text("[1, 2")
    elif case == "bad-index-entry":  # was an AttributeError traceback (an adversarial pass)
        out.mkdir()
        (out / "export.json").write_text(json.dumps({"runs": {run_id("main-grpo", "grpo", 0): {"files": [1, 2]}}}))
    elif case == "seeds-without-sweep":
        args += ["--seeds", "0"]
    elif case == "scale-without-seeds":
        args += ["--sweep", "priors", "--scale", "tiny"]
    elif case == "bad-seeds":
        args += ["--sweep", "priors", "--seeds", "zero"]
    elif case == "unknown-sweep":
        args += ["--sweep", "priorz", "--seeds", "0"]
    elif case == "nothing-completed":
        for status in (ws / "runs").glob("*/status.json"):
            status.write_text(json.dumps({"state": "failed"}))
    before_ws, before_out = _tree(ws), _tree(out) if out.exists() else None
    res = _export(*args)
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert _tree(ws) == before_ws
    assert (_tree(out) if out.exists() else None) == before_out


def test_an_interrupted_export_is_completed_by_the_same_command(ws, tmp_path, monkeypatch):
    """Found by an adversarial pass: Ctrl-C during a first export left runs/ and .staging/ without
    export.json, and the same command then refused the folder ("neither empty nor an arctl export");
    an interrupted --force left an index that named files no longer there. The index is now written
    first and after every run: it always lists exactly the runs in place."""
    from arctl.report import export

    clean, out = tmp_path / "clean", tmp_path / "evidence"
    assert _export("--workdir", str(ws), "--out", str(clean)).exit_code == 0
    real = export._place
    moved = interrupt_placing(monkeypatch, after=2)
    with pytest.raises(KeyboardInterrupt):
        export.export_runs(ws, out)
    listed = set(json.loads((out / "export.json").read_text())["runs"])
    assert listed == {Path(p).name for p in moved} == {p.name for p in (out / "runs").iterdir()}
    monkeypatch.setattr(export, "_place", real)
    res = _export("--workdir", str(ws), "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert {k: v for k, v in _tree(out).items() if k != "export.json"} == {
        k: v for k, v in _tree(clean).items() if k != "export.json"}
    assert set(json.loads((out / "export.json").read_text())["runs"]) == set(
        json.loads((clean / "export.json").read_text())["runs"])


def test_two_exports_into_one_folder_at_once_keep_both_indexes(ws, tmp_path):
    """Found by an adversarial pass: two exports of different experiments into one new folder both
    succeeded and the index listed only one's runs. They now take turns (a user-level lock)."""
    import threading

    from arctl.report.export import export_runs

    out = tmp_path / "evidence"
    errors = []

    def one(name):
        try:
            export_runs(ws, out, experiments=[name])
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=one, args=(name,)) for name in ("main-grpo", "main-ar-uniform")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    listed = set(json.loads((out / "export.json").read_text())["runs"])
    assert listed == {p.name for p in (out / "runs").iterdir()}
    assert {"main-grpo", "main-ar-uniform"} <= {n.split("--")[0] for n in listed}


def test_an_export_works_where_the_user_cache_cannot_be_written(ws, tmp_path, monkeypatch):
    """From the review of the lock above: a read-only home (containers on HPC) made every export fail
    on making the lock's folder. It now runs unlocked there."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x")
    monkeypatch.setenv("ARCTL_CACHE", str(blocked / "cache"))
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "evidence"), "--experiment", "main-grpo")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("case", ["no-workspace", "inside-workspace", "out-not-writable"])
def test_an_export_refused_for_its_folders_takes_no_lock(ws, tmp_path, monkeypatch, case):
    """Found by a black-box pass: every refused export left `$ARCTL_CACHE/locks/<hash>.lock` behind; the
    folders are checked before the lock is taken now (and again under it)."""
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    workdir, out = {"no-workspace": (tmp_path / "nope", tmp_path / "out"),
                    "inside-workspace": (ws, ws / "runs" / "x"),
                    "out-not-writable": (ws, Path("/proc/arctl-export"))}[case]
    res = _export("--workdir", str(workdir), "--out", str(out))
    assert res.exit_code == 2 and res.output.startswith("error: "), res.output
    assert not (tmp_path / "cache").exists()


def test_a_concurrent_exports_probe_file_is_not_content_of_the_folder(ws, tmp_path):
    """From a review: the folder checks made before the lock create and remove a probe file in --out; an
    export holding the lock that saw one took the folder for "neither empty nor an arctl export"."""
    from arctl.config.files import PROBE_PREFIX

    out = tmp_path / "out"
    out.mkdir()
    (out / f"{PROBE_PREFIX}abc123").write_text("")
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo")
    assert res.exit_code == 0, res.output


def test_run_folders_without_wandb_files_are_named_as_such(tmp_path):
    """Found by a black-box pass: run folders whose runs logged nothing to W&B (wandb.mode=disabled) gave
    "no runs to export from WS: none found" while `arctl status` listed them."""
    ws = tmp_path / "ws"
    for name in ("lt_a_s0_0123456789", "lt_b_s0_0123456789"):
        (ws / "runs" / name).mkdir(parents=True)
        (ws / "runs" / name / "config.yaml").write_text("experiment: lt\narm: a\nseed: 0\n")
        (ws / "runs" / name / "status.json").write_text('{"state": "completed"}')
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2 and "none of its 2 run folders has W&B files" in res.output, res.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["garbled", "no-experiment", "not-a-mapping"])
def test_a_run_whose_config_cannot_be_read_is_exported_with_a_warning(ws, tmp_path, damage):
    """Found by a black-box pass: a run with a damaged config.yaml was exported (with --unfinished, or
    completed) without a word, indexed with no experiment, arm or seed. (A run without config.yaml, logged
    outside arctl, is known by its W&B files: no warning, as for r1-7b's here.)"""
    running = ws / "runs" / run_id("main-grpo", "grpo", 1)
    config = running / "config.yaml"
    if damage == "garbled":
        config.write_text("experiment: [unclosed\n")
    elif damage == "no-experiment":
        config.write_text("arm: grpo\nseed: 1\n")
    else:
        config.write_text("- a list\n")
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "out"), "--unfinished", "--json")
    assert res.exit_code == 0, res.output
    done = json.loads(res.output)
    assert [w["run_id"] for w in done["warnings"]] == [running.name], done["warnings"]
    assert "config.yaml" in done["warnings"][0]["what"] and "exported as it is" in done["warnings"][0]["what"]
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "out2"), "--unfinished")
    assert res.exit_code == 0 and f"warning {running.name}: its config.yaml" in " ".join(res.output.split()), res.output
    res = _export("--workdir", str(ws), "--out", str(tmp_path / "out3"), "--unfinished", "--experiment", "main-grpo",
                  "--json")
    done = json.loads(res.output)
    assert [w["run_id"] for w in done["warnings"]] == [running.name]
    if damage == "no-experiment":  # a filter drops it (no experiment to match), as reports do: said, not silent (a review)
        assert running.name not in {r["run_id"] for r in done["runs"]}
        assert "not exported" in done["warnings"][0]["what"]
    else:  # a config.yaml reports cannot read: they know the run by its W&B config, of main-grpo, and so does the export
        assert running.name in {r["run_id"] for r in done["runs"]}
        assert "exported as it is" in done["warnings"][0]["what"]


def test_an_export_exported_again_keeps_its_runs_states(ws, tmp_path):
    """From a review: an export has no status.json (its states are in export.json), so exporting it again read
    every run as 'not completed (state unknown)' and exported nothing without --unfinished. The command without
    --json draws its progress bars on stderr (the data on stdout stays the summary)."""
    first, second = tmp_path / "first", tmp_path / "second"
    assert _export("--workdir", str(ws), "--out", str(first), "--json").exit_code == 0
    res = _export("--workdir", str(first), "--out", str(second))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("exported ")
    a, b = (json.loads((p / "export.json").read_text())["runs"] for p in (first, second))
    assert sorted(a) == sorted(b) and {r["state"] for r in b.values()} == {"completed"}
    assert all(a[rid]["files"] == b[rid]["files"] for rid in a)


def test_a_report_of_an_export_with_unfinished_runs_says_how_to_finish_them_there(ws, tmp_path):
    """From a hunt: a table from an export holding unfinished runs (exported with --unfinished) said "wait for them
    (`arctl status --workdir EXPORT`)", which an export refuses (it has no registry), and the export command it named
    refused too (the export has those runs: --force replaces them). It names what works."""
    out = tmp_path / "exp"
    res = _export("--workdir", str(ws), "--out", str(out), "--experiment", "main-grpo", "--unfinished", "--json")
    assert res.exit_code == 0, res.output
    rep = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(out),
                              "--out", str(tmp_path / "rep")])
    said = rep.output
    assert "left out 1 run(s) that have not finished" in " ".join(said.split()), said
    assert "arctl status" not in said and "--force` replaces them" in " ".join(said.split()), said
    # in the workspace itself, `arctl status` is what shows them
    rep = runner.invoke(app, ["report", "--table", "final", "--experiment", "main-grpo", "--workdir", str(ws),
                              "--out", str(tmp_path / "rep2")])
    assert "arctl status" in rep.output, rep.output

"""A Ctrl-C while `arctl run/sweep/resume --json` waits for its runs: the runs go on ("detached"), and stdout is still
the one JSON document, with what was submitted as the wait last saw it and ``"detached": true``; exit 130. From a
hunt: stdout was empty, and a script lost the run ids, job ids and run folders of runs that went on."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from interrupts import group_killed_at_exit  # tests/support/interrupts.py

from arctl.launch import states
from arctl.launch.status_file import read_status


def _items():
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import items_from_resolved

    items = items_from_resolved(resolve_experiment("ablation-vr", [], "tiny", None, None))
    for i in items:
        i.action = "new"
    return items


def _interrupted_launch(tmp_path, monkeypatch, seen_states: list[str], as_json: bool, wrap=None):
    """launch_and_report of ablation-vr's runs, launched locally; the wait sees the first runs in ``seen_states``
    (the others not polled yet), then Ctrl-C. Returns (the exit code, the items)."""
    import contextlib

    import typer

    from arctl.cli.launching import launch_and_report
    from arctl.launch import launcher

    items = _items()
    result = SimpleNamespace(executor="local", executor_note="executor: local", submitted=items, skipped=[],
                             job_ids={i.run_id: "queue:4242" for i in items}, parallelism=2, failed=[], in_flight=[])
    seen = [dataclasses.replace(i.record(), state=s, job_id=f"777_{n}", executor="local")
            for n, (i, s) in enumerate(zip(items, seen_states))]

    def wait_for(workspace, run_ids, on_update=None, on_problem=None):
        on_update(seen)
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "launch", lambda *a, **k: result)
    monkeypatch.setattr(launcher, "wait_for", wait_for)
    try:
        with (wrap(items) if wrap else contextlib.nullcontext()):
            launch_and_report(items, workdir=tmp_path / "ws", executor="local", force=False, wait=True,
                              array_parallelism=None, as_json=as_json, members=["ablation-vr"], dry_run=False)
    except typer.Exit as exit_:
        return exit_.exit_code, items
    return 0, items


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_ctrl_c_during_the_wait_still_prints_the_json_document(shipped_specs, tmp_path, monkeypatch, capsys,
                                                                 command):
    wrap = None
    if command == "sweep":  # `arctl sweep` adds its shared cells to the document its launch prints
        from arctl.cli.cmd_sweep import json_with_shared

        wrap = lambda items: json_with_shared(items, True)  # noqa: E731
    code, items = _interrupted_launch(tmp_path, monkeypatch, [states.RUNNING, states.COMPLETED], True, wrap)
    captured = capsys.readouterr()
    assert code == 130
    doc = json.loads(captured.out)  # one document, nothing else on stdout
    assert doc["detached"] is True and doc["executor"] == "local"
    got = [(r["run_id"], r["job_id"], r["state"], r["run_dir"]) for r in doc["submitted"]]
    ws = tmp_path / "ws"
    assert got == [(items[0].run_id, "777_0", states.RUNNING, str(ws / "runs" / items[0].run_id)),
                   (items[1].run_id, "777_1", states.COMPLETED, str(ws / "runs" / items[1].run_id)),
                   # not polled before the Ctrl-C: as submitted
                   (items[2].run_id, "queue:4242", states.PENDING, str(ws / "runs" / items[2].run_id))]
    # the runs go on: their figure is still the one to draw once they are done
    assert doc["figures"] == [f"arctl report --figure ablation_vr --workdir {ws}"]
    assert "detached: the runs go on" in captured.err


def test_a_run_seen_failed_before_the_ctrl_c_leaves_no_figure_to_draw(shipped_specs, tmp_path, monkeypatch, capsys):
    code, _ = _interrupted_launch(tmp_path, monkeypatch, [states.RUNNING, states.FAILED], True)
    doc = json.loads(capsys.readouterr().out)
    assert code == 130 and doc["detached"] is True and doc["figures"] == []


def test_the_text_output_is_unchanged_by_a_ctrl_c(shipped_specs, tmp_path, monkeypatch, capsys):
    code, items = _interrupted_launch(tmp_path, monkeypatch, [states.RUNNING], False)
    captured = capsys.readouterr()
    assert code == 130 and "detached: the runs go on" in captured.err
    assert "{" not in captured.out and f"new     {items[0].run_id}" in captured.out  # the launch lines, no document


EXPERIMENT = ("description: two quick runs\nfigure: ablation_vr\nseeds: [0]\n"
              "overrides: [trainer.total_steps=3, wandb.mode=disabled, cluster.cpus_per_task=1, cluster.mem_gb=1]\n"
              "arms:\n  a: [algo=grpo, prior=base]\n  b: [algo=grpo-vr, prior=base]\n")


@pytest.mark.slow
def test_a_real_ctrl_c_of_a_waiting_sweep_json_prints_its_document_and_the_runs_go_on(tmp_path):
    """`arctl sweep S --executor local --json` in a session of its own (as a terminal starts it), SIGINT to its
    process group once its runs are running (the count backend holds each before its first step)."""
    specs = tmp_path / "specs"
    (specs / "experiments").mkdir(parents=True)
    (specs / "sweeps").mkdir()
    (specs / "experiments" / "jx.yaml").write_text(EXPERIMENT)
    (specs / "sweeps" / "jx2.yaml").write_text("description: two cells\nexperiments: [jx]\nseeds: [0]\n")
    ws, gate = tmp_path / "ws", tmp_path / "gate"
    env = {**os.environ, "ARCTL_SPECS": str(specs), "ARCTL_TEST_BACKEND": "count", "ARCTL_TEST_STEP_S": "0.05",
           "ARCTL_TEST_GATE": str(gate)}
    env.pop("ARCTL_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "arctl.cli.main", "sweep", "jx2", "--executor", "local",
                             "--workdir", str(ws), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        with group_killed_at_exit(proc):
            end = time.monotonic() + 120
            while not any(read_status(d).get("state") == "running"
                          for d in ws.glob("runs/*/")):
                assert time.monotonic() < end and proc.poll() is None, "no run started"
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
            out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        doc = json.loads(out)
        assert doc["detached"] is True, doc
        assert len(doc["submitted"]) == 2 and all(r["run_dir"] and r["job_id"] for r in doc["submitted"]), doc
        assert "detached: the runs go on" in err and "Traceback" not in err, err
    finally:
        gate.touch()  # the runs went on: let them end, as the document's run folders say
    end = time.monotonic() + 120
    while not all(read_status(d).get("state") == "completed" for d in ws.glob("runs/*/")):
        assert time.monotonic() < end, "the detached runs did not go on to complete"
        time.sleep(0.2)

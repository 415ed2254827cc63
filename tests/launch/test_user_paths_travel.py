"""How a workspace path and typed text travel (from the "quote" hunt): a path SLURM reads as a log-file pattern is
refused before anything is written (the launch, its dry run, a resume), every copyable command a message prints
names its path quoted for a shell (pasted, it acts on that very folder), and a launch that runs jobs on this machine
says which SLURM-only ``cluster.*`` keys it does not use."""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import executors
from arctl.launch.executors import LaunchError
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def counting_sbatch(tmp_path, monkeypatch):
    """An sbatch that records each call and accepts it; MaxArraySize 1001; a controller that answers (``auto``
    picks SLURM). Returns the file of calls."""
    calls = tmp_path / "sbatch-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch=f'echo "$1" >> {calls}\necho "Submitted batch job 101"\n',
                    srun="exit 0\n", scontrol="echo 'MaxArraySize            = 1001'\n")
    monkeypatch.setattr(executors, "slurm_controller_answers", lambda *a, **k: True)
    return calls


def _one_line_error(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


@pytest.mark.parametrize("name", ["my%20runs", "p%x_%u", "back\\slash"])
def test_a_workspace_path_slurm_reads_as_a_pattern_is_refused_before_anything_is_written(
        specs, tmp_path, counting_sbatch, name):
    """From the hunt: `--workdir 'my%20runs'` under SLURM wrote its logs to my0runs/ (``%2`` a pattern), a
    ``\\`` was dropped by sbatch's ``#SBATCH`` parser: every job failed at launch with no log, while the local
    executor ran the same path and the dry run said nothing."""
    from arctl.compose import resolve_sweep

    root = tmp_path / name
    items = items_from_resolved(resolve_sweep("lt3", []))
    for executor in ("slurm", None):  # None: the profile's auto, which picks SLURM here (a controller answers)
        with pytest.raises(LaunchError) as info:
            launch(items, Workspace(root, "--workdir"), executor=executor, members=["lt3"])
        message = str(info.value)
        assert "\n" not in message and f"--workdir {root} contains" in message and "--executor local" in message
        res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(root), "--dry-run",
                                       *(["--executor", executor] if executor else [])])
        assert _one_line_error(res) == f"error: a launch would be refused: {message}"
    assert not root.exists() and not counting_sbatch.exists()  # nothing written, nothing submitted
    # the local executor reads no SLURM pattern: the same path is fine there
    res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(root), "--dry-run", "--executor", "local"])
    assert res.exit_code == 0, res.output


def test_a_resume_in_such_a_workspace_under_slurm_is_refused_too(specs, tmp_path, counting_sbatch):
    from arctl.compose import resolve_sweep

    ws = Workspace(tmp_path / "top10%")
    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    assert not launch(items, ws, executor="debug", members=["lt3"]).failed  # made by a local run: fine there
    run_id = items[0].run_id
    for dry in ([], ["--dry-run"]):
        res = CliRunner().invoke(app, ["resume", run_id, "--force", "--executor", "slurm", "--workdir", str(ws.root),
                                       *dry])
        assert "contains '%', which SLURM reads" in _one_line_error(res)
    assert not counting_sbatch.exists()


def test_a_control_character_in_the_workspace_path_refuses_the_dry_run_as_the_launch(specs, tmp_path):
    root = tmp_path / "a\tb"
    res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(root), "--dry-run", "--executor", "local"])
    assert "contains a control character" in _one_line_error(res)
    assert not root.exists()


# --- printed commands: each path quoted for a shell

ODD = "my runs $x"  # a space splits a pasted path; `$x` expands to nothing (`/data/run$1` became `/data/run`)


def _commands(text: str) -> list[list[str]]:
    """The backticked `arctl ...` commands of ``text``, each as a shell would split it."""
    return [shlex.split(c) for c in re.findall(r"`(arctl [^`]*)`", text)]


def _option(text: str, option: str) -> list[str]:
    """The values ``option`` has in the commands of ``text`` (a shell's reading)."""
    found = [cmd[cmd.index(option) + 1] for cmd in _commands(text) if option in cmd]
    assert found, text
    return found


def _completed(root: Path) -> tuple[Workspace, str]:
    from arctl.compose import resolve_sweep

    ws = Workspace(root)
    items = items_from_resolved(resolve_sweep("lt3", []))[:1]
    assert not launch(items, ws, executor="debug", members=["lt3"]).failed
    return ws, items[0].run_id


def test_a_registry_less_copy_names_its_repair_command_quoted(specs, tmp_path):
    """From the hunt: `arctl repair --workdir /tmp/my runs` was printed; pasted, it was refused (extra argument)."""
    ws, _ = _completed(tmp_path / ODD)
    ws.registry_path.unlink()  # a copy whose registry was left behind
    res = CliRunner().invoke(app, ["sweep", "lt3", "--workdir", str(ws.root), "--executor", "debug"])
    assert _option(_one_line_error(res), "--workdir") == [str(ws.root)]  # launcher.workspace_problem
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    assert _option(_one_line_error(res), "--workdir") == [str(ws.root)]  # control.open_existing


def test_a_damaged_registry_and_a_registry_folder_name_the_repair_quoted(specs, tmp_path):
    ws, _ = _completed(tmp_path / ODD)
    with sqlite3.connect(ws.registry_path) as db:  # a table that is not the registry's
        db.execute("DROP TABLE runs")
        db.execute("CREATE TABLE runs (x)")
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    assert _option(_one_line_error(res), "--workdir") == [str(ws.root)]  # registry.repair_hint
    ws.registry_path.unlink()
    ws.registry_path.mkdir()
    res = CliRunner().invoke(app, ["status", "--workdir", str(ws.root)])
    assert _option(_one_line_error(res), "--workdir") == [str(ws.root)]  # Workspace.layout_problem


def test_an_export_names_the_report_command_quoted(specs, tmp_path):
    root = tmp_path / ODD
    (root / "runs").mkdir(parents=True)  # an export's run folders
    (root / "export.json").write_text('{"version": 1, "runs": {}}')
    for args in (["sweep", "lt3", "--executor", "debug"], ["repair"], ["status"]):
        res = CliRunner().invoke(app, [*args, "--workdir", str(root)])
        assert _option(_one_line_error(res), "--workdir") == [str(root)], args


def test_resume_given_an_override_names_the_run_command_as_typed(specs):
    typed = "wandb.notes=\"it's (v2)\""
    res = CliRunner().invoke(app, ["resume", typed])
    line = _one_line_error(res)
    assert _commands(line) == [["arctl", "run", "EXPERIMENT", typed]], line


def test_no_message_puts_a_raw_path_into_a_copyable_command():
    """A backticked `arctl ...` command in arctl's source names a --workdir/--out/--source value through
    shlex.quote or workdir_arg, or a name the same file assigns from shlex.quote."""
    bad = []
    for path in sorted((ROOT / "arctl").rglob("*.py")):
        text = path.read_text()
        joined = re.sub(r"[\"']\s*\n\s*(?:rf|fr|f|r)?[\"']", "", text)  # adjacent literals over lines, as one
        quoted = set(re.findall(r"(\w+) = shlex\.quote\(", text))
        for command in re.findall(r"`arctl [^`\n]*`", joined):
            for value in re.findall(r"--(?:workdir|out|source) ([^ `]*)", command):
                if "{" not in value or value.startswith(("{shlex.quote(", "{workdir_arg(")):
                    continue
                if (m := re.fullmatch(r"\{(\w+)\}", value)) and m.group(1) in quoted:
                    continue
                bad.append(f"{path.relative_to(ROOT)}: {command}")
    assert bad == [], "\n".join(bad)


# --- SLURM-only keys where the jobs run on this machine

def test_a_local_launch_says_which_slurm_only_keys_it_does_not_use(specs, tmp_path):
    """From the hunt: cluster.setup ran under SLURM (its first log line) and was silently not run by the local
    executor (a setup exporting HF_HOME or activating a venv trained in another environment)."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import slurm_only_note

    marker = tmp_path / "setup-ran"
    items = items_from_resolved(resolve_sweep("lt3", [f"cluster.setup=['touch {marker}']", "cluster.time_min=60",
                                                      "cluster.partition=gpu"]))[:1]
    said: list[str] = []
    assert not launch(items, Workspace(tmp_path / "ws"), executor="debug", members=["lt3"], echo=said.append).failed
    notes = [m for m in said if "SLURM jobs only" in m]
    assert notes == ["note: cluster.partition, cluster.setup apply to SLURM jobs only: the debug executor runs these "
                     "jobs on this machine without them (cluster.setup's lines are not run: run them in the shell "
                     "you launch from)"], said
    assert not marker.exists()
    assert slurm_only_note("slurm", items) is None  # SLURM reads them
    plain = items_from_resolved(resolve_sweep("lt3", ["cluster.time_min=60"]))  # every SLURM-only key its default
    assert slurm_only_note("local", plain) is None
    timed = items_from_resolved(resolve_sweep("lt3", []))  # lt sets cluster.time_min=10
    assert slurm_only_note("local", timed).startswith("cluster.time_min applies to SLURM jobs only")


def test_the_dry_run_of_a_local_launch_says_it_too(specs, tmp_path):
    """The dry run previews the launch's note (table and --json), so a setup line not run is seen before any run."""
    import json

    args = ["sweep", "lt3", "--workdir", str(tmp_path / "ws"), "--dry-run", "--executor", "local",
            "cluster.partition=gpu", "cluster.time_min=60"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "note: cluster.partition applies to SLURM jobs only: the local executor" in " ".join(res.output.split())
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert doc["slurm_only"].startswith("cluster.partition applies to SLURM jobs only")
    plain = json.loads(CliRunner().invoke(app, [*args[:-2], "cluster.time_min=60", "--json"]).stdout)
    assert plain["slurm_only"] is None

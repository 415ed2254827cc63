"""What sbatch says, as arctl reports it (from a hunt): a sweep refused part-way names the runs it had
submitted; sbatch's warnings on a job it accepts are a note; a refusal's message is said once; an array sbatch
accepted before submitit failed is cancelled. sbatch and the rest of SLURM's programs are shims
(tests/support/slurm_shims.py)."""

from __future__ import annotations

import errno
import json

import pytest
import slurm_shims  # tests/support/slurm_shims.py
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.launch import states
from arctl.launch.executors import LaunchError
from arctl.launch.launcher import items_from_resolved, launch
from arctl.launch.registry import Registry
from arctl.launch.workspace import Workspace

QOS = "sbatch: error: QOSMaxSubmitJobPerUserLimit"
MAX_ARRAY = "echo 'MaxArraySize            = 1001'\n"  # scontrol (show config, release)
# as a site's job_submit.lua says it; the brackets would be rich markup, were it not escaped
WARNING = ("sbatch: WARNING: job time limit 2880 exceeds partition gpu MaxTime 1440; reduced to 1440\n"
           "sbatch: job routed to [cpu] partition")


def _sbatch(tmp_path, monkeypatch, body: str, **others: str):
    calls = tmp_path / "sbatch-calls"
    slurm_shims.use(tmp_path / "bin", monkeypatch, sbatch=f'echo "$1" >> {calls}\nn=$(wc -l < {calls})\n' + body,
                    srun="exit 0\n", scontrol=MAX_ARRAY, **others)
    return calls


def _sweep(ws, *args: str):
    return CliRunner().invoke(app, ["sweep", "lt3", "--seeds", "0-4", "--executor", "slurm", "--workdir", str(ws),
                                    *args])


def test_a_sweep_refused_part_way_says_on_its_error_line_what_it_submitted(specs, tmp_path, monkeypatch):
    """15 runs in arrays of 4: sbatch accepts the first, then the QOS limit refuses the second. The error line
    said only the refusal, as if nothing were submitted, while 4 runs were queued: it now names them, that they
    are recorded, and that the same command submits the other 11. --json: stdout stays empty (the failure's JSON
    is none: the error line is on stderr)."""
    calls = _sbatch(tmp_path, monkeypatch, 'if [ "$n" -eq 1 ]; then echo "Submitted batch job 1000"; exit 0; fi\n'
                                           f'echo "{QOS}" >&2; exit 1\n')
    ws = tmp_path / "ws"
    res = _sweep(ws, "cluster.max_array_size=4", "--json")
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    [line] = [line for line in res.stderr.splitlines() if line.strip()]
    assert line.startswith("error: sbatch refused the job: ") and line.count("QOSMaxSubmitJobPerUserLimit") == 1
    assert (f"submitted before it: 4 run(s) (job(s) 1000_0, 1000_1, 1000_2, 1000_3), recorded (`arctl status "
            f"--workdir {ws}` shows them); the other 11 were not submitted (undone)") in line, line
    assert len(calls.read_text().splitlines()) == 2
    with Registry(Workspace(ws).registry_path) as reg:
        rows = {r.run_id: (r.state, r.job_id) for r in reg.list("lt3")}
    assert sorted(rows.values()) == [(states.PENDING, f"1000_{k}") for k in range(4)]
    # the same command, once the queue has room, submits the others and keeps the 4
    _sbatch(tmp_path, monkeypatch, 'echo "Submitted batch job $((1000 + n))"\n')
    calls.unlink()
    again = _sweep(ws, "cluster.max_array_size=4", "--json")
    assert again.exit_code == 0, again.output
    shown = json.loads(again.stdout)
    assert len(shown["submitted"]) == 11 and [s["reason"] for s in shown["skipped"]] == ["already pending"] * 4


def test_a_sweep_refused_part_way_names_each_array_it_submitted_when_they_are_many(specs, tmp_path, monkeypatch):
    """Arrays of 5 runs each: the line names each array and its runs, not every task."""
    _sbatch(tmp_path, monkeypatch, 'if [ "$n" -le 2 ]; then echo "Submitted batch job $((999 + n))"; exit 0; fi\n'
                                   f'echo "{QOS}" >&2; exit 1\n')
    from arctl.compose import resolve_sweep

    items = items_from_resolved(resolve_sweep("lt3", ["cluster.max_array_size=5"], seeds=[0, 1, 2, 3, 4]))
    with pytest.raises(LaunchError) as info:
        launch(items, Workspace(tmp_path / "ws"), executor="slurm", members=["lt3"])
    assert "submitted before it: 10 run(s) (job(s) 1000 (5 runs), 1001 (5 runs)), recorded" in str(info.value)
    assert "the other 5 were not submitted" in str(info.value)


def test_what_sbatch_says_as_it_accepts_a_job_is_a_note_once_per_submission(specs, tmp_path, monkeypatch):
    """A site's job_submit.lua warnings (a time limit reduced, a job routed to another partition) were dropped
    (submitit keeps sbatch's stderr only when it refuses). Each accepted submission's is a `note:` on stderr,
    escaped (the brackets kept), once; --json's stdout is still one document."""
    _sbatch(tmp_path, monkeypatch, f"printf '%s\\n' '{WARNING}' >&2\necho \"Submitted batch job $((999 + n))\"\n")
    res = _sweep(tmp_path / "ws", "cluster.max_array_size=10", "--json")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["submitted"]) == 15
    said = " ".join(WARNING.split())
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: sbatch")]
    assert notes == [f"note: sbatch, accepting job {job}, said: {said}" for job in (1000, 1001)], res.stderr
    assert res.stderr.count("MaxTime 1440") == 2


def test_an_accepted_job_sbatch_said_nothing_of_has_no_note(specs, tmp_path, monkeypatch):
    _sbatch(tmp_path, monkeypatch, 'echo "Submitted batch job 1000"\n')
    res = _sweep(tmp_path / "ws")
    assert res.exit_code == 0, res.output
    assert "note: sbatch" not in res.stderr


def test_a_refusal_says_what_sbatch_said_once(specs, tmp_path, refusing_sbatch):
    """sbatch's complaint was said twice on the error line (submitit printed it, and put it in its error)."""
    from arctl.compose import resolve_experiment

    items = items_from_resolved(resolve_experiment("lt", ["cluster.partition=nosuch"], arms=["a"]))
    with pytest.raises(LaunchError) as info:
        launch(items, Workspace(tmp_path / "ws"), executor="slurm")
    assert str(info.value) == "sbatch refused the job: sbatch: error: invalid partition specified: nosuch"


def test_an_array_sbatch_accepted_before_submitit_failed_is_cancelled(specs, tmp_path, monkeypatch):
    """submitit submits an array from a copy of the executor, whose parser of sbatch's answer arctl never saw:
    when submitit failed after sbatch had accepted the (held) array, e.g. a full disk as it moved the task's
    files, the line said "sbatch refused the job" and the held array waited in the queue for ever."""
    from submitit.core import utils

    scancels = tmp_path / "scancel-calls"
    _sbatch(tmp_path, monkeypatch, 'echo "Submitted batch job 1000"\n', scancel=f'echo "$*" >> {scancels}\n')

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(utils.JobPaths, "move_temporary_file", full)
    from arctl.compose import resolve_sweep

    with pytest.raises(LaunchError) as info:
        launch(items_from_resolved(resolve_sweep("lt3", [])), Workspace(tmp_path / "ws"), executor="slurm",
               members=["lt3"])
    assert str(info.value).startswith("sbatch accepted job 1000, then the submission failed (job cancelled)")
    assert scancels.read_text().split() == ["1000"]


def test_what_sbatch_says_reaches_the_terminal_without_its_control_sequences(specs, tmp_path, monkeypatch):
    """A site's message is text from outside arctl: an escape sequence in it (a colour, a screen clear) is shown
    written out, not sent to the terminal."""
    _sbatch(tmp_path, monkeypatch, "printf 'sbatch: \\033[2Jrouted\\n' >&2\necho \"Submitted batch job $((999 + n))\"\n")
    res = _sweep(tmp_path / "ws")
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stderr and "\\x1b[2Jrouted" in res.stderr, repr(res.stderr)

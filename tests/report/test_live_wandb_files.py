"""`arctl report` while runs train (from the hunt of W&B files): between flushes wandb-core's file ends partway
through a record. The report called such a file unreadable ("1 W&B file(s) could not be read ... check or remove
them, or produce new runs"), or warned of it for every running run. Only a file nothing could be read from is one
that could not be read."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner
from wandb_workspace import _write_run

from arctl.cli.main import app
from arctl.track.wandbfile.framing import BLOCK_LEN, scan_records
from arctl.track.wandbfile.reader import has_exit_record

runner = CliRunner()
TRAIN_ONLY = [s for s in range(1, 300) if s % 10]  # no step with an evaluation: a run not yet evaluated


def _write(root: Path, arm: str, steps) -> Path:
    import wandb

    run_dir = _write_run(root, "ablation-vr", arm, 0, steps, final=False)
    wandb.teardown()  # finish() can return before wandb-core has closed the file
    (path,) = {p.resolve() for p in run_dir.rglob("run-*.wandb")}
    return path


def _records(path: Path):
    """(start, end) in the file of its records that are one chunk each."""
    buf = path.read_bytes()
    _, starts, ends = scan_records(buf, lambda _: None)
    return [(int(s), int(e)) for s, e in zip(starts, ends) if e <= len(buf)]


def _as_being_written(path: Path) -> None:
    """Cut the file halfway through a record of its last block, as it looks between two flushes."""
    start, end = [r for r in _records(path) if r[0] // BLOCK_LEN == (path.stat().st_size - 1) // BLOCK_LEN][-5]
    path.write_bytes(path.read_bytes()[: (start + end) // 2])
    assert not has_exit_record(path)


def _report(root: Path):
    res = runner.invoke(app, ["report", "--figure", "ablation_vr", "--workdir", str(root), "--out",
                              str(root / "out")])
    return res, " ".join(res.output.split())


def test_a_run_being_written_before_its_first_evaluation_is_not_an_unreadable_file(tmp_path):
    _as_being_written(_write(tmp_path / "ws", "grpo", TRAIN_ONLY))
    res, said = _report(tmp_path / "ws")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    # was: "1 W&B file(s) could not be read (first: ... file truncated inside a record ...); check or remove them"
    assert "could not be read" not in said and "remove" not in said and "truncated" not in said, said


def test_a_run_being_written_beside_evaluated_runs_gets_no_damage_warning(tmp_path):
    _write(tmp_path / "ws", "grpo", range(0, 21))
    _as_being_written(_write(tmp_path / "ws", "grpo-vr", range(0, 200)))
    res, said = _report(tmp_path / "ws")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ws" / "out" / "ablation_vr.svg").is_file()
    assert "truncated" not in said and "the file ends there" not in said, said  # was: a warning of the cut record


def test_damage_in_a_file_whose_other_records_were_read_is_not_an_unreadable_file(tmp_path):
    """A checksum mismatch in the file's second block drops that block; the rest is read: the run is there, it
    has logged no evaluation yet (not "could not be read", which counted every note of a file)."""
    path = _write(tmp_path / "ws", "grpo", TRAIN_ONLY)
    start, end = next(r for r in _records(path) if r[0] // BLOCK_LEN == 1)
    buf = bytearray(path.read_bytes())
    buf[(start + end) // 2] ^= 0xFF
    path.write_bytes(bytes(buf))
    res, said = _report(tmp_path / "ws")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "could not be read" not in said and "remove" not in said, said


def test_a_file_nothing_could_be_read_from_is_counted_once(tmp_path):
    """Its first chunk damaged, the file's one block is lost whole: one file that could not be read (its notes
    were counted one file each: "2 W&B file(s)")."""
    path = _write(tmp_path / "ws", "grpo", [1, 2, 3])
    assert path.stat().st_size < BLOCK_LEN
    start, end = _records(path)[0]
    buf = bytearray(path.read_bytes())
    buf[(start + end) // 2] ^= 0xFF
    path.write_bytes(bytes(buf))
    res, said = _report(tmp_path / "ws")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "1 W&B file(s) could not be read" in said and "every record is damaged" in said, said

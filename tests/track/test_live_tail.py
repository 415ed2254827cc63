"""W&B files as they are while their run trains, and a resumed attempt whose run record was lost (from the hunt of
W&B files): wandb-core's file usually ends partway through a record between flushes, and that cut last record was
read as damage ("check or remove them"); one damaged chunk in a resumed attempt's first 32 KiB block lost its run
record, its start time read as 0, and the killed attempt's values won the steps both logged."""

from __future__ import annotations

import shutil
import struct
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from wandb_workspace import _write_run, run_id, train_row

from arctl.track.run_data import RunData
from arctl.track.runs import load_runs
from arctl.track.runs.stitch import attempt_order, in_attempt_order, stitch_logged
from arctl.track.wandbfile import read_wandb_file
from arctl.track.wandbfile.framing import BLOCK_LEN, CHUNK_HEADER_LEN, FIRST, FULL, HEADER_LEN
from arctl.track.wandbfile.reader import NO_EXIT_RECORD, TAIL_CUT, has_exit_record

RUN = ("ablation-vr", "grpo", 0)
STEPS = list(range(120))


def _chunks(buf: bytes):
    """(offset, data length, type) of every chunk of an intact .wandb byte string, in order."""
    pos, out = HEADER_LEN, []
    while pos + CHUNK_HEADER_LEN <= len(buf):
        left = BLOCK_LEN - pos % BLOCK_LEN
        if left < CHUNK_HEADER_LEN:
            pos += left
            continue
        _, length, ctype = struct.unpack_from("<IHB", buf, pos)
        if ctype == 0 and length == 0:
            pos += left
            continue
        out.append((pos, length, ctype))
        pos += CHUNK_HEADER_LEN + length
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A workspace of one finished run of 120 steps (evaluations every 10: several 32 KiB blocks), written by
    arctl's writer (wandb 0.31)."""
    import wandb

    root = tmp_path_factory.mktemp("live")
    _write_run(root, *RUN, STEPS, final=False)
    wandb.teardown()  # finish() can return before wandb-core has closed the file
    return root


def _copy_cut(finished: Path, tmp_path: Path, where) -> tuple[Path, Path]:
    """A copy of ``finished`` whose file ends at ``where(bytes)``: as the file looked while it was written."""
    root = tmp_path / "ws"
    shutil.copytree(finished, root, symlinks=True)
    (path,) = {p.resolve() for p in root.rglob("run-*.wandb")}
    buf = path.read_bytes()
    assert has_exit_record(path)
    path.write_bytes(buf[: where(buf)])
    assert not has_exit_record(path)  # the exit record is written last: a file being written has none
    return root, path


def _inside_a_record(buf: bytes) -> int:  # halfway through the data of a full record in the file's last block
    pos, length, _ = [c for c in _chunks(buf) if c[2] == FULL and c[0] // BLOCK_LEN == (len(buf) - 1) // BLOCK_LEN][-5]
    return pos + CHUNK_HEADER_LEN + length // 2


def _inside_a_chunk_header(buf: bytes) -> int:  # 5 of the 7 bytes of a chunk's header
    pos = [c for c in _chunks(buf) if c[2] == FULL][-5][0]
    assert any(buf[pos : pos + 5])
    return pos + 5


def _after_a_first_chunk(buf: bytes) -> int:  # a record across a block boundary, cut at the boundary
    pos, length, _ = [c for c in _chunks(buf) if c[2] == FIRST][-1]
    return pos + CHUNK_HEADER_LEN + length


@pytest.mark.parametrize("where", [_inside_a_record, _inside_a_chunk_header, _after_a_first_chunk])
def test_a_file_being_written_is_read_as_a_running_run_not_as_damage(finished, tmp_path, where):
    root, path = _copy_cut(finished, tmp_path, where)
    # the reader says where the file ends, as the end of a file (the marker), and keeps the records before it
    frag = read_wandb_file(path, summary=False)
    assert frag.state == "incomplete" and any(w.endswith(TAIL_CUT) for w in frag.warnings), frag.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(root, cache_dir=tmp_path / "cache", progress=False, processes=1)
    # one line: the run has not finished (was: "... file ends inside a multi-chunk record; dropped it", or
    # "... file truncated inside a record at byte N", which reports counted as a file that could not be read)
    assert len(runs.warnings) == 1 and runs.warnings[0].endswith(f": {NO_EXIT_RECORD}"), runs.warnings
    assert Path(runs.warnings[0].split(": ", 1)[0]).resolve() == path
    loss = runs.history[runs.history["metric"] == "train/loss"]
    steps = loss["step"].tolist()
    assert 10 < len(steps) < len(STEPS) and steps == STEPS[: len(steps)]  # a prefix, nothing invented
    np.testing.assert_allclose(loss["value"], [train_row("grpo", 0, s)["train/loss"] for s in steps])


def test_a_cut_tail_after_the_exit_record_is_still_damage(finished, tmp_path):
    """A finished file that ends inside a record after its exit record was cut after the run ended: a note."""
    root = tmp_path / "ws"
    shutil.copytree(finished, root, symlinks=True)
    (path,) = {p.resolve() for p in root.rglob("run-*.wandb")}
    buf = path.read_bytes()
    left = BLOCK_LEN - len(buf) % BLOCK_LEN
    if left < 64:
        buf += bytes(left)  # the block's zero trailer
    path.write_bytes(buf + struct.pack("<IHB", 12345, 40, FULL) + b"x" * 20)  # a chunk of 40 bytes, 20 there
    assert has_exit_record(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(root, cache_dir=tmp_path / "cache", progress=False, processes=1)
    assert runs.runs["state"].tolist() == ["finished"]
    assert [w for w in runs.warnings if w.endswith(TAIL_CUT)], runs.warnings


def _frag(source: str, start: float) -> RunData:
    return RunData(wandb_id="r1", source=source, start_time=start)


def test_a_fragment_without_its_run_record_is_ordered_by_its_folder_name():
    """Its folder's time has no fraction: a fragment of the same second is ordered by W&B's count of the attempts
    started in that second, not by a start time of .0 against the other's .7."""
    stamp = "20260101_120000"
    t = time.mktime(time.strptime(stamp, "%Y%m%d_%H%M%S"))  # the folder's time, read as local time as wandb writes it
    first = _frag(f"w/offline-run-{stamp}-r1/run-r1.wandb", t + 0.7)
    lost = _frag(f"w/offline-run-{stamp}-r1-1/run-r1.wandb", 0.0)  # run record lost: start time 0
    later = _frag("w/offline-run-20260101_120005-r1/run-r1.wandb", 0.0)
    earlier = _frag("w/offline-run-20260101_115900-r1/run-r1.wandb", 0.0)
    assert sorted([later, lost, first, earlier], key=attempt_order) == [earlier, first, lost, later]
    assert in_attempt_order([later, lost, first, earlier]) == [earlier, first, lost, later]


def test_a_lost_run_record_is_ordered_against_the_other_attempts_folders_not_their_run_records():
    """From a CI run: wandb names the folder at wandb.init's start and stamps the run record a fraction of a second
    later. An attempt whose run record is at 12:00:01.2 (its folder 12:00:00) and a resume within the next second
    (folder 12:00:01, its run record lost): the resume's folder second sorted before the first's run record, and the
    first attempt's values won the steps both logged."""
    t = time.mktime(time.strptime("20260101_120000", "%Y%m%d_%H%M%S"))
    first = _frag("w/offline-run-20260101_120000-r1/run-r1.wandb", t + 1.2)
    resumed = _frag("w/offline-run-20260101_120001-r1/run-r1.wandb", 0.0)
    assert in_attempt_order([resumed, first]) == [first, resumed]


def test_a_resumed_attempt_whose_run_record_was_lost_keeps_its_place_and_says_so(tmp_path):
    """Attempt 1 logs steps 1..60 (loss 100 + s), attempt 2 resumes at step 10 (open_run rewinds) and logs 11..90
    (loss 200 + s); one byte of attempt 2's run record is flipped: the rest of its first block is lost. Was: it
    sorted first, and steps 11..60 read attempt 1's values, with only a checksum line said."""
    import wandb
    import yaml

    from arctl.track.writer import close_run, log_row, open_run

    rid = run_id(*RUN)
    run_dir = tmp_path / "ws" / "runs" / rid
    run_dir.mkdir(parents=True)
    cfg = {"experiment": RUN[0], "arm": RUN[1], "seed": RUN[2], "run_id": rid,
           "wandb": {"project": "p", "mode": "offline"}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))

    def row(s: int, base: int) -> dict:
        return {"trainer/global_step": s, "train/loss": base + s, **{f"train/x{i}": i + s for i in range(40)}}

    run = open_run(cfg, run_dir)
    for s in range(1, 61):
        log_row(run, row(s, 100))
    close_run(run)
    run = open_run(cfg, run_dir, resume_at=10, history=[row(s, 100) for s in range(1, 11)])
    for s in range(11, 91):
        log_row(run, row(s, 200))
    close_run(run)
    wandb.teardown()
    files = {p.resolve() for p in run_dir.rglob("run-*.wandb")}
    assert len(files) == 2
    second = max(files, key=lambda p: attempt_order(read_wandb_file(p, summary=False)))
    assert read_wandb_file(second, summary=False).rewind_step == 10
    buf = bytearray(second.read_bytes())
    run_rec = next(c for c in _chunks(bytes(buf)) if c[0] < BLOCK_LEN)  # the first record: the run record
    buf[run_rec[0] + CHUNK_HEADER_LEN + run_rec[1] // 2] ^= 0xFF
    second.write_bytes(bytes(buf))
    damaged = read_wandb_file(second, summary=False)
    assert damaged.start_time == 0.0 and damaged.rewind_step is None and damaged.n_rows  # rows after block 0 read

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(tmp_path / "ws", cache_dir=tmp_path / "cache", progress=False, processes=1)
    loss = runs.history[runs.history["metric"] == "train/loss"].set_index("step")["value"]
    assert loss.index.tolist() == list(range(1, 91))
    kept = int(damaged.column("trainer/global_step")[0])  # attempt 2's first step after its lost block
    assert 11 < kept < 60
    # from there on attempt 2's values (was: attempt 1's up to step 60); before it, attempt 1's (attempt 2's were lost)
    assert {s: v for s, v in loss.items() if v != (200 + s if s >= kept else 100 + s)} == {}
    said = [w for w in runs.warnings if "run record" in w]
    assert len(said) == 1 and said[0].startswith(str(second)), runs.warnings
    assert second.parent.name in said[0] and "inferred from its folder's name" in said[0], said


def test_one_attempt_without_its_run_record_is_not_said_to_be_out_of_order():
    frag = _frag("w/offline-run-20260101_120000-r1/run-r1.wandb", 0.0)
    frag.keys, frag.values = ["trainer/global_step", "m"], np.array([[1.0, 2.0]])
    assert stitch_logged([frag])[2] == []


@pytest.mark.parametrize("reader_tz", ["UTC0", "Asia/Tokyo", "America/New_York"])
def test_a_lost_run_records_folder_is_read_in_the_time_zone_its_run_was_written_in(reader_tz, monkeypatch):
    """From the review of the folder order: the folder's time was read in the report machine's time zone, and read
    in Tokyo, a resumed attempt written in UTC sorted before the attempt it resumed (whose values then won every
    step both logged). Its zone is measured on the run's intact fragments now."""
    import calendar

    monkeypatch.setenv("TZ", reader_tz)
    time.tzset()
    try:
        t0 = calendar.timegm((2026, 12, 6, 3, 0, 0, 0, 0, 0)) + 0.4  # the first attempt, written in UTC-8

        def stamp(t):
            return time.strftime("%Y%m%d_%H%M%S", time.gmtime(t - 8 * 3600))

        first = _frag(f"w/offline-run-{stamp(t0)}-r1/run-r1.wandb", t0)
        resumed = _frag(f"w/offline-run-{stamp(t0 + 600)}-r1/run-r1.wandb", 0.0)  # its run record lost
        assert in_attempt_order([resumed, first]) == [first, resumed]
        # only damaged fragments: their folders' own order
        again = _frag(f"w/offline-run-{stamp(t0 + 1200)}-r1/run-r1.wandb", 0.0)
        assert in_attempt_order([again, resumed]) == [resumed, again]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()

"""The .wandb reader on files written by the installed wandb, and on hand-framed byte strings."""

import random
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wandb_workspace import (
    LAST_STEP,
    RESUMED,
    TRUNCATED,
    TRUNCATED_STEPS,
    acc,
    frame_records,
    run_id,
    think_len,
)

from arctl.track import wandbfile as wo


def _file(workspace, experiment, arm, seed):
    files = sorted({p.resolve() for p in (workspace / "runs" / run_id(experiment, arm, seed)).rglob("run-*.wandb")})
    return files


def test_proto_field_numbers_match_the_installed_wandb():
    from wandb.proto import wandb_internal_pb2 as pb

    fields = {f.name: f.number for f in pb.Record.DESCRIPTOR.fields}
    assert fields["history"] == wo.FIELD_HISTORY
    assert fields["summary"] == wo.FIELD_SUMMARY
    assert fields["config"] == wo.FIELD_CONFIG
    assert fields["run"] == wo.FIELD_RUN
    assert fields["exit"] == wo.FIELD_EXIT
    assert {fields[n] for n in ("num", "control", "uuid", "_info")} == set(wo.NON_ONEOF)


def test_crc32c_known_vector():
    assert wo.crc32c(b"123456789") == 0xE3069283
    assert wo.crc32c(b"") == 0


def test_reads_a_real_offline_run(workspace):
    (path,) = _file(workspace, "main-grpo", "grpo", 1)
    run = wo.read_wandb_file(path)
    assert run.warnings == []
    assert run.state == "finished" and run.exit_code == 0
    assert run.group == "main-grpo" and run.name == "grpo-s1" and run.project == "arctl-test"
    assert run.config["experiment"] == "main-grpo" and run.config["seed"] == 1
    assert run.config["thinking"]["budgets"] == [2000, 4000, 6000, 8000]
    steps = run.column("trainer/global_step")
    assert list(steps) == list(range(LAST_STEP + 1))
    got = run.column("eval/amc22/acc@4000")
    want = [acc("grpo", 1, "amc22", 4000, s) if s % 10 == 0 else np.nan for s in range(LAST_STEP + 1)]
    np.testing.assert_allclose(got, want, equal_nan=True)
    np.testing.assert_allclose(run.column("eval/aime24/think_len")[20], think_len("grpo", 1, "aime24", 20))
    # the summary holds the last value of each key
    assert run.summary["eval/math500/acc@1000"] == pytest.approx(acc("grpo", 1, "math500", 1000, LAST_STEP))
    bulk = wo.read_wandb_file(path, summary=False)
    assert bulk.summary["train/loss"] == pytest.approx(1 / 21)
    assert bulk.summary == {k: v for k, v in run.summary.items() if not k.startswith("_")}


def test_header_only_read_gives_config_without_history(workspace):
    (path,) = _file(workspace, "ctx-16k", "grpo", 0)
    head = wo.read_wandb_header(path)
    assert head.config["arm"] == "grpo" and head.group == "ctx-16k" and head.n_rows == 0


def test_truncated_file_keeps_intact_records(workspace):
    (path,) = _file(workspace, *TRUNCATED)
    run = wo.read_wandb_file(path)
    assert any("truncated" in w for w in run.warnings)
    assert run.state == "incomplete"
    steps = run.column("trainer/global_step")
    assert 10 < len(steps) < TRUNCATED_STEPS
    assert list(steps) == list(range(len(steps)))  # a prefix, in order, nothing invented
    np.testing.assert_allclose(run.column("train/score@2000"), [acc("grpo-vr", 1, "aime24", 2000, s) for s in steps])


def _largest_chunk_payload_middle_in_block0(buf: bytes) -> int:
    """Offset of the middle byte of the largest chunk payload in block 0 (a fixed offset could land
    in a chunk header or the block's zero padding, depending on how wandb laid the file out)."""
    import struct

    pos, best = wo.HEADER_LEN, (0, 0)
    while wo.BLOCK_LEN - pos >= wo.CHUNK_HEADER_LEN and pos + wo.CHUNK_HEADER_LEN <= len(buf):
        length = struct.unpack_from("<H", buf, pos + 4)[0]
        if length == 0:
            break
        best = max(best, (length, pos + wo.CHUNK_HEADER_LEN + length // 2))
        pos += wo.CHUNK_HEADER_LEN + length
    assert best[0] > 0, "no chunk in block 0"
    return best[1]


def test_corrupt_byte_skips_its_block_and_keeps_the_rest(workspace, tmp_path):
    (path,) = _file(workspace, *TRUNCATED)
    good = wo.read_wandb_file(path)
    data = bytearray(path.read_bytes())
    data[_largest_chunk_payload_middle_in_block0(bytes(data))] ^= 0xFF
    bad = tmp_path / "run-corrupt.wandb"
    bad.write_bytes(bytes(data))
    run = wo.read_wandb_file(bad)
    assert any("checksum mismatch" in w for w in run.warnings)
    steps = run.column("trainer/global_step")
    assert 0 < len(steps) < good.n_rows
    assert steps.max() == good.column("trainer/global_step").max()  # block 1 was still read


def test_empty_and_foreign_files(tmp_path):
    empty = tmp_path / "run-x.wandb"
    empty.write_bytes(b"")
    run = wo.read_wandb_file(empty)
    assert run.n_rows == 0 and any("empty" in w for w in run.warnings)
    other = tmp_path / "run-y.wandb"
    other.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(wo.WandbFileError, match="not a W&B transaction log"):
        wo.read_wandb_file(other)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=80_000), min_size=0, max_size=8), st.randoms())
def test_framing_round_trip(sizes, rnd):
    payloads = [bytes(rnd.getrandbits(8) for _ in range(min(n, 50))) * max(1, n // 50) for n in sizes]
    out = []
    warns = []
    got = list(wo.iter_records(frame_records(payloads, block_len=wo.BLOCK_LEN), warns.append))
    out.extend(got)
    assert out == payloads and warns == []


def test_framing_tolerates_cut_at_every_position_of_a_small_log():
    rnd = random.Random(0)
    payloads = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in (10, 40000, 5, 70000, 3)]
    blob = frame_records(payloads)
    for cut in range(0, len(blob), 997):
        warns = []
        got = list(wo.iter_records(blob[:cut], warns.append))
        assert got == payloads[: len(got)]  # always an exact prefix


def test_castagnoli_checksums_are_accepted():
    import struct

    payload = b"hello"
    blob = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
    blob += struct.pack("<IHB", wo.crc32c(bytes([1]) + payload), len(payload), 1) + payload
    warns = []
    assert list(wo.iter_records(blob, warns.append)) == [payload] and warns == []


def test_reads_a_copy_outside_the_workspace(workspace, tmp_path):
    (path,) = _file(workspace, "main-ar-base", "ar-base", 0)
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    assert wo.read_wandb_file(copy).n_rows == LAST_STEP + 1


def test_has_exit_record_reads_the_tail_of_the_file(tmp_path, workspace):
    """What close_run waits for: the exit record wandb-core writes last, found in the last two blocks
    wherever it falls (a record cut by a block boundary included)."""
    from wandb.proto import wandb_internal_pb2 as pb

    exit_record = pb.Record(exit=pb.RunExitRecord(exit_code=0)).SerializeToString()
    history = pb.Record(history=pb.HistoryRecord(item=[pb.HistoryItem(key="_step", value_json="1")])).SerializeToString()
    path = tmp_path / "run-x.wandb"
    around = 3 * wo.BLOCK_LEN - 4 * wo.CHUNK_HEADER_LEN - len(history) - 40
    for size in range(around, around + 60):  # the exit record padded into, cut by, or after the end of block 3
        body = [history, b"\x12" + bytes(size - 1)]  # a payload of exactly `size` bytes (a history record's tag)
        path.write_bytes(frame_records(body + [exit_record]))
        assert wo.has_exit_record(path), size
        path.write_bytes(frame_records(body))
        assert not wo.has_exit_record(path), size
    path.write_bytes(frame_records([history, exit_record]))
    assert wo.has_exit_record(path)
    for data in (b"", b":W&B", frame_records([history]), b"PK\x03\x04" + b"\x00" * 100):
        path.write_bytes(data)
        assert not wo.has_exit_record(path)
    assert not wo.has_exit_record(tmp_path / "missing.wandb")
    resumed = _file(workspace, *RESUMED)  # real files: both attempts finished
    assert len(resumed) == 2 and all(wo.has_exit_record(p) for p in resumed)

"""read_wandb_file decodes a file's records a chunk at a time (reader.CHUNK_RECORDS / CHUNK_BYTES) into a
growing table: the result is the one-batch decoding's, and its memory is the table plus one chunk, not a
multiple of the file (a hunt: 8.4x the file's size, 4.9 GB for a 587 MB file)."""

from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest
from wandb_workspace import frame_records  # tests/support/wandb_workspace.py

from arctl.track import wandbfile as wo
from arctl.track.wandbfile import reader

pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")


def _history(step: int, items: dict) -> bytes:
    rec = pb.Record(history=pb.HistoryRecord(step=pb.HistoryStep(num=step)))
    for k, v in items.items():
        rec.history.item.add(key=k, value_json=v if isinstance(v, str) else json.dumps(v))
    return rec.SerializeToString()


def _summary(items: dict) -> bytes:
    rec = pb.Record()
    for k, v in items.items():
        rec.summary.update.add(key=k, value_json=json.dumps(v))
    return rec.SerializeToString()


def _payloads(n: int) -> list[bytes]:
    """A run of ``n`` steps: keys that appear mid-history, NaN/inf cells, values that are no numbers, a
    record of another shape (nested key: decoded by protobuf), summary records, config and exit."""
    run = pb.Record()
    run.run.run_id = "abc"
    run.run.config.update.add(key="lr", value_json="0.001")
    out = [run.SerializeToString()]
    for s in range(n):
        row: dict = {"_step": s, "loss": 1.0 / (s + 1), f"wide/{s % 7}": s * 0.5}
        if s >= n // 3:
            row["late/acc"] = s % 10 / 10  # a key first logged in a later chunk
        if s % 11 == 0:
            row["odd"] = ["NaN", "Infinity", "-Infinity", '"text"', "true", "null", '{"_type": "image"}'][s % 7]
        if s % 50 == 49:
            row.update({f"eval/b{b}": (s + b) % 13 * 0.01 for b in range(40)})
        out.append(_history(s, row))
        if s % 13 == 0:
            nested = pb.Record(history=pb.HistoryRecord(step=pb.HistoryStep(num=s)))
            nested.history.item.add(nested_key=["deep", "key"], value_json=str(s))
            out.append(nested.SerializeToString())
        out.append(_summary({"loss": 1.0 / (s + 1)}))
    out.append(pb.Record(exit=pb.RunExitRecord(exit_code=0, runtime=12)).SerializeToString())
    return out


def _same(a, b) -> None:
    assert a.keys == b.keys
    assert a.values.shape == b.values.shape
    assert a.values.tobytes() == b.values.tobytes()  # bit for bit, NaNs included
    assert (a.nan is None) == (b.nan is None)
    if a.nan is not None:
        np.testing.assert_array_equal(a.nan, b.nan)
    assert repr(a.summary) == repr(b.summary)  # NaN values included
    for field in ("config", "warnings", "state", "exit_code", "runtime_s", "wandb_id"):
        assert getattr(a, field) == getattr(b, field), field


def _read(path, monkeypatch, records: int, nbytes: int = 1 << 40, summary: bool = False):
    decoded: list[int] = []
    real = reader.history_table_at

    def counting(data, starts, ends, warn, where=""):
        decoded.append(len(starts))
        return real(data, starts, ends, warn, where)

    with monkeypatch.context() as m:
        m.setattr(reader, "CHUNK_RECORDS", records, raising=False)
        m.setattr(reader, "CHUNK_BYTES", nbytes, raising=False)
        m.setattr(reader, "history_table_at", counting)
        return reader.read_wandb_file(path, summary=summary), decoded


@pytest.mark.parametrize("summary", [False, True])
def test_chunked_decoding_equals_one_batch(tmp_path, monkeypatch, summary):
    buf = frame_records(_payloads(700), block_len=wo.BLOCK_LEN)
    path = tmp_path / "run-abc.wandb"
    path.write_bytes(buf[: len(buf) - 9])  # the exit record's end cut: a file being written
    one, batches = _read(path, monkeypatch, records=10**9, summary=summary)
    assert len(batches) == 1
    assert any(w.endswith(wo.framing.TAIL_CUT) for w in one.warnings) and one.state == "incomplete"
    assert one.values.shape[0] == 700 + len(range(0, 700, 13))
    assert "late/acc" in one.keys and "deep.key" in one.keys and one.nan is not None
    assert np.isinf(one.column("odd")).any()
    for records, nbytes in ((97, 1 << 40), (1, 1 << 40), (10**9, 8_000)):
        chunked, batches = _read(path, monkeypatch, records=records, nbytes=nbytes, summary=summary)
        assert len(batches) > 5 and max(batches) <= records
        _same(chunked, one)


def test_chunks_equal_the_table_of_all_records_at_once(tmp_path, monkeypatch):
    """Against history_table_at over every history record (the decoding before chunks), not only
    against itself with one chunk."""
    payloads = _payloads(400)
    path = tmp_path / "run-abc.wandb"
    path.write_bytes(frame_records(payloads, block_len=wo.BLOCK_LEN))
    hist = [p for p in payloads if wo.record_field(p) == wo.FIELD_HISTORY]
    keys, values, nan = wo.history_table(hist, lambda _w: None)
    run, batches = _read(path, monkeypatch, records=37)
    assert len(batches) > 10
    assert run.keys == keys and run.values.tobytes() == values.tobytes()
    np.testing.assert_array_equal(run.nan, nan)


def test_memory_is_the_table_plus_a_chunk_not_a_multiple_of_the_file(tmp_path, monkeypatch):
    """tracemalloc's peak (numpy and Python objects; the mapped file is not allocated) stays near
    twice the dense table plus one chunk's decoding; before, the file was read whole (1x) and decoded
    in one batch (~8x)."""
    keys = [f"train/k{j:03d}" for j in range(200)]
    payloads = [_history(s, {k: math.sin(s + j) for j, k in enumerate(keys)}) for s in range(1500)]
    path = tmp_path / "run-wide.wandb"
    path.write_bytes(frame_records(payloads, block_len=wo.BLOCK_LEN))
    size = path.stat().st_size  # ~10 MB
    table = 1500 * 200 * 9  # float64 values + bool nan: 2.7 MB
    chunk = 64 << 10
    reader.read_wandb_file(path, summary=False)  # the lazy imports (pyarrow, protobuf) out of the count
    tracemalloc.start()
    try:
        with monkeypatch.context() as m:
            m.setattr(reader, "CHUNK_BYTES", chunk, raising=False)
            run = reader.read_wandb_file(path, summary=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.values.shape == (1500, 200)
    assert peak < min(size, 3 * table + 32 * chunk), (peak, table, size)

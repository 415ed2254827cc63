"""The bulk history decoder (arctl.track.wandbfile.history_bulk) against protobuf, the slow reference:
on real offline runs written by wandb, and on random records of every shape protobuf accepts,
including corrupted ones."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.track import wandbfile as wo
from arctl.track.wandbfile import history_bulk as wh
from arctl.track.wandbfile import wire
from arctl.track.wandbfile.values import _nan_flags, _to_float

pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")


def _both(payloads):
    w_fast: list[str] = []
    w_ref: list[str] = []
    fast = wo.history_table(payloads, w_fast.append, "f")
    ref = wo.history_table_protobuf(payloads, w_ref.append, "f")
    return fast, ref, w_fast, w_ref


def _assert_same(payloads):
    (k1, v1, n1), (k2, v2, n2), w1, w2 = _both(payloads)
    assert k1 == k2
    assert v1.shape == v2.shape == n1.shape == n2.shape
    np.testing.assert_array_equal(v1, v2)  # NaN == NaN here
    np.testing.assert_array_equal(n1, n2)
    assert not (n1 & ~np.isnan(v1)).any()  # a logged NaN holds NaN
    assert w1 == w2


def test_field_numbers_match_the_installed_wandb():
    def nums(msg):
        return {f.name: f.number for f in msg.DESCRIPTOR.fields}

    assert nums(pb.Record)["num"] == wh.RECORD_NUM and nums(pb.Record)["history"] == wh.RECORD_HISTORY
    h = nums(pb.HistoryRecord)
    assert (h["item"], h["step"]) == (wh.HISTORY_ITEM, wh.HISTORY_STEP)
    assert nums(pb.HistoryStep)["num"] == wh.STEP_NUM
    i = nums(pb.HistoryItem)
    assert (i["key"], i["nested_key"], i["value_json"]) == (wh.ITEM_KEY, wh.ITEM_NESTED_KEY, wh.ITEM_VALUE_JSON)


def _history_payloads(path):
    buf = path.read_bytes()
    return [p for p in wo.iter_records(buf, lambda m: None) if wo.record_field(p) == wo.FIELD_HISTORY]


def test_real_offline_runs_decode_in_bulk_exactly_like_protobuf(workspace):
    files = sorted(workspace.rglob("run-*.wandb"))
    assert len(files) >= 10
    for path in files:
        payloads = _history_payloads(path)
        assert payloads, path
        _assert_same(payloads)
        lengths = np.array([len(p) for p in payloads])
        ends = np.cumsum(lengths)
        items = wh.decode_history(b"".join(payloads), ends - lengths, ends, _to_float, _nan_flags)
        assert items.irregular.size == 0, path  # wandb's own records take the bulk path
        assert len(items.values) == sum(len(pb.Record.FromString(p).history.item) for p in payloads)


def test_hand_made_records_give_the_logged_values():
    rows = [{"trainer/global_step": 0, "a": 0.5, "b": "true"}, {"trainer/global_step": 1, "a": -1e-300},
            {"c": float("inf"), "a": 2}]
    payloads = []
    for n, row in enumerate(rows):
        h = pb.HistoryRecord(step=pb.HistoryStep(num=n))
        for k, v in row.items():
            h.item.add(nested_key=[k], value_json=v if isinstance(v, str) else json.dumps(v))
        payloads.append(pb.Record(num=n + 1, history=h).SerializeToString())
    keys, values, nan = wo.history_table(payloads, lambda m: None)
    assert keys == ["trainer/global_step", "a", "b", "c"]
    expected = np.array([[0, 0.5, 1.0, np.nan], [1, -1e-300, np.nan, np.nan], [np.nan, 2, np.nan, math.inf]])
    np.testing.assert_array_equal(values, expected)
    assert not nan.any()
    _assert_same(payloads)


def test_a_logged_nan_is_told_from_a_value_that_is_no_number():
    """W&B writes ``float("nan")`` as ``NaN``: a value the run logged (a diverged loss), unlike a string,
    ``null`` or a table, which are not numbers at all; both hold NaN in ``values``."""
    rows = [{"a": "NaN", "b": '"text"'}, {"a": "1", "b": "null", "c": "NaN"}, {"a": '"NaN"', "c": "-Infinity"}]
    payloads = []
    for n, row in enumerate(rows):
        h = pb.HistoryRecord(step=pb.HistoryStep(num=n))
        for k, v in row.items():
            h.item.add(nested_key=[k], value_json=v)
        payloads.append(pb.Record(num=n + 1, history=h).SerializeToString())
    keys, values, nan = wo.history_table(payloads, lambda m: None)
    assert keys == ["a", "b", "c"]
    np.testing.assert_array_equal(values, [[np.nan, np.nan, np.nan], [1, np.nan, np.nan], [np.nan, np.nan, -math.inf]])
    assert nan.tolist() == [[True, False, False], [False, False, True], [False, False, False]]
    _assert_same(payloads)


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),
    st.integers(-(2**70), 2**70).map(json.dumps),
    st.sampled_from(["true", "false", "null", '"text"', '{"_type": "table"}', "[1, 2]", "", " 1.5", "1_0",
                     "+1", ".5", "1e", "-", "NaN", "-Infinity", "0x10", "é", "1.5 ", "nan", " NaN", '"NaN"',
                     "-NaN", "NaNa"]),
)
_KEYS = st.one_of(st.sampled_from(["trainer/global_step", "train/loss", "eval/aime24/acc@2000", "_step", "é/ü"]),
                  st.text(min_size=0, max_size=12))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


@st.composite
def _records(draw):
    """Serialized Records of history (and sometimes other) content, every field shape."""
    rnd = draw(st.randoms(use_true_random=False))
    payloads = []
    for n in range(draw(st.integers(0, 6))):
        rec = pb.Record(num=n)
        h = rec.history
        if rnd.random() < 0.5:
            h.step.num = rnd.randrange(10**6)
        for _ in range(draw(st.integers(0, 5))):
            it = h.item.add()
            shape = rnd.random()
            key = draw(_KEYS)
            if shape < 0.6:
                it.nested_key.append(key)
            elif shape < 0.75:
                it.key = key
            elif shape < 0.85:
                it.nested_key.extend([key, draw(_KEYS)])
            else:
                it.key = key
                it.nested_key.append(draw(_KEYS))
            if rnd.random() < 0.9:
                it.value_json = draw(_VALUES)
            if rnd.random() < 0.05:
                it.number = 3.0  # a typed field: left to protobuf
        if rnd.random() < 0.05:
            rec.uuid = "u"
        if rnd.random() < 0.05:
            rec.control.local = True
        data = rec.SerializeToString()
        if rnd.random() < 0.1 and len(h.item):  # the step before the items (protobuf accepts any order)
            body = pb.HistoryRecord(step=pb.HistoryStep(num=n)).SerializeToString() + b"".join(
                pb.HistoryRecord(item=[it]).SerializeToString() for it in h.item)
            data = pb.Record(num=n).SerializeToString() + b"\x12" + _varint(len(body)) + body
        if rnd.random() < 0.05:  # two history fields in one record: protobuf merges them
            data += pb.Record(history=pb.HistoryRecord(item=[pb.HistoryItem(nested_key=["x"], value_json="7")]
                                                       )).SerializeToString()
        if rnd.random() < 0.2 and data:  # damage that a checksum would not catch
            b = bytearray(data)
            for _ in range(rnd.randint(1, 3)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            if rnd.random() < 0.3:
                del b[rnd.randrange(len(b)):]
            data = bytes(b)
        payloads.append(data)
    return payloads


@settings(max_examples=300, deadline=None)
@given(_records())
def test_bulk_decoding_equals_protobuf_on_any_records(payloads):
    _assert_same(payloads)


def test_non_utf8_key_falls_back_to_protobuf():
    good = pb.Record(num=1, history=pb.HistoryRecord(item=[pb.HistoryItem(nested_key=["ab"], value_json="1")]))
    data = bytearray(good.SerializeToString())
    data[data.index(b"ab")] = 0xFF  # an invalid UTF-8 key: protobuf rejects the record
    payloads = [good.SerializeToString(), bytes(data)]
    _assert_same(payloads)
    (keys, values, _), _, warnings, _ = _both(payloads)
    assert keys == ["ab"] and values.shape == (1, 1)
    assert len(warnings) == 1 and "undecodable history record" in warnings[0]


def test_many_random_rows_match(tmp_path):
    rnd = random.Random(3)
    payloads = []
    for n in range(500):
        h = pb.HistoryRecord()
        for k in rnd.sample([f"m{i}" for i in range(40)], rnd.randint(1, 40)):
            h.item.add(nested_key=[k], value_json=repr(rnd.uniform(-1e6, 1e6)))
        payloads.append(pb.Record(num=n, history=h).SerializeToString())
    _assert_same(payloads)


_INTERESTING = (wo.FIELD_HISTORY, wo.FIELD_SUMMARY, wo.FIELD_CONFIG, wo.FIELD_RUN, wo.FIELD_EXIT)


def _interesting(field: int) -> int:
    return field if field in _INTERESTING else 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40), _records().map(lambda ps: b"".join(ps))), max_size=8))
def test_record_fields_in_bulk_equal_record_field(payloads):
    lengths = np.array([len(p) for p in payloads], dtype=np.int64)
    ends = np.cumsum(lengths)
    got = wire.record_fields(b"".join(payloads), ends - lengths, ends)
    assert [_interesting(int(f)) for f in got] == [_interesting(wo.record_field(p)) for p in payloads]


def test_record_fields_of_real_records(workspace):
    for path in sorted(workspace.rglob("run-*.wandb"))[:4]:
        data, starts, ends = wo.scan_records(path.read_bytes(), lambda m: None)
        expected = [wo.record_field(data[s:e]) for s, e in zip(starts, ends)]
        assert wire.record_fields(data, starts, ends).tolist() == expected
        assert {wo.FIELD_HISTORY, wo.FIELD_RUN, wo.FIELD_EXIT} <= set(expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 70_000), min_size=1, max_size=6), st.integers(0, 2**31), st.randoms())
def test_scan_records_equals_iter_records_on_damaged_logs(sizes, cut, rnd):
    from wandb_workspace import frame_records

    payloads = [bytes([rnd.randrange(256) for _ in range(min(n, 50))]) * (n // 50 + 1) for n in sizes]
    blob = bytearray(frame_records([p[: n] for p, n in zip(payloads, sizes)]))
    for _ in range(rnd.randrange(3)):  # flip bytes after the file header (chunk headers, payloads)
        blob[rnd.randrange(wo.HEADER_LEN, len(blob))] ^= 1 << rnd.randrange(8)
    blob = bytes(blob[: len(blob) - cut % 4000])
    w1: list[str] = []
    w2: list[str] = []
    expected = list(wo.iter_records(blob, w1.append))
    data, starts, ends = wo.scan_records(blob, w2.append)
    assert [data[s:e] for s, e in zip(starts, ends)] == expected
    assert w1 == w2

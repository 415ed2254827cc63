"""Vectorized decoding of W&B history records: the bytes of many serialized ``Record``s → the
(row, key, value) triples of their ``history.item``s, without a Python object per item.

The walker below (over the protobuf wire format of :mod:`arctl.track.wandbfile.wire`) advances
one field of EVERY message per numpy step, so its cost is a few array operations
per field position instead of Python work per item. It decodes only the shape wandb writes:

    Record        num=1 (varint) | history=2
    HistoryRecord item=1 (repeated) | step=2 (HistoryStep num=1, a varint)
    HistoryItem   key=1 | nested_key=2 (one part) | value_json=16

A record with anything else in it (another oneof field, a typed value field of HistoryItem, a key
of several nested parts, a malformed length) is reported as *irregular*; the caller decodes those
records with protobuf, so the result is always the protobuf decoder's. Keys are dictionary-encoded
and JSON numbers parsed by pyarrow (C) from the raw bytes; values that are not plain numbers
(``true``, strings, media dicts) go through :func:`_to_float` one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from arctl.track.wandbfile.wire import varint, varints

# field numbers (checked against the installed wandb_internal.proto by a test)
RECORD_NUM, RECORD_HISTORY = 1, 2
HISTORY_ITEM, HISTORY_STEP = 1, 2
STEP_NUM = 1
ITEM_KEY, ITEM_NESTED_KEY, ITEM_VALUE_JSON = 1, 2, 16

@dataclass
class _Fields:
    """Every field of a set of messages: owner message, position k in it, field number, wire type,
    value range [start, end) (for wire 2 the payload, else the encoded value)."""

    owner: np.ndarray
    k: np.ndarray
    field: np.ndarray
    wire: np.ndarray
    start: np.ndarray
    end: np.ndarray


_FEW = 8  # messages still being walked below which the walk finishes in plain Python


def _walk_few(a: np.ndarray, msgs: list[int], cur: np.ndarray, end: np.ndarray, k0: int,
              bad: np.ndarray) -> tuple:
    """The rest of :func:`_walk` for a few messages, one field at a time (a long message, e.g. a
    final evaluation of 200 metrics, would otherwise cost one numpy round per field)."""
    out: list[tuple] = []
    for m in msgs:
        pos, e, k = int(cur[m]), int(end[m]), k0
        while pos < e:
            tag, p2, ok = varint(a, pos)
            field, wire = tag >> 3, tag & 7
            vs = ve = p2
            if wire == 0:
                _, ve, ok0 = varint(a, p2)
                ok &= ok0
            elif wire == 2:
                length, vs, ok2 = varint(a, p2)
                ve = vs + length
                ok &= ok2
            elif wire == 1:
                ve = p2 + 8
            elif wire == 5:
                ve = p2 + 4
            ok = ok and wire in (0, 1, 2, 5) and ve <= e and field > 0
            out.append((m, k, field, wire, vs, ve))
            if not ok:
                bad[m] = True
                break
            pos, k = ve, k + 1
    if not out:
        return ()
    return tuple(np.array(c, dtype=np.int64) for c in zip(*out))


def _walk(a: np.ndarray, start: np.ndarray, end: np.ndarray, bad: np.ndarray) -> _Fields:
    """The fields of the messages ``a[start[i]:end[i]]``; sets ``bad[i]`` for a message whose
    framing is broken (unknown wire type, a length past its end, an endless varint)."""
    cur = start.copy()
    idx = np.flatnonzero(cur < end)
    parts: list[tuple] = []
    k = 0
    while idx.size:
        if idx.size <= _FEW and k > 0:
            tail = _walk_few(a, idx.tolist(), cur, end, k, bad)
            if tail:
                parts.append(tail)
            break
        p, e = cur[idx], end[idx]
        tag, p2, ok = varints(a, p)
        field, wire = tag >> 3, tag & 7
        vs, ve = p2, p2.copy()
        w0 = np.flatnonzero(wire == 0)
        if w0.size:
            _, q, ok0 = varints(a, p2[w0])
            ve[w0] = q
            ok[w0] &= ok0
        w2 = np.flatnonzero(wire == 2)
        if w2.size:
            length, q, ok2 = varints(a, p2[w2])
            vs = p2.copy()
            vs[w2] = q
            ve[w2] = q + length
            ok[w2] &= ok2
        ve[wire == 1] += 8
        ve[wire == 5] += 4
        ok &= (wire <= 2) | (wire == 5)
        ok &= (ve <= e) & (field > 0)
        parts.append((idx, np.full(idx.size, k, dtype=np.int64), field, wire, vs, ve))
        bad[idx[~ok]] = True
        cur[idx] = ve
        idx = idx[ok & (ve < e)]
        k += 1
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return _Fields(z, z, z, z, z, z)
    cols = [np.concatenate(c) for c in zip(*parts)]
    return _Fields(*cols)


def _only(f: _Fields, allowed: dict[int, int], n_msgs: int, bad: np.ndarray) -> None:
    """Mark ``bad`` every message with a field outside ``allowed`` (field → wire type)."""
    fine = np.zeros(len(f.field), dtype=bool)
    for num, wire in allowed.items():
        fine |= (f.field == num) & (f.wire == wire)
    bad[f.owner[~fine]] = True


def _count(owner: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(owner[mask], minlength=n)


def _slices(buf: bytes | np.ndarray, start: np.ndarray, end: np.ndarray):
    """pyarrow LargeBinaryArray of ``buf[start[i]:end[i]]`` (slices in increasing, non-overlapping
    order), built without a Python object per slice: the gaps between slices are elements too."""
    import pyarrow as pa

    n = len(start)
    offsets = np.empty(2 * n + 1, dtype=np.int64)
    offsets[0:-1:2] = start
    offsets[1::2] = end
    offsets[-1] = end[-1] if n else 0
    if n:
        offsets -= start[0]
        base = int(start[0])
        data = pa.py_buffer(memoryview(buf)[base : base + int(offsets[-1])])
    else:
        data = pa.py_buffer(b"")
    both = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(offsets), data])
    return both.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))


@dataclass
class HistoryItems:
    """Decoded items of the regular history records, in file order (record, then item)."""

    record: np.ndarray  # index of the record (in the input order) each item belongs to
    code: np.ndarray  # index into ``keys``
    keys: list[str]  # in order of first appearance
    values: np.ndarray  # float64; NaN where the value is not a number or is a logged NaN
    nan: np.ndarray  # bool; the value is a logged NaN (its text is ``NaN``), not a value that is no number
    irregular: np.ndarray  # indices of the records the walker did not decode (use protobuf)


def decode_history(joined: bytes, starts: np.ndarray, ends: np.ndarray,
                   to_float: Callable[[str], float],
                   nan_flags: Callable[[np.ndarray, Callable[[int], str]], np.ndarray]) -> HistoryItems:
    """Items of the history records ``joined[starts[i]:ends[i]]`` (serialized ``Record``s).

    ``to_float`` converts a value_json text that is not a plain JSON number (the reader's rule);
    ``nan_flags(values, text_of)`` says which NaN values are logged NaNs (the reader's rule).
    Raises ``ValueError`` when a key or value is not UTF-8 (the caller then uses protobuf).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n_rec = len(starts)
    a = np.frombuffer(joined, dtype=np.uint8)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    bad = np.zeros(n_rec, dtype=bool)

    # Record → its history field
    rf = _walk(a, starts, ends, bad)
    _only(rf, {RECORD_NUM: 0, RECORD_HISTORY: 2}, n_rec, bad)
    is_h = rf.field == RECORD_HISTORY
    bad |= _count(rf.owner, is_h, n_rec) != 1  # a second history field would be merged: leave it to protobuf
    h_owner = rf.owner[is_h]
    h_start = np.zeros(n_rec, dtype=np.int64)
    h_end = np.zeros(n_rec, dtype=np.int64)
    h_start[h_owner] = rf.start[is_h]
    h_end[h_owner] = rf.end[is_h]
    h_end[bad] = h_start[bad]  # do not walk broken records any further

    # HistoryRecord → items
    hf = _walk(a, h_start, h_end, bad)
    _only(hf, {HISTORY_ITEM: 2, HISTORY_STEP: 2}, n_rec, bad)
    is_step = hf.field == HISTORY_STEP
    if is_step.any():  # HistoryStep holds one varint; anything else goes to protobuf
        s_owner = hf.owner[is_step]
        s_bad = np.zeros(len(s_owner), dtype=bool)
        sf = _walk(a, hf.start[is_step], hf.end[is_step], s_bad)
        _only(sf, {STEP_NUM: 0}, len(s_owner), s_bad)
        bad[s_owner[s_bad]] = True
    # file order of the items: by record, then by position in the record — the items must be the
    # record's first fields (wandb writes the step after them); other layouts go to protobuf
    is_item = hf.field == HISTORY_ITEM
    max_k = np.full(n_rec, -1, dtype=np.int64)
    np.maximum.at(max_k, hf.owner[is_item], hf.k[is_item])
    bad |= max_k + 1 != np.bincount(hf.owner[is_item], minlength=n_rec)
    is_item &= ~bad[hf.owner]
    it_owner, it_k = hf.owner[is_item], hf.k[is_item]
    per_rec = np.bincount(it_owner, minlength=n_rec)
    first = np.concatenate([[0], np.cumsum(per_rec)[:-1]]) if n_rec else per_rec
    order = np.empty(len(it_owner), dtype=np.int64)
    order[first[it_owner] + it_k] = np.arange(len(it_owner))
    it_owner = it_owner[order]
    it_start = hf.start[is_item][order]
    it_end = hf.end[is_item][order]

    # HistoryItem → key and value_json ranges
    n_it = len(it_owner)
    it_bad = np.zeros(n_it, dtype=bool)
    f = _walk(a, it_start, it_end, it_bad)
    _only(f, {ITEM_KEY: 2, ITEM_NESTED_KEY: 2, ITEM_VALUE_JSON: 2}, n_it, it_bad)
    n_key = _count(f.owner, f.field == ITEM_KEY, n_it)
    n_nested = _count(f.owner, f.field == ITEM_NESTED_KEY, n_it)
    n_value = _count(f.owner, f.field == ITEM_VALUE_JSON, n_it)
    it_bad |= (n_value > 1) | (n_key > 1) | (n_nested > 1) | ((n_key == 0) == (n_nested == 0))  # exactly one key
    k_start = np.zeros(n_it, dtype=np.int64)
    k_end = np.zeros(n_it, dtype=np.int64)
    for num in (ITEM_KEY, ITEM_NESTED_KEY):
        m = f.field == num
        k_start[f.owner[m]] = f.start[m]
        k_end[f.owner[m]] = f.end[m]
    v_start = it_end.copy()  # no value_json: empty text
    v_end = it_end.copy()
    m = f.field == ITEM_VALUE_JSON
    v_start[f.owner[m]] = f.start[m]
    v_end[f.owner[m]] = f.end[m]
    if it_bad.any():
        bad[it_owner[it_bad]] = True
    keep = ~bad[it_owner]
    it_owner, k_start, k_end, v_start, v_end = (x[keep] for x in (it_owner, k_start, k_end, v_start, v_end))

    # keys: dictionary encoding in order of first appearance
    if len(it_owner):
        enc = pc.dictionary_encode(_slices(joined, k_start, k_end).cast(pa.large_string()))
        code = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        keys = [k for k in enc.dictionary.to_pylist()]
    else:
        code, keys = np.zeros(0, dtype=np.int64), []

    # values: plain JSON numbers in bulk, anything else one by one
    values = np.full(len(it_owner), np.nan)
    length = v_end - v_start
    lead = a[np.minimum(v_start, len(a) - 1)]
    numeric = (length > 0) & (length <= 64) & (((lead >= 0x30) & (lead <= 0x39)) | (lead == 0x2D)
                                             | (lead == 0x4E) | (lead == 0x49))  # digit - N(aN) I(nfinity)
    num_idx = np.flatnonzero(numeric)
    if num_idx.size:
        texts = _slices(joined, v_start[num_idx], v_end[num_idx])
        try:
            values[num_idx] = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            numeric[:] = False  # let the slow rule decide every value
    other = np.flatnonzero(~numeric & (length > 0))
    mv = memoryview(joined)
    for i in other.tolist():
        values[i] = to_float(bytes(mv[v_start[i] : v_end[i]]).decode("utf-8"))
    nan = nan_flags(values, lambda i: bytes(mv[v_start[i] : v_end[i]]).decode("utf-8"))
    return HistoryItems(record=it_owner, code=code, keys=keys, values=values, nan=nan, irregular=np.flatnonzero(bad))

"""The protobuf wire format, as far as the reader walks it without protobuf: varints, and the
record type (the field number of the ``Record`` oneof) of serialized ``Record``s.

A protobuf message is a sequence of fields ``tag varint | value`` (``tag = field << 3 | wire``;
wire 0 a varint, 1 eight bytes, 2 a varint length then that many bytes, 5 four bytes).

One varint decoder, in two forms with the same rules and results: :func:`varint` at one position
(plain Python) and :func:`varints` at many positions at once (numpy, for the bulk decoders).
"""

from __future__ import annotations

import numpy as np

# field numbers of wandb_internal.proto Record (checked against the installed proto by a test)
FIELD_HISTORY = 2
FIELD_SUMMARY = 3
FIELD_CONFIG = 5
FIELD_RUN = 17
FIELD_EXIT = 18
NON_ONEOF = (1, 16, 19, 200)  # Record fields outside the record-type oneof: num, control, uuid, _info

MAX_VARINT = 10  # bytes of the longest varint of a valid message
LONG_VARINT = 32  # record_fields skips varints up to this long (record_field has no limit)


def varint(a: bytes | np.ndarray, p: int, max_len: int = MAX_VARINT) -> tuple[int, int, bool]:
    """(value, position after it, ok) of the varint starting at position ``p`` of ``a`` (bytes or
    a uint8 array); not ok when longer than ``max_len`` bytes or not a non-negative int64 (the
    value then lacks its bits from 63 on). Reads past the data repeat its last byte, so a varint
    cut by the end of the data ends past it (position > ``len(a)``) or is not ok."""
    last = len(a) - 1
    b = int(a[min(p, last)])
    val, n, ok, shift = b & 0x7F, 1, True, 7
    while b & 0x80:
        if shift >= 7 * max_len:
            ok = False
            break
        b = int(a[min(p + n, last)])
        if shift < 63:
            val |= (b & 0x7F) << shift
        elif b & 0x7F:
            ok = False
        n += 1
        shift += 7
    return val, p + n, ok


def varints(a: np.ndarray, p: np.ndarray, max_len: int = MAX_VARINT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`varint` of every position ``p`` of ``a``: (value, position after it, ok) arrays."""
    last = a.size - 1  # reads past the data repeat its last byte: such a varint is never ok
    b = a[np.minimum(p, last)]
    val = (b & 0x7F).astype(np.int64)
    n = np.ones(len(p), dtype=np.int64)
    ok = np.ones(len(p), dtype=bool)
    idx = np.flatnonzero(b & 0x80)
    shift = 7
    while idx.size:
        if shift >= 7 * max_len:
            ok[idx] = False
            break
        bb = a[np.minimum(p[idx] + n[idx], last)]
        if shift < 63:
            val[idx] |= (bb & 0x7F).astype(np.int64) << shift
        else:
            ok[idx[(bb & 0x7F) != 0]] = False
        n[idx] += 1
        idx = idx[(bb & 0x80) != 0]
        shift += 7
    return val, p + n, ok & (val >= 0)


def record_field(payload: bytes) -> int:
    """Field number of the record-type oneof of a serialized Record, read without parsing it
    (skipping the non-oneof fields num=1, control=16, uuid=19, _info=200); 0 if unreadable."""
    i = 0
    n = len(payload)
    unlimited = n + 1  # no length limit: a varint can only end inside the payload or past it
    while i < n:
        tag, i, ok = varint(payload, i, unlimited)
        if i > n or not ok:  # cut by the end of the record, or 2**63 or more: no field number
            return 0
        field, wire = tag >> 3, tag & 7
        if field not in NON_ONEOF:
            return field
        if wire == 0:
            _, i, _ = varint(payload, i, unlimited)  # cut by the end (i > n): the loop ends, 0
        elif wire == 2:
            size, i, ok = varint(payload, i, unlimited)
            if not ok:
                return 0
            i += size
        else:
            return 0
    return 0


def record_fields(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`record_field` of every record ``data[starts[i]:ends[i]]``: the field number of the
    first field that is not num/control/uuid/_info, 0 if unreadable."""
    n_rec = len(starts)
    out = np.zeros(n_rec, dtype=np.int64)
    if not n_rec:
        return out
    a = np.frombuffer(data, dtype=np.uint8)
    cur = np.asarray(starts, dtype=np.int64).copy()
    end = np.asarray(ends, dtype=np.int64)
    idx = np.flatnonzero(cur < end)
    non_oneof = np.array(NON_ONEOF)
    while idx.size:
        e = end[idx]
        tag, p2, ok = varints(a, cur[idx], max_len=LONG_VARINT)
        inside = ok & (p2 <= e)  # a tag cut by the end of the record: unreadable
        field, wire = tag >> 3, tag & 7
        found = inside & ~np.isin(field, non_oneof)
        out[idx[found]] = field[found]
        go = inside & ~found & ((wire == 0) | (wire == 2))
        nxt = p2.copy()
        w = go & (wire == 0)
        if w.any():
            _, q, _ = varints(a, p2[w], max_len=LONG_VARINT)
            nxt[w] = q
            go[w] &= q <= e[w]
        w = go & (wire == 2)
        if w.any():
            length, q, okl = varints(a, p2[w], max_len=LONG_VARINT)
            nxt[w] = q + np.where(okl, length, 0)
            go[w] &= okl & (q <= e[w])
        cur[idx] = nxt
        idx = idx[go & (nxt < e)]
    return out

"""History records → a dense table (keys, values[row, key]): the regular records decoded in bulk
(:mod:`arctl.track.wandbfile.history_bulk`), the others by protobuf one by one, with exactly the
rules of :func:`history_table_protobuf`, the reference it is tested against."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from arctl.track.wandbfile.history_bulk import decode_history
from arctl.track.wandbfile.values import _floats, _item_key, _nan_flags, _to_float

Table = tuple[list[str], np.ndarray, np.ndarray]


def history_table(payloads: list[bytes], warn: Callable[[str], None], where: str = "") -> Table:
    """(keys, values[row, key], nan[row, key]) of the history records ``payloads`` (serialized
    Records), in order: one row per decodable record, columns in order of first appearance; a value is
    NaN where a row did not log a key, its value is not a number (a string, ``null``, media), or it
    logged NaN, and ``nan`` (bool) is True exactly for the last (see :func:`history_table_at`)."""
    lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(lengths)
    return history_table_at(b"".join(payloads), ends - lengths, ends, warn, where)


def history_table_at(data: bytes, starts: np.ndarray, ends: np.ndarray, warn: Callable[[str], None],
                     where: str = "") -> Table:
    """:func:`history_table` of the records ``data[starts[i]:ends[i]]``.

    The regular records (the shape wandb writes) are decoded in bulk by
    :func:`arctl.track.wandbfile.history_bulk.decode_history`; the others by protobuf, one by one,
    with exactly the rules of :func:`history_table_protobuf` (the reference this is tested against).
    """
    n_rec = len(starts)
    if not n_rec:
        return [], np.zeros((0, 0)), np.zeros((0, 0), dtype=bool)

    def payload(r: int) -> bytes:
        return data[int(starts[r]) : int(ends[r])]

    try:
        items = decode_history(data, starts, ends, _to_float, _nan_flags)
    except ValueError:  # a key or value that is not UTF-8: protobuf decides what to keep
        return history_table_protobuf([payload(r) for r in range(n_rec)], warn, where)
    # first appearance of each key: (record, position) — sorts the columns like the reference
    first_at: dict[str, tuple[int, int]] = {}
    if len(items.code):
        runmax = np.maximum.accumulate(items.code)
        firsts = np.flatnonzero(np.concatenate([[True], runmax[1:] > runmax[:-1]]))
        for c, i in enumerate(firsts.tolist()):
            first_at[items.keys[c]] = (int(items.record[i]), i)
    keys_of = items.keys
    rec_parts, col_parts, val_parts, nan_parts = [items.record], [None], [items.values], [items.nan]
    dropped = np.zeros(n_rec, dtype=bool)
    if len(items.irregular):
        from wandb.proto import wandb_internal_pb2 as pb

        for r in items.irregular.tolist():
            try:
                its = pb.Record.FromString(payload(r)).history.item
            except Exception as e:  # a record with an intact checksum that protobuf cannot decode
                warn(f"{where}: undecodable history record ({type(e).__name__}); skipped it")
                dropped[r] = True
                continue
            ks = [(it.nested_key[0] if len(it.nested_key) == 1 else _item_key(it)) for it in its]
            for pos, k in enumerate(ks):
                first_at.setdefault(k, (r, pos))
                if first_at[k] > (r, pos):
                    first_at[k] = (r, pos)
            rec_parts.append(np.full(len(ks), r, dtype=np.int64))
            col_parts.append(ks)
            val_parts.append(_floats([it.value_json for it in its]))
            nan_parts.append(_nan_flags(val_parts[-1], lambda i, its=its: its[i].value_json))
    columns = sorted(first_at, key=first_at.__getitem__)
    col_index = {k: j for j, k in enumerate(columns)}
    code_to_col = np.array([col_index[k] for k in keys_of], dtype=np.int64)
    cols = [code_to_col[items.code] if len(keys_of) else np.zeros(0, dtype=np.int64)]
    cols += [np.array([col_index[k] for k in ks], dtype=np.int64) for ks in col_parts[1:]]
    row_of_record = np.cumsum(~dropped) - 1
    values = np.full((int((~dropped).sum()), len(columns)), np.nan)
    nan = np.zeros(values.shape, dtype=bool)
    for rec, col, val, flag in zip(rec_parts, cols, val_parts, nan_parts):
        if len(rec):
            values[row_of_record[rec], col] = val
            nan[row_of_record[rec], col] = flag  # a later item of one key in one record wins, as for values
    return columns, values, nan


class TableBuilder:
    """A history table built chunk by chunk: :meth:`add` takes the table of the next records (a
    :func:`history_table_at` of a slice of them), :meth:`build` gives the table of all of them,
    identical to one :func:`history_table_at` over every record (rows in order; columns in order of
    first appearance, which is the order the chunks add them in). It keeps each chunk's table (its
    own columns only, so together no bigger than the result) and frees them while it fills the
    result: the peak is about the result plus one chunk's decoding, not the decoding of the file."""

    def __init__(self) -> None:
        self.columns: list[str] = []
        self._col: dict[str, int] = {}
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, table: Table) -> None:
        keys, values, nan = table
        if not len(values):
            return
        for k in keys:
            if k not in self._col:
                self._col[k] = len(self.columns)
                self.columns.append(k)
        cols = np.array([self._col[k] for k in keys], dtype=np.int64)
        self._blocks.append((values, nan, cols))

    def build(self) -> Table:
        if not self._blocks:
            return [], np.zeros((0, 0)), np.zeros((0, 0), dtype=bool)
        n_rows = sum(len(b[0]) for b in self._blocks)
        shape = (n_rows, len(self.columns))
        values = np.empty(shape)  # pages are touched as the blocks fill them
        nan = np.empty(shape, dtype=bool)
        blocks, self._blocks = self._blocks[::-1], []
        r = 0
        while blocks:
            v, f, cols = blocks.pop()
            rows = slice(r, r + len(v))
            values[rows] = np.nan
            nan[rows] = False
            values[rows, cols] = v
            nan[rows, cols] = f
            r += len(v)
            del v, f
        return self.columns, values, nan


def history_table_protobuf(payloads: list[bytes], warn: Callable[[str], None], where: str = "") -> Table:
    """:func:`history_table` decoded by protobuf, one record at a time (the slow reference)."""
    from wandb.proto import wandb_internal_pb2 as pb

    Record = pb.Record
    row_of: list[int] = []
    key_of: list[str] = []
    text_of: list[str] = []
    n_rows = 0
    for payload in payloads:
        try:
            items = Record.FromString(payload).history.item
        except Exception as e:  # a record with an intact checksum that protobuf cannot decode
            warn(f"{where}: undecodable history record ({type(e).__name__}); skipped it")
            continue
        for it in items:
            nk = it.nested_key
            key_of.append(nk[0] if len(nk) == 1 else _item_key(it))
            text_of.append(it.value_json)
        row_of.extend([n_rows] * len(items))
        n_rows += 1
    col_index: dict[str, int] = {}
    cols = [col_index.setdefault(k, len(col_index)) for k in key_of]
    values = np.full((n_rows, len(col_index)), np.nan)
    nan = np.zeros(values.shape, dtype=bool)
    if key_of:
        at = np.asarray(row_of, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        values[at] = _floats(text_of)
        nan[at] = [_numeric(t) and math.isnan(float(t)) for t in text_of]
    return list(col_index), values, nan


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

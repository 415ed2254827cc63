"""Reader for W&B offline transaction logs (``run-<id>.wandb``), the only source of truth of an
offline run in wandb 0.31 (see docs/metrics.md and the wandb-offline note).

File layout: a 7-byte header (``b":W&B"``, magic 0xBEE1 little-endian, version 0), then the
LevelDB log format: 32 KiB blocks (block offsets counted from the start of the file), each a
sequence of chunks ``crc u32 | length u16 | type u8 | data`` with type FULL=1, FIRST=2, MIDDLE=3,
LAST=4 and zero padding when fewer than 7 bytes are left in a block. A logical record (FULL, or
FIRST+MIDDLE*+LAST) is a serialized ``wandb.proto.wandb_internal_pb2.Record``.

The checksum covers ``type byte + data``. wandb-core writes the IEEE CRC-32 (``zlib.crc32``)
there, while the LevelDB specification says CRC-32C (Castagnoli); both are accepted.

A truncated or corrupt file never raises: every intact record is kept and the damage is reported
in :attr:`RunData.warnings` (a chunk with a bad checksum or impossible length drops the rest of
its block, as LevelDB readers do; a record cut by the end of the file is dropped).
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from arctl.track.run_data import RunData

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
HEADER_LEN = 7
BLOCK_LEN = 32768
CHUNK_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# field numbers of wandb_internal.proto Record (checked against the installed proto by a test)
FIELD_HISTORY = 2
FIELD_SUMMARY = 3
FIELD_CONFIG = 5
FIELD_RUN = 17
FIELD_EXIT = 18

_CHUNK = struct.Struct("<IHB")


class WandbFileError(ValueError):
    """The file is not a W&B transaction log at all (wrong header)."""


# ---------------------------------------------------------------------------------------------
# checksums
_CRC32C_TABLE: list[int] = []


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), pure Python; used only as a fallback
    when the IEEE CRC-32 does not match, so its speed does not matter."""
    if not _CRC32C_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC32C_TABLE.append(c)
    table = _CRC32C_TABLE
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(256)]


def _checksum_ok(expected: int, chunk_type: int, data: bytes | memoryview) -> bool:
    if zlib.crc32(data, _TYPE_CRC[chunk_type]) == expected:
        return True
    return crc32c(bytes([chunk_type]) + bytes(data)) == expected


# ---------------------------------------------------------------------------------------------
# framing
def iter_records(buf: bytes, warn: Callable[[str], None], where: str = "") -> Iterator[bytes]:
    """Yield the payload of every intact logical record of a .wandb byte string.

    Raises :class:`WandbFileError` only when the header is wrong; damage after the header goes to
    ``warn`` and the intact records around it are still yielded.
    """
    for rec in _frame(buf, warn, where):
        yield buf[rec[0] : rec[1]] if isinstance(rec, tuple) else rec


def scan_records(buf: bytes, warn: Callable[[str], None], where: str = "") -> tuple[bytes, np.ndarray, np.ndarray]:
    """(data, starts, ends): the intact records of :func:`iter_records`, in order, as
    ``data[starts[i]:ends[i]]`` without a copy per record (``data`` is ``buf`` followed by the
    records that span several chunks, joined)."""
    starts: list[int] = []
    ends: list[int] = []
    extra: list[bytes] = []
    n = len(buf)
    for rec in _frame(buf, warn, where):
        if isinstance(rec, tuple):
            starts.append(rec[0])
            ends.append(rec[1])
        else:
            starts.append(n)
            n += len(rec)
            ends.append(n)
            extra.append(rec)
    data = b"".join([buf, *extra]) if extra else buf
    return data, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _frame(buf: bytes, warn: Callable[[str], None], where: str) -> Iterator[tuple[int, int] | bytes]:
    """The framing of :func:`iter_records`: a FULL record as its (start, end) in ``buf``, a record
    of several chunks as its joined bytes."""
    n = len(buf)
    if n < HEADER_LEN:
        if n:
            warn(f"{where}: file is {n} bytes, shorter than the 7-byte W&B header; no records")
        else:
            warn(f"{where}: file is empty (the run was killed before its first flush); no records")
        return
    if buf[:4] != HEADER[:4] or buf[4:6] != HEADER[4:6]:
        raise WandbFileError(f"{where}: not a W&B transaction log (header {buf[:7]!r}, expected {HEADER!r})")
    if buf[6] != 0:
        warn(f"{where}: unknown .wandb format version {buf[6]}; reading it as version 0")
    pos = HEADER_LEN
    pending: list[bytes] | None = None
    unpack = _CHUNK.unpack_from
    view = memoryview(buf)
    crc32, type_crc = zlib.crc32, _TYPE_CRC
    while pos < n:
        left = BLOCK_LEN - pos % BLOCK_LEN
        if left < CHUNK_HEADER_LEN:  # block trailer (zero padding)
            pos += left
            continue
        if pos + CHUNK_HEADER_LEN > n:
            if any(buf[pos:n]):
                warn(f"{where}: truncated chunk header at byte {pos} (file ends at {n})")
            break
        crc, length, ctype = unpack(buf, pos)
        if ctype == 0 and length == 0:  # zero padding / preallocated space: skip the block
            if crc != 0:
                warn(f"{where}: corrupt chunk header at byte {pos}; skipping the rest of its block")
                pending = None
            pos += left
            continue
        end = pos + CHUNK_HEADER_LEN + length
        if ctype not in (FULL, FIRST, MIDDLE, LAST) or CHUNK_HEADER_LEN + length > left:
            warn(f"{where}: corrupt chunk (type {ctype}, length {length}) at byte {pos}; "
                 "skipping the rest of its block")
            pending = None
            pos += left
            continue
        if end > n:
            warn(f"{where}: file truncated inside a record at byte {pos} (chunk needs {end - n} more "
                 "bytes); kept the records before it")
            pending = None
            break
        data = view[pos + CHUNK_HEADER_LEN : end]
        if crc32(data, type_crc[ctype]) != crc and not _checksum_ok(crc, ctype, data):
            warn(f"{where}: checksum mismatch at byte {pos}; skipping the rest of its block")
            pending = None
            pos += left
            continue
        start, pos = pos + CHUNK_HEADER_LEN, end
        if ctype == FULL:
            if pending is not None:
                warn(f"{where}: record before byte {pos} has no LAST chunk; dropped it")
                pending = None
            yield start, end
        elif ctype == FIRST:
            if pending is not None:
                warn(f"{where}: record before byte {pos} has no LAST chunk; dropped it")
            pending = [bytes(data)]
        elif ctype == MIDDLE:
            if pending is None:
                warn(f"{where}: MIDDLE chunk without FIRST at byte {pos}; dropped it")
            else:
                pending.append(bytes(data))
        else:  # LAST
            if pending is None:
                warn(f"{where}: LAST chunk without FIRST at byte {pos}; dropped it")
            else:
                pending.append(bytes(data))
                yield b"".join(pending)
                pending = None
    if pending is not None:
        warn(f"{where}: file ends inside a multi-chunk record; dropped it")


def record_field(payload: bytes) -> int:
    """Field number of the record-type oneof of a serialized Record, read without parsing it
    (skipping the non-oneof fields num=1, control=16, uuid=19, _info=200); 0 if unreadable."""
    i = 0
    n = len(payload)
    try:
        while i < n:
            tag, i = _varint(payload, i)
            field, wire = tag >> 3, tag & 7
            if field not in _NON_ONEOF:
                return field
            if wire == 0:
                _, i = _varint(payload, i)
            elif wire == 2:
                size, i = _varint(payload, i)
                i += size
            else:
                return 0
    except IndexError:
        return 0
    return 0


_NON_ONEOF = frozenset((1, 16, 19, 200))


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


# ---------------------------------------------------------------------------------------------
# values
_JSON_CONSTANTS = {"true": 1.0, "false": 0.0, "null": math.nan}


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    c = _JSON_CONSTANTS.get(text)
    if c is not None:
        return c
    try:
        v = json.loads(text)
    except ValueError:
        return math.nan
    if isinstance(v, bool | int | float):
        return float(v)
    return math.nan  # strings, media, tables: not a number


def _floats(texts: list[str]) -> np.ndarray:
    try:
        return np.array(texts, dtype=np.float64)
    except ValueError:
        return np.array([_to_float(t) for t in texts], dtype=np.float64)


def _json_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _item_key(item) -> str:
    nk = item.nested_key
    return ".".join(nk) if nk else item.key


def _set_nested(d: dict, key_parts: list[str], value) -> None:
    for part in key_parts[:-1]:
        d = d.setdefault(part, {})
        if not isinstance(d, dict):
            return
    d[key_parts[-1]] = value


def _config_value(v):
    # wandb-core config items are the raw values; the legacy format wrapped them in {"value": x}
    if isinstance(v, dict) and set(v) <= {"value", "desc"} and "value" in v:
        return v["value"]
    return v


def _apply_config(config: dict, items) -> None:
    for it in items:
        parts = list(it.nested_key) or [it.key]
        if parts[0] == "_wandb":
            continue
        _set_nested(config, parts, _config_value(_json_value(it.value_json)))


# ---------------------------------------------------------------------------------------------
# history records → dense table
def history_table(payloads: list[bytes], warn: Callable[[str], None], where: str = "") -> tuple[list[str], np.ndarray]:
    """(keys, values[row, key]) of the history records ``payloads`` (serialized Records), in order:
    one row per decodable record, columns in order of first appearance, NaN where a row did not
    log a key or its value is not a number (see :func:`history_table_at`)."""
    lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(lengths)
    return history_table_at(b"".join(payloads), ends - lengths, ends, warn, where)


def history_table_at(data: bytes, starts: np.ndarray, ends: np.ndarray, warn: Callable[[str], None],
                     where: str = "") -> tuple[list[str], np.ndarray]:
    """:func:`history_table` of the records ``data[starts[i]:ends[i]]``.

    The regular records (the shape wandb writes) are decoded in bulk by
    :func:`arctl.track.wandb_history.decode_history`; the others by protobuf, one by one, with
    exactly the rules of :func:`history_table_protobuf` (the reference this is tested against).
    """
    from arctl.track.wandb_history import decode_history

    n_rec = len(starts)
    if not n_rec:
        return [], np.zeros((0, 0))

    def payload(r: int) -> bytes:
        return data[int(starts[r]) : int(ends[r])]

    try:
        items = decode_history(data, starts, ends, _to_float)
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
    rec_parts, col_parts, val_parts = [items.record], [None], [items.values]
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
    columns = sorted(first_at, key=first_at.__getitem__)
    col_index = {k: j for j, k in enumerate(columns)}
    code_to_col = np.array([col_index[k] for k in keys_of], dtype=np.int64)
    cols = [code_to_col[items.code] if len(keys_of) else np.zeros(0, dtype=np.int64)]
    cols += [np.array([col_index[k] for k in ks], dtype=np.int64) for ks in col_parts[1:]]
    row_of_record = np.cumsum(~dropped) - 1
    values = np.full((int((~dropped).sum()), len(columns)), np.nan)
    for rec, col, val in zip(rec_parts, cols, val_parts):
        if len(rec):
            values[row_of_record[rec], col] = val
    return columns, values


def history_table_protobuf(payloads: list[bytes], warn: Callable[[str], None],
                           where: str = "") -> tuple[list[str], np.ndarray]:
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
    if key_of:
        values[np.asarray(row_of, dtype=np.int64), np.asarray(cols, dtype=np.int64)] = _floats(text_of)
    return list(col_index), values


# ---------------------------------------------------------------------------------------------
SUMMARY_TAIL = 64


def read_wandb_file(path: str | Path, *, summary: bool = True) -> RunData:
    """Parse one ``run-<id>.wandb`` file into a :class:`RunData` (history, config, summary, run
    metadata, exit state).

    ``summary=False`` (the bulk reader's choice) skips decoding most summary records — wandb-core
    writes one per logged step, so they cost as much as the history: the summary is then the last
    logged history value of each key, overlaid with the last :data:`SUMMARY_TAIL` summary records
    (which hold any explicit ``run.summary[...]`` set at the end of a run). Only a summary-only key
    set before those last records and never again is missed."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    where = str(path)
    warnings: list[str] = []
    buf = path.read_bytes()
    wandb_id = path.stem[4:] if path.stem.startswith("run-") else path.stem
    run = RunData(wandb_id=wandb_id, source=where, warnings=warnings)

    from arctl.track.wandb_history import record_fields

    Record = pb.Record
    data, starts, ends = scan_records(buf, warnings.append, where)
    fields = record_fields(data, starts, ends)
    is_history = fields == FIELD_HISTORY
    wanted = np.isin(fields, (FIELD_CONFIG, FIELD_RUN, FIELD_EXIT) + ((FIELD_SUMMARY,) if summary else ()))
    # the last summary records when summary=False
    tail = [] if summary else np.flatnonzero(fields == FIELD_SUMMARY)[-SUMMARY_TAIL:].tolist()
    summ: dict = {}
    for r in np.flatnonzero(wanted).tolist():
        field = int(fields[r])
        try:
            rec = Record.FromString(data[int(starts[r]) : int(ends[r])])
        except Exception as e:  # a record with an intact checksum that protobuf cannot decode
            warnings.append(f"{where}: undecodable record ({type(e).__name__}); skipped it")
            continue
        if field == FIELD_SUMMARY:
            for it in rec.summary.update:
                summ[_item_key(it)] = it.value_json
            for it in rec.summary.remove:
                summ.pop(_item_key(it), None)
        elif field == FIELD_CONFIG:
            _apply_config(run.config, rec.config.update)
        elif field == FIELD_RUN:
            r_ = rec.run
            run.wandb_id = r_.run_id or run.wandb_id
            run.project, run.entity, run.group, run.name = r_.project, r_.entity, r_.run_group, r_.display_name
            run.start_time = r_.start_time.seconds + r_.start_time.nanos * 1e-9
            run.rewind_step = rewind_of(r_)
            _apply_config(run.config, r_.config.update)
        elif field == FIELD_EXIT:
            run.exit_code = int(rec.exit.exit_code)
            run.runtime_s = float(rec.exit.runtime) if rec.exit.runtime else None
            run.state = "finished" if run.exit_code == 0 else "failed"

    run.keys, run.values = history_table_at(data, starts[is_history], ends[is_history], warnings.append, where)

    if summary:
        run.summary = {k: _json_value(v) for k, v in summ.items() if not k.startswith("_wandb")}
    else:
        if run.values.size:
            logged = ~np.isnan(run.values)
            last = len(run.values) - 1 - np.argmax(logged[::-1], axis=0)
            for j, k in enumerate(run.keys):
                if logged[last[j], j] and not k.startswith("_"):
                    run.summary[k] = float(run.values[last[j], j])
        for r in tail:
            try:
                rec = Record.FromString(data[int(starts[r]) : int(ends[r])]).summary
            except Exception:
                continue
            for it in rec.update:
                key = _item_key(it)
                if not key.startswith("_"):
                    run.summary[key] = _json_value(it.value_json)
            for it in rec.remove:
                run.summary.pop(_item_key(it), None)
    if run.state == "incomplete":
        warnings.append(f"{where}: no exit record (run still running, killed or crashed)")
    return run


def read_wandb_header(path: str | Path, max_bytes: int = 4 * BLOCK_LEN) -> RunData:
    """Run metadata and config from the first records of a .wandb file, without the history
    (cheap way to learn a run's experiment/arm/seed when it has no config.yaml)."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    with open(path, "rb") as f:
        buf = f.read(max_bytes)
    run = RunData(wandb_id=path.stem[4:] if path.stem.startswith("run-") else path.stem, source=str(path))
    for payload in iter_records(buf, lambda msg: None, str(path)):
        field = record_field(payload)
        if field == FIELD_RUN:
            r = pb.Record.FromString(payload).run
            run.wandb_id = r.run_id or run.wandb_id
            run.project, run.entity, run.group, run.name = r.project, r.entity, r.run_group, r.display_name
            run.start_time = r.start_time.seconds + r.start_time.nanos * 1e-9
            run.rewind_step = rewind_of(r)
            _apply_config(run.config, r.config.update)
        elif field == FIELD_CONFIG:
            _apply_config(run.config, pb.Record.FromString(payload).config.update)
        elif field == FIELD_HISTORY:
            break
    return run


def rewind_of(run_record) -> int | None:
    """The ``_step`` a fragment rewound its own run to (``wandb.init(resume_from="<id>?_step=N")``
    writes ``branch_point {run: <id>, metric: "_step", value: N}`` into its run record), or None.
    A branch point naming another run is a fork, not a rewind of this one."""
    bp = getattr(run_record, "branch_point", None)
    if bp is None or not bp.run or bp.run != run_record.run_id or bp.metric != "_step":
        return None
    return int(bp.value)

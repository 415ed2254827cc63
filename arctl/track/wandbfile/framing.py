"""The framing of W&B offline transaction logs (``run-<id>.wandb``): header, LevelDB-style log
blocks and chunks, checksums → the payloads of the logical records.

File layout: a 7-byte header (``b":W&B"``, magic 0xBEE1 little-endian, version 0), then the
LevelDB log format: 32 KiB blocks (block offsets counted from the start of the file), each a
sequence of chunks ``crc u32 | length u16 | type u8 | data`` with type FULL=1, FIRST=2, MIDDLE=3,
LAST=4 and zero padding when fewer than 7 bytes are left in a block. A logical record (FULL, or
FIRST+MIDDLE*+LAST) is a serialized ``wandb.proto.wandb_internal_pb2.Record``.

The checksum covers ``type byte + data``. wandb-core writes the IEEE CRC-32 (``zlib.crc32``)
there, while the LevelDB specification says CRC-32C (Castagnoli); both are accepted.

Damage after the header never raises: it is reported through ``warn`` (a chunk with a bad
checksum or impossible length drops the rest of its block, as LevelDB readers do; a record cut by
the end of the file is dropped, in a note ending with :data:`TAIL_CUT`) and every intact record is
kept. A file being written ends so most of the time (wandb-core flushes partway through a record),
as does one whose writer was killed: a cut tail is damage only in a file that has its exit record.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator

import numpy as np

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
HEADER_LEN = 7
BLOCK_LEN = 32768
CHUNK_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

_CHUNK = struct.Struct("<IHB")

TAIL_CUT = "the file ends there: dropped that record, kept the ones before it"
"""The end of the note of a record cut by the end of the file: how a file still being written (or whose writer
was killed) looks, not damage unless the file has its exit record (:func:`arctl.track.runs.load.ingest_offline`)."""
NO_RECORDS = "no record read from it"
"""The end of the note of a file from which no record at all could be read (empty, too short, every record
damaged, not a W&B file): the notes a report counts as W&B files that could not be read."""


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
            warn(f"{where}: file is {n} bytes, shorter than the 7-byte W&B header; {NO_RECORDS}")
        else:
            warn(f"{where}: file is empty (the run was killed before its first flush); {NO_RECORDS}")
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
                warn(f"{where}: truncated chunk header at byte {pos} ({n - pos} of its {CHUNK_HEADER_LEN} bytes); "
                     f"{TAIL_CUT}")
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
                 f"bytes); {TAIL_CUT}")
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
        warn(f"{where}: truncated multi-chunk record (no LAST chunk); {TAIL_CUT}")

"""Reader of W&B offline transaction logs (``run-<id>.wandb``), the only source of truth of an
offline run in wandb 0.31 (see docs/metrics.md and the wandb-offline note): one file → a
:class:`RunData` (history, config, summary, run metadata, exit state).

A truncated or corrupt file never raises: every intact record is kept and the damage is reported
in :attr:`RunData.warnings` (see :mod:`arctl.track.wandbfile.framing`). The notes that are a run's
state rather than damage end with :data:`NO_EXIT_RECORD` and :data:`TAIL_CUT` (a file still being
written); those of a file nothing could be read from end with :data:`NO_RECORDS`.
"""

from __future__ import annotations

import mmap
import os
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from arctl.track.metrics_schema import WANDB_STEP_KEY
from arctl.track.run_data import RunData
from arctl.track.wandbfile.framing import (
    BLOCK_LEN,
    HEADER,
    HEADER_LEN,
    NO_RECORDS,
    TAIL_CUT,
    WandbFileError,
    _frame,
    iter_records,
)
from arctl.track.wandbfile.history import TableBuilder, history_table_at
from arctl.track.wandbfile.values import _item_key, _json_value
from arctl.track.wandbfile.wire import (
    FIELD_CONFIG,
    FIELD_EXIT,
    FIELD_HISTORY,
    FIELD_RUN,
    FIELD_SUMMARY,
    record_field,
    record_fields,
)


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


def _apply_run(run, r) -> None:
    """The run record ``r`` (identity, start time, rewind, config) into ``run``."""
    run.wandb_id = r.run_id or run.wandb_id
    run.project, run.entity, run.group, run.name = r.project, r.entity, r.run_group, r.display_name
    run.start_time = r.start_time.seconds + r.start_time.nanos * 1e-9
    run.rewind_step = rewind_of(r)
    _apply_config(run.config, r.config.update)


def _apply_config(config: dict, items) -> None:
    for it in items:
        parts = list(it.nested_key) or [it.key]
        if parts[0] == "_wandb":
            continue
        _set_nested(config, parts, _config_value(_json_value(it.value_json)))


SUMMARY_TAIL = 64
NO_EXIT_RECORD = "no exit record (run still running, killed or crashed)"
"""The end of the warning of a file without the exit record: a run's state, not damage (nor is a record such a
file's end cuts, :data:`TAIL_CUT`, the end of its note; a file nothing was read from: :data:`NO_RECORDS`)."""


CHUNK_BYTES = 4 << 20
CHUNK_RECORDS = 2000
"""The records :func:`read_wandb_file` decodes at a time (whichever limit comes first): its memory is the
history table plus one chunk's decoding (about 8× the chunk's bytes), not the file's."""


def read_wandb_file(path: str | Path, *, summary: bool = True) -> RunData:
    """Parse one ``run-<id>.wandb`` file into a :class:`RunData` (history, config, summary, run
    metadata, exit state).

    ``summary=False`` (the bulk reader's choice) skips decoding most summary records — wandb-core
    writes one per logged step, so they cost as much as the history: the summary is then the last
    logged history value of each key, overlaid with the last :data:`SUMMARY_TAIL` summary records
    (which hold any explicit ``run.summary[...]`` set at the end of a run). Only a summary-only key
    set before those last records and never again is missed.

    The file is mapped, not read into memory, and its records are decoded :data:`CHUNK_RECORDS` (or
    :data:`CHUNK_BYTES`) at a time into a growing table (:class:`~arctl.track.wandbfile.history.TableBuilder`),
    with the same result as decoding them all at once."""
    path = Path(path)
    where = str(path)
    warnings: list[str] = []
    wandb_id = path.stem[4:] if path.stem.startswith("run-") else path.stem
    run = RunData(wandb_id=wandb_id, source=where, warnings=warnings)
    framing: list[str] = []
    reading = _Reading(run, where, summary)
    with _mapped(path) as buf:
        records = _frame(buf, framing.append, where)
        try:
            chunk: list[bytes] = []
            size = done = released = 0  # done: the records before this byte are read (one of several chunks is a copy)
            for rec in records:
                if isinstance(rec, tuple):
                    payload, done = buf[rec[0] : rec[1]], rec[1]
                else:
                    payload = rec
                chunk.append(payload)
                size += len(payload)
                if size >= CHUNK_BYTES or len(chunk) >= CHUNK_RECORDS:
                    reading.add(chunk)
                    chunk, size = [], 0
                    released = _release(buf, released, done)
            reading.add(chunk)
        finally:
            records.close()  # lets go of its views of the mapping before it is closed
    # the notes in the order of one pass over the whole file: framing, records, history
    warnings += framing
    if not reading.n_records and any(not w.endswith((TAIL_CUT, NO_RECORDS)) for w in framing):
        warnings.append(f"{where}: every record is damaged; {NO_RECORDS}")  # (a cut first record: being written)
    warnings += reading.record_notes
    run.keys, run.values, nan = reading.table.build()
    warnings += reading.history_notes
    run.nan = nan if nan.any() else None

    if summary:
        run.summary = {k: _json_value(v) for k, v in reading.summ.items() if not k.startswith("_wandb")}
    else:
        if run.values.size:
            logged = run.logged()
            last = len(run.values) - 1 - np.argmax(logged[::-1], axis=0)
            for j, k in enumerate(run.keys):
                if logged[last[j], j] and not k.startswith("_"):
                    run.summary[k] = float(run.values[last[j], j])
        for payload in reading.tail:
            try:
                rec = reading.Record.FromString(payload).summary
            except Exception:
                continue
            for it in rec.update:
                key = _item_key(it)
                if not key.startswith("_"):
                    run.summary[key] = _json_value(it.value_json)
            for it in rec.remove:
                run.summary.pop(_item_key(it), None)
    if run.state == "incomplete":
        warnings.append(f"{where}: {NO_EXIT_RECORD}")
    return run


@contextmanager
def _mapped(path: Path):
    """The bytes of the file at ``path``, memory-mapped (read-only; b"" for an empty file)."""
    with open(path, "rb") as f:
        if not os.fstat(f.fileno()).st_size:
            yield b""
            return
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # a file system without mmap: read it whole, as before chunks
            mm = None
        if mm is None:
            yield f.read()
            return
        try:
            yield mm
        finally:
            try:
                mm.close()
            except BufferError:  # a view of it is still alive (an error while reading): closed when collected
                pass


def _release(buf, start: int, end: int) -> int:
    """Unmap the pages of a mapped file from byte ``start`` (a page boundary) to ``end`` (read already):
    they stay in the OS page cache but no longer count in the process's memory (the whole file would,
    once read). The page boundary it released up to."""
    end -= end % mmap.PAGESIZE
    if end > start and isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        buf.madvise(mmap.MADV_DONTNEED, start, end - start)
        return end
    return start


class _Reading:
    """The state of :func:`read_wandb_file` between chunks of records."""

    def __init__(self, run: RunData, where: str, summary: bool) -> None:
        from wandb.proto import wandb_internal_pb2 as pb

        self.Record = pb.Record
        self.run, self.where, self.summary = run, where, summary
        self.n_records = 0
        self.record_notes: list[str] = []
        self.history_notes: list[str] = []
        self.summ: dict = {}
        self.tail: deque[bytes] = deque(maxlen=SUMMARY_TAIL)  # the last summary records when summary=False
        self.table = TableBuilder()

    def add(self, payloads: list[bytes]) -> None:
        """Read the next records (serialized Records, in file order)."""
        if not payloads:
            return
        self.n_records += len(payloads)
        run, where, summary = self.run, self.where, self.summary
        lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
        ends = np.cumsum(lengths)
        starts = ends - lengths
        data = b"".join(payloads)
        payloads.clear()  # the chunk is now ``data`` alone
        fields = record_fields(data, starts, ends)
        wanted = np.isin(fields, (FIELD_CONFIG, FIELD_RUN, FIELD_EXIT) + ((FIELD_SUMMARY,) if summary else ()))
        if not summary:
            for r in np.flatnonzero(fields == FIELD_SUMMARY)[-SUMMARY_TAIL:].tolist():
                self.tail.append(data[int(starts[r]) : int(ends[r])])
        for r in np.flatnonzero(wanted).tolist():
            field = int(fields[r])
            try:
                rec = self.Record.FromString(data[int(starts[r]) : int(ends[r])])
            except Exception as e:  # a record with an intact checksum that protobuf cannot decode
                self.record_notes.append(f"{where}: undecodable record ({type(e).__name__}); skipped it")
                continue
            if field == FIELD_SUMMARY:
                for it in rec.summary.update:
                    self.summ[_item_key(it)] = it.value_json
                for it in rec.summary.remove:
                    self.summ.pop(_item_key(it), None)
            elif field == FIELD_CONFIG:
                _apply_config(run.config, rec.config.update)
            elif field == FIELD_RUN:
                _apply_run(run, rec.run)
            elif field == FIELD_EXIT:
                run.exit_code = int(rec.exit.exit_code)
                run.runtime_s = float(rec.exit.runtime) if rec.exit.runtime else None
                run.state = "finished" if run.exit_code == 0 else "failed"
        is_history = fields == FIELD_HISTORY
        if is_history.any():
            self.table.add(history_table_at(data, starts[is_history], ends[is_history], self.history_notes.append,
                                            where))


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
            _apply_run(run, pb.Record.FromString(payload).run)
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
    if bp is None or not bp.run or bp.run != run_record.run_id or bp.metric != WANDB_STEP_KEY:
        return None
    return int(bp.value)


def has_exit_record(path: str | Path, tail_blocks: int = 2) -> bool:
    """Whether wandb-core has written the exit record of the file's run, the record it writes last
    when the run finishes (so the history before it is complete). Reads only the last ``tail_blocks``
    32 KiB blocks, where that record is; False for a missing file or one that is not a .wandb file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            first = max(0, (size - 1) // BLOCK_LEN - (tail_blocks - 1)) * BLOCK_LEN
            f.seek(first)
            tail = f.read()
    except OSError:
        return False
    # the blocks read keep their offsets modulo BLOCK_LEN behind a header and a zero (skipped) block;
    # a first chunk that continues a record of the block before is dropped
    buf = tail if first == 0 else HEADER + bytes(BLOCK_LEN - HEADER_LEN) + tail
    try:
        return any(record_field(r) == FIELD_EXIT for r in iter_records(buf, lambda _msg: None, str(path)))
    except WandbFileError:
        return False

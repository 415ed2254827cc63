"""Two reader paths no other test reached (from a mutation hunt; each wrong there gives wrong data with no word).

- framing: a FIRST chunk whose LAST was lost, then a FULL record, then a LAST without its FIRST. The FULL record is
  the only intact one; a reader that kept the FIRST pending across it joined the two broken halves into a record
  that was never written.
- stitch: the time zone measured on a run's intact fragments reads the folder of a fragment whose run record was
  lost. With a copied fragment outside any sync folder beside them (discover rglobs ``run-*.wandb``), a wrong offset
  puts the lost-record attempt before the copy, and the copy's values then win the steps both logged."""

from __future__ import annotations

import calendar
import struct
import time
import zlib

from arctl.track.run_data import RunData
from arctl.track.runs.stitch import in_attempt_order
from arctl.track.wandbfile.framing import FIRST, FULL, HEADER, LAST, iter_records, scan_records


def _chunk(kind: int, data: bytes) -> bytes:
    return struct.pack("<IHB", zlib.crc32(bytes([kind]) + data), len(data), kind) + data


BROKEN = HEADER + _chunk(FIRST, b"AAAA") + _chunk(FULL, b"BBBB") + _chunk(LAST, b"CCCC")
WARNINGS = ["f.wandb: record before byte 29 has no LAST chunk; dropped it",
            "f.wandb: LAST chunk without FIRST at byte 40; dropped it"]


def test_a_full_record_after_a_first_without_its_last_is_the_only_record():
    warns: list[str] = []
    assert list(iter_records(BROKEN, warns.append, "f.wandb")) == [b"BBBB"]
    assert warns == WARNINGS


def test_scan_records_reads_that_file_alike():
    warns: list[str] = []
    data, starts, ends = scan_records(BROKEN, warns.append, "f.wandb")
    assert [bytes(data[s:e]) for s, e in zip(starts, ends)] == [b"BBBB"]
    assert warns == WARNINGS


def test_a_copy_outside_a_sync_folder_sorts_by_the_lost_records_folder_read_in_its_writers_zone(monkeypatch):
    """The run was written at UTC-8 and is read at UTC: A in its folder, B an intact copy outside any folder (300 s
    later), C in its folder with its run record lost (600 s after A): A, B, C."""
    monkeypatch.setenv("TZ", "UTC0")
    time.tzset()
    try:
        t0 = calendar.timegm((2026, 12, 6, 3, 0, 0, 0, 0, 0)) + 0.4

        def stamp(t):
            return time.strftime("%Y%m%d_%H%M%S", time.gmtime(t - 8 * 3600))

        a = RunData(wandb_id="r1", source=f"w/offline-run-{stamp(t0)}-r1/run-r1.wandb", start_time=t0)
        b = RunData(wandb_id="r1", source="copied/run-r1.wandb", start_time=t0 + 300)
        c = RunData(wandb_id="r1", source=f"w/offline-run-{stamp(t0 + 600)}-r1/run-r1.wandb", start_time=0.0)
        for given in ([c, b, a], [a, c, b], [b, a, c]):
            assert [f.source for f in in_attempt_order(given)] == [a.source, b.source, c.source]
    finally:
        monkeypatch.undo()
        time.tzset()

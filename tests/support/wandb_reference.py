"""An independent reader of offline ``.wandb`` files, for tests: what a W&B server would hold after
``wandb sync`` of every fragment of a run. It shares no code with ``arctl.track``: the chunk format
is read here (wandb 0.31 has no public reader of offline files) and records are decoded with
wandb's own protobuf classes. The history follows W&B's semantics: fragments in the order their
attempts started (the run record's start time; on a tie, W&B's ``-N`` suffix of the sync folder of
the N-th attempt started within the same second, then the path); a fragment whose run record has a
``branch_point`` on its own run (``resume_from="<id>?_step=N"``, a rewind) first cuts the history
after ``_step`` N; every history row is keyed by its ``_step``."""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

BLOCK = 32768  # the LevelDB-style log wandb-core writes: a 7-byte file header, then 32 KiB blocks of
CHUNK = 7      # chunks ``crc32 u32 | length u16 | type u8 | data`` (FULL=1, FIRST=2, MIDDLE=3, LAST=4)


def records(path: Path):
    """The record payloads of one ``.wandb`` file, in order; stops at a torn or corrupt tail."""
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log"
    pos, parts = 7, []
    while True:
        left = BLOCK - pos % BLOCK
        if left < CHUNK:
            pos += left  # block trailer
            continue
        if pos + CHUNK > len(data):
            return
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        body = data[pos + CHUNK : pos + CHUNK + length]
        if kind == 0 and length == 0 and crc == 0:
            pos += left  # zero padding to the end of the block
            continue
        if len(body) < length or kind not in (1, 2, 3, 4) or zlib.crc32(bytes([kind]) + body) != crc:
            return
        pos += CHUNK + length
        if kind == 1:
            yield body
        elif kind == 2:
            parts = [body]
        else:
            parts.append(body)
            if kind == 4:
                yield b"".join(parts)
                parts = []


def fragments(run_dir: Path) -> list[dict]:
    """Every ``run-*.wandb`` file under ``run_dir/wandb``: run id, start time, rewind, history rows."""
    from wandb.proto import wandb_internal_pb2 as pb

    out = []
    for path in sorted({p.resolve() for p in Path(run_dir, "wandb").rglob("run-*.wandb")}):
        # offline-run-YYYYMMDD_HHMMSS-<id>[-N]: N counts the attempts of <id> started in that second
        again = re.fullmatch(r"(?:offline-)?run-[0-9]{8}_[0-9]{6}-" + re.escape(path.stem[len("run-"):]) + r"-([0-9]+)",
                             path.parent.name)
        frag = {"path": str(path), "run_id": None, "start": 0.0, "again": int(again.group(1)) if again else 0,
                "rewind": None, "rows": []}
        for data in records(path):
            rec = pb.Record()
            rec.ParseFromString(data)
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                frag["run_id"] = rec.run.run_id
                frag["start"] = rec.run.start_time.seconds + rec.run.start_time.nanos * 1e-9
                bp = rec.run.branch_point
                if bp.run == rec.run.run_id and bp.metric == "_step":
                    frag["rewind"] = int(bp.value)
            elif kind == "history":
                row = {}
                for item in rec.history.item:
                    key = item.key or "/".join(item.nested_key)
                    row[key] = json.loads(item.value_json)
                frag["rows"].append(row)
        out.append(frag)
    return sorted(out, key=lambda f: (f["start"], f["again"], f["path"]))


def synced_history(run_dir: Path) -> tuple[set[str], list[dict]]:
    """(run ids, the history rows a server would hold, in ``_step`` order). Raises AssertionError
    when a ``_step`` would be logged twice (a W&B server keeps one row per step)."""
    ids, rows = set(), {}
    for frag in fragments(run_dir):
        if frag["run_id"] is not None:  # a file cut before its run record holds nothing
            ids.add(frag["run_id"])
        if frag["rewind"] is not None:
            rows = {s: r for s, r in rows.items() if s <= frag["rewind"]}
        for row in frag["rows"]:
            step = int(row["_step"])
            assert step not in rows, f"_step {step} logged twice ({frag['path']})"
            rows[step] = row
    return ids, [rows[s] for s in sorted(rows)]

"""Benchmark of `arctl report`: 100 offline runs × 10,000 steps × ~20 metrics per step →
``score_curve`` and ``main_training``, cold (parsing every .wandb file) and from the parquet cache.

The synthetic .wandb files are written by this script's own writer of the same format (7-byte
header, LevelDB-log framing in 32 KiB blocks with CRC-32, serialized
``wandb_internal_pb2.Record``s: run record with config, one history and one summary record per
step like wandb-core, exit record), not by wandb itself: 100 × 10,000 steps through wandb would
take too long. Four distinct files (one per arm) are generated and copied to 25 seeds each.

    python benchmarks/bench_report.py [--runs 100] [--steps 10000] [--dir /tmp/arctl-bench] [--repeat 1]

The fixture in --dir is reused only when its fixture.json records the same --runs and --steps;
else it is rebuilt.

Building the fixture is not timed. "Cold" means no parquet cache; it is measured twice: with the
.wandb files in the OS page cache (read once just before, untimed) and with their pages dropped
(``posix_fadvise(DONTNEED)`` on those files only), where the disk read is part of the time. Every
line gives wall time, CPU time of all processes, and the 1-minute load average before it (other
jobs share the cores). Numbers go to docs/benchmarks.md (section "Reports").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

from _args import positive_int  # benchmarks/ (the script's folder is on sys.path)

ARMS = {"grpo": "main-grpo", "ar-base": "main-ar-base", "ar-linear": "main-ar-linear",
        "ar-uniform": "main-ar-uniform"}
TRAIN_KEYS = (
    [f"train/score@{b}" for b in (2000, 4000, 6000, 8000)]
    + ["train/anytime_score", "train/final_score", "train/think_len/mean", "train/adv_var/brpo",
       "train/adv_var/v1", "train/adv_var/v2", "train/reward/mean", "train/loss", "train/entropy",
       "perf/step_time_s", "train/response_len/mean", "train/clip_frac", "train/kl", "train/grad_norm",
       "train/lr", "train/summary_len/mean"]
)  # 20 metrics every step
EVAL_DATASETS = ["aime24", "amc22"]
FINAL_DATASETS = ["aime24", "amc22", "math500", "minerva", "olympiadbench"]
GRID = [250 * (i + 1) for i in range(32)]
EVAL_EVERY = 20


def frame(payloads, block=32768) -> bytes:
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for payload in payloads:
        rest, first = payload, True
        while True:
            left = block - len(out) % block
            if left < 7:
                out += b"\x00" * left
                continue
            piece, rest = rest[: left - 7], rest[left - 7 :]
            last = not rest
            ctype = 1 if first and last else 2 if first else 4 if last else 3
            out += struct.pack("<IHB", zlib.crc32(bytes([ctype]) + piece), len(piece), ctype) + piece
            first = False
            if last:
                break
    return bytes(out)


def synth_file(path: Path, arm: str, experiment: str, steps: int, seed: int) -> None:
    from wandb.proto import wandb_internal_pb2 as pb

    rnd = random.Random(seed)
    recs = []
    num = 0

    def rec(**kw):
        nonlocal num
        num += 1
        return pb.Record(num=num, **kw).SerializeToString()

    cfg = {"experiment": experiment, "arm": arm, "seed": seed}
    run = pb.RunRecord(run_id=path.stem[4:], project="bench", run_group=experiment, display_name=f"{arm}-s{seed}")
    for k, v in cfg.items():
        run.config.update.add(key=k, value_json=json.dumps(v))
    recs.append(rec(run=run))
    base = {"grpo": 0.40, "ar-base": 0.43, "ar-linear": 0.44, "ar-uniform": 0.45}[arm]
    for s in range(steps):
        row = {"trainer/global_step": s}
        row.update({k: rnd.random() for k in TRAIN_KEYS})
        if s % EVAL_EVERY == 0:
            for ds in EVAL_DATASETS:
                for b in (2000, 4000, 6000, 8000):
                    row[f"eval/{ds}/acc@{b}"] = base + s * 1e-5 + rnd.random() * 0.02
                row[f"eval/{ds}/anytime_acc"] = base + s * 1e-5 + rnd.random() * 0.02
                row[f"eval/{ds}/final_acc"] = base + 0.05 + s * 1e-5 + rnd.random() * 0.02
                row[f"eval/{ds}/think_len"] = 5000 - 0.1 * s + rnd.random() * 50
        if s == steps - 1:
            for ds in FINAL_DATASETS:
                for b in GRID:
                    row[f"eval/{ds}/acc@{b}"] = base + 0.2 * (b / 8000) ** 0.5 + rnd.random() * 0.01
        row["_step"] = s
        row["_runtime"] = s * 0.1
        row["_timestamp"] = 1.7e9 + s
        h = pb.HistoryRecord()
        for k, v in row.items():
            h.item.add(nested_key=[k], value_json=json.dumps(v))
        recs.append(rec(history=h))
        sm = pb.SummaryRecord()
        for k, v in row.items():
            sm.update.add(nested_key=[k], value_json=json.dumps(v))
        recs.append(rec(summary=sm))
    recs.append(rec(exit=pb.RunExitRecord(exit_code=0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(frame(recs))


FIXTURE = "fixture.json"  # in --dir: the --runs/--steps the files there were built with


class NotAFixture(Exception):
    """--dir holds something this benchmark did not build."""


def build(root: Path, runs: int, steps: int) -> None:
    import yaml

    templates = {}
    for i, (arm, exp) in enumerate(ARMS.items()):
        t = root / "templates" / f"run-{arm}.wandb"
        if not t.exists():
            synth_file(t, arm, exp, steps, seed=i)
        templates[arm] = t
    for i in range(runs):
        arm = list(ARMS)[i % len(ARMS)]
        exp, seed = ARMS[arm], i // len(ARMS)
        rid = f"{exp}--{arm}--s{seed}"
        d = root / "runs" / rid
        dst = d / "wandb" / "wandb" / f"offline-run-20260101_000000-{rid}" / f"run-{rid}.wandb"
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(templates[arm], dst)
            (d / "config.yaml").write_text(yaml.safe_dump({"experiment": exp, "arm": arm, "seed": seed}))


def prepare(root: Path, runs: int, steps: int) -> int:
    """Build the fixture in ``root``, or reuse the one there when it was built with the same ``runs`` and
    ``steps`` (``fixture.json``; building 100 x 10,000 steps takes minutes). Another size is rebuilt from
    scratch: ``build`` alone keeps files that exist, so a 60-step fixture was timed and labelled as 5,000
    steps, and ``--runs 2`` read the 4 runs left from before. Returns the number of runs in ``runs/``, the
    number ``arctl report`` reads. A folder with runs/ or templates/ but no fixture.json is not this
    benchmark's: it is refused (NotAFixture), never deleted."""
    meta = root / FIXTURE
    want = {"runs": runs, "steps": steps}
    have = json.loads(meta.read_text()) if meta.exists() else None
    if have is None and any((root / d).exists() for d in ("runs", "templates")):
        raise NotAFixture(f"--dir {root} holds runs/ or templates/ but no {FIXTURE}, so it is not a fixture "
                          "this benchmark built (or one from before it recorded its size): give an empty or new "
                          "folder with --dir, or delete that one")
    if have is not None and ({k: have.get(k) for k in want} != want or not have.get("complete")):
        for d in ("runs", "templates", ".arctl-cache", "out"):
            shutil.rmtree(root / d, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({**want, "complete": False}))  # an interrupted build is rebuilt next time
    build(root, runs, steps)
    meta.write_text(json.dumps({**want, "complete": True}))
    return sum(1 for d in (root / "runs").iterdir() if d.is_dir())


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its worker processes)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def page_cache(root: Path, warm: bool) -> None:
    """Load the .wandb files into the OS page cache (``warm``) or drop their pages from it."""
    for p in (root / "runs").rglob("*.wandb"):
        with open(p, "rb") as f:
            if warm:
                while f.read(1 << 24):
                    pass
            else:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=positive_int, default=100)
    ap.add_argument("--steps", type=positive_int, default=10_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/arctl-bench"),
                    help=f"the fixture's folder: reused when its {FIXTURE} has the same --runs/--steps, else rebuilt")
    ap.add_argument("--repeat", type=positive_int, default=1, help="measure every line this many times")
    args = ap.parse_args(argv)
    root = args.dir
    t = time.perf_counter()
    try:
        runs = prepare(root, args.runs, args.steps)
    except NotAFixture as err:
        ap.error(str(err))
    size = sum(p.stat().st_size for p in (root / "runs").rglob("*.wandb"))
    print(f"workspace: {runs} runs x {args.steps} steps, {size / 2**30:.2f} GiB of .wandb "
          f"(built or reused in {time.perf_counter() - t:.0f} s)")
    arctl = [sys.executable, "-m", "arctl.cli.main", "report", "--workdir", str(root), "--out", str(root / "out")]
    lines = []

    def measure(label: str, figure: str, *, cold: bool, warm_files: bool) -> None:
        for _ in range(args.repeat):
            if cold:
                shutil.rmtree(root / ".arctl-cache", ignore_errors=True)
                page_cache(root, warm=warm_files)
            load = os.getloadavg()[0]
            wall, cpu = timed([*arctl, "--figure", figure])
            lines.append(f"{label:<58} wall {wall:6.1f} s   CPU {cpu:6.1f} s   load before {load:4.1f}")
            print(lines[-1], flush=True)

    measure(f"score_curve cold, files in page cache ({runs} runs)", "score_curve", cold=True, warm_files=True)
    measure("main_training from the parquet cache", "main_training", cold=False, warm_files=True)
    measure("score_curve from the parquet cache", "score_curve", cold=False, warm_files=True)
    measure(f"score_curve cold, files read from disk ({runs} runs)", "score_curve", cold=True,
            warm_files=False)
    print(f"cores: {os.cpu_count()}, load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

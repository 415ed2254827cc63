"""Did the same run id give the same numbers twice? (issue #27: "two fresh clones on two machines
of this kind give the same metrics for the same run id").

    python benchmarks/same_run.py WORKDIR_A WORKDIR_B [--run RUN_ID ...] [--json OUT]

Reads both workspaces (or exported runs: `arctl export --out`) with arctl's own reader and compares
every run id present in both: each logged (step, metric) value, bit for bit, except the wall-clock
and CPU-time metrics (``perf/step_time_s``, ``perf/step_cpu_s``), which no two runs share. It prints
per run the machine kind and warm-up weights each side recorded, the numbers compared, how many are
bit-identical, the largest absolute difference, and the steps and metrics present on one side only.
Exit status 0 when every compared run is bit-identical on every number and neither side has a
(step, metric) the other lacks, 1 otherwise, 2 on bad input (no run id in both workspaces).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from arctl.track.metrics_schema import PERF_STEP_CPU_S, PERF_STEP_TIME_S  # noqa: E402

CLOCKS = (PERF_STEP_TIME_S, PERF_STEP_CPU_S)
"""Metrics that measure the machine's time, not the run's arithmetic: never compared."""
RECORDED = ("config.machine", "config.warmup.weights_sha256")
"""What each side recorded of where it ran and what it started from (printed, not compared)."""


def _load(workdir: str, cache: Path):
    from arctl.track.runs.load import load_runs

    return load_runs(workdir, progress=False, cache_dir=cache)


def compare_histories(a, b) -> dict:
    """Compare two long histories (``step``, ``metric``, ``value`` columns) of one run.

    Returns counts: ``compared`` (pairs on both sides), ``identical`` (bitwise equal floats, NaN
    equal to NaN), ``max_abs_diff``, ``only_a`` / ``only_b`` ((step, metric) on one side), and up to
    five ``examples`` of differing values ``[step, metric, a, b]``."""
    import numpy as np

    a = a[~a["metric"].isin(CLOCKS)]
    b = b[~b["metric"].isin(CLOCKS)]
    m = a.merge(b, on=["step", "metric"], how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"]
    va = both["value_a"].to_numpy(dtype=np.float64)
    vb = both["value_b"].to_numpy(dtype=np.float64)
    same = (va.view(np.int64) == vb.view(np.int64)) | (np.isnan(va) & np.isnan(vb))
    diff = np.abs(va - vb)
    diff = diff[~np.isnan(diff)]
    bad = both[~same].sort_values(["step", "metric"])
    return {
        "compared": int(len(both)),
        "identical": int(same.sum()),
        "max_abs_diff": float(diff.max()) if len(diff) else 0.0,
        "only_a": int((m["_merge"] == "left_only").sum()),
        "only_b": int((m["_merge"] == "right_only").sum()),
        "examples": [[int(r.step), str(r.metric), float(r.value_a), float(r.value_b)] for r in bad.head(5).itertuples()],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="a workspace or an exported runs folder")
    ap.add_argument("b", help="another one")
    ap.add_argument("--run", action="append", default=[], help="only this run id (repeatable)")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args(argv)

    import tempfile

    with tempfile.TemporaryDirectory(prefix="same-run-") as tmp:
        ra = _load(args.a, Path(tmp) / "a")
        rb = _load(args.b, Path(tmp) / "b")
    common = sorted(set(ra.runs["run_id"]) & set(rb.runs["run_id"]))
    if args.run:
        missing = [r for r in args.run if r not in common]
        if missing:
            print(f"error: run {missing[0]} is not in both {args.a} and {args.b}: "
                  f"the run ids in both are {', '.join(common) or 'none'}", file=sys.stderr)
            return 2
        common = [r for r in common if r in args.run]
    if not common:
        print(f"error: no run id is in both {args.a} and {args.b}: compare the same run trained twice",
              file=sys.stderr)
        return 2

    rows = []
    for run_id in common:
        res = compare_histories(ra.history[ra.history["run_id"] == run_id], rb.history[rb.history["run_id"] == run_id])
        for side, runs in (("a", ra.runs), ("b", rb.runs)):
            row = runs[runs["run_id"] == run_id].iloc[0]
            res[side] = {k.removeprefix("config."): (str(row[k]) if k in row.index else "") for k in RECORDED}
        res["run_id"] = run_id
        res["same"] = res["identical"] == res["compared"] and res["only_a"] == 0 and res["only_b"] == 0
        rows.append(res)
        print(f"{run_id}: {res['identical']:,} of {res['compared']:,} numbers bit-identical "
              f"(max |a-b| {res['max_abs_diff']:.3g}); only in a {res['only_a']}, only in b {res['only_b']}"
              f"{'' if res['same'] else '  DIFFERENT'}")
        for side in ("a", "b"):
            print(f"  {side}: machine {res[side]['machine'] or '?'}, warm-up weights {res[side]['warmup.weights_sha256'][:16] or '?'}")
        for step, metric, x, y in res["examples"]:
            print(f"  step {step} {metric}: {x!r} vs {y!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The same run id gives the same numbers on every machine of this kind: a micro run of AR-uniform on
the search task (its warm-up included, trained here from scratch) against committed reference
numbers - the warm-up's weights bit for bit (sha256), and every logged training and evaluation
metric to 1e-6 (absolute) and at every digit a report shows (4 decimals).

There is one reference per kind of machine CI has run on (tests/tiny/reference/micro_metrics*.json,
each saying where, when and on what ``kind``: CPU model, torch's kernel level, torch version); on a
kind without one the test skips and names the kinds there are, since other kernels sum floats in
another order. ``ARCTL_WRITE_REFERENCE=1 python -m pytest tests/tiny/test_reproducible.py`` writes (or
rewrites) this kind's - only for a new kind, or after a change that is meant to change the numbers
(the task, the warm-up, the trainer), said in the commit, and then for every kind."""

from __future__ import annotations

import json
import math
import os
import platform
import threading
import time
from pathlib import Path

import pytest
from micro import MICRO_AT_TINY_BUDGETS  # tests/support/micro.py: the references' budgets

REFERENCES = Path(__file__).with_name("reference")  # micro_metrics*.json: one per kind of machine
IGNORED_PREFIXES = ("perf/",)  # wall and CPU times
TOLERANCE = 1e-6


def machine_kind() -> str:
    """What the float sums depend on: the CPU model, the kernels torch picks for it, torch's version."""
    import torch

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or platform.machine()) \
        if Path("/proc/cpuinfo").exists() else platform.processor() or platform.machine()
    return f"{model} | {torch.backends.cpu.get_cpu_capability()} | torch {torch.__version__}"


def references() -> dict[str, Path]:
    """kind of machine -> its committed reference file."""
    return {json.loads(p.read_text())["kind"]: p for p in sorted(REFERENCES.glob("micro_metrics*.json"))}


def reference_path(kind: str) -> Path:
    """Where ``kind``'s reference is (a new kind: a file named after its hash)."""
    import hashlib

    return references().get(kind) or REFERENCES / f"micro_metrics-{hashlib.sha256(kind.encode()).hexdigest()[:8]}.json"


def _metrics(run_dir: Path) -> dict[str, dict[str, float]]:
    rows = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        step = str(row["trainer/global_step"])
        rows[step] = {k: v for k, v in sorted(row.items())
                      if isinstance(v, (int, float)) and not k.startswith(IGNORED_PREFIXES)}
    return rows


def test_a_micro_run_gives_the_committed_numbers(tmp_path, monkeypatch):
    writing = os.environ.get("ARCTL_WRITE_REFERENCE") == "1"
    kind = machine_kind()
    if not writing and kind not in references():
        pytest.skip(f"no reference numbers for this kind of machine ({kind}; there are: {'; '.join(references())}): "
                    "ARCTL_WRITE_REFERENCE=1 writes this machine's")
    reference = reference_path(kind)
    from resolved import arm_config  # tests/support/resolved.py

    from arctl.backends.tiny.trainer import train

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))  # the warm-up trained here, not reused
    config = arm_config("main-ar-uniform", "ar-uniform", overrides=[*MICRO_AT_TINY_BUDGETS, "wandb.mode=disabled"])
    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"
    warm = json.loads((run_dir / "warmup.json").read_text())
    got = {"warmup_sha256": warm["weights_sha256"], "warmup_accuracy": warm["accuracy_per_budget"],
           "metrics": _metrics(run_dir)}
    if writing:
        REFERENCES.mkdir(exist_ok=True)
        made = {"written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
                "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "kind": machine_kind()}
        reference.write_text(json.dumps({**made, **got}, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"wrote {reference}")
    want = json.loads(reference.read_text())
    assert got["warmup_sha256"] == want["warmup_sha256"], "the warm-up's weights differ from the reference's"
    assert got["warmup_accuracy"] == want["warmup_accuracy"]
    assert sorted(got["metrics"]) == sorted(want["metrics"])  # the same steps
    for step, row in want["metrics"].items():
        assert sorted(got["metrics"][step]) == sorted(row), f"step {step}: other keys"
        for key, value in row.items():
            mine = got["metrics"][step][key]
            if math.isnan(value):  # a diagnostic with too few samples: NaN both times
                assert math.isnan(mine), (step, key, mine)
                continue
            assert abs(mine - value) <= TOLERANCE and f"{mine:.4f}" == f"{value:.4f}", (step, key, mine, value)
    varied = {k for row in want["metrics"].values() for k, v in row.items() if v == v and v != 0}
    assert {"train/entropy", "train/think_len/mean"} <= varied  # numbers that can differ
    if any(row.get("train/reward/mean") for row in want["metrics"].values()):
        assert "train/loss" in varied  # with a reward to learn from, the update's numbers are compared too

"""The same run id gives the same numbers on every machine of this kind: a micro run of AR-uniform on
the search task (its warm-up included, trained here from scratch) against committed reference
numbers - the warm-up's weights bit for bit (sha256), and every logged training and evaluation
metric to 1e-6 (absolute) and at every digit a report shows (4 decimals).

There is one reference per kind of machine CI has run on (tests/tiny/reference/micro_metrics*.json,
each saying where, when and on what ``kind``: CPU model, torch's kernel level, torch version); on a
kind without one the test skips and names the kinds there are, since other kernels sum floats in
another order. ``ARCTL_WRITE_REFERENCE=1 python -m pytest tests/tiny/test_reproducible.py`` writes (or
rewrites) this kind's - only for a new kind, or after a change that is meant to change the numbers
(the task, the warm-up, the trainer), said in the commit, and then for every kind.

The micro run trained from scratch earns no reward (its warm-up of 4 steps scores 0), so its update is
zero and an edit of the RL step (the learning rate x 1.01) passed it. A second micro run starts from the
shipped warm-up (arctl/backends/tiny/shipped/: the same weights on every machine, by their hash), earns
rewards (.98 / .61 / .70) and trains on them: its numbers, under ``from_shipped`` in the same reference
file, catch such edits. A kind whose file lacks them skips that test (ARCTL_WRITE_REFERENCE=1 adds them)."""

from __future__ import annotations

import json
import math
import os
import platform
import threading
import time
from pathlib import Path

import pytest
from micro import MICRO_AT_TINY_BUDGETS, REFERENCES, references  # tests/support/micro.py

IGNORED_PREFIXES = ("perf/",)  # wall and CPU times
TOLERANCE = 1e-6


def machine_kind() -> str:
    """What the float sums depend on: the CPU model, the kernels torch picks for it, torch's version."""
    from arctl.backends.tiny.warmup import machine_kind as kind

    return kind()


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


def first_difference(mine: dict, ref: dict) -> str | None:
    """Where two micro runs' metrics ({step: {key: value}}) differ: other steps, other keys, or a
    number off by more than TOLERANCE or at 4 decimals (NaN, a diagnostic with too few samples, equals
    NaN); None where they agree."""
    if sorted(mine) != sorted(ref):
        return f"other steps: {sorted(mine)} vs {sorted(ref)}"
    for step, row in ref.items():
        if sorted(mine[step]) != sorted(row):
            return f"step {step}: other keys ({sorted(set(mine[step]) ^ set(row))})"
        for key, value in row.items():
            got = mine[step][key]
            same = math.isnan(got) if math.isnan(value) else \
                abs(got - value) <= TOLERANCE and f"{got:.4f}" == f"{value:.4f}"
            if not same:
                return f"step {step}, {key}: {got!r} vs {value!r}"
    return None


# the micro run from the shipped warm-up: MICRO_AT_TINY_BUDGETS's RL settings, the tiny scale's model and task
# (the shipped weights are the tiny scale's), 3 steps on 2 prompts x 2 samples (~9 s)
FROM_SHIPPED = [o for o in MICRO_AT_TINY_BUDGETS if not o.startswith(("model.", "tiny.task.", "tiny.warmup."))]


def _write_reference(reference: Path, section: dict, key: str | None = None) -> None:
    """Write this kind's reference: the micro run's ``section`` at the top (``key`` None) or under ``key``,
    keeping what the file holds besides (rewriting one case leaves the other's numbers)."""
    old = json.loads(reference.read_text()) if reference.exists() else {}
    made = {"written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "kind": machine_kind()}
    new = {**old, **made, **section} if key is None else {**old, "kind": machine_kind(), key: {**made, **section}}
    REFERENCES.mkdir(exist_ok=True)
    reference.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")


def _micro_run(tmp_path: Path, monkeypatch, overrides: list[str]) -> tuple[dict, dict]:
    """Train main-ar-uniform's arm in-process with ``overrides`` and a fresh warm-up cache: (warmup.json, metrics)."""
    from resolved import arm_config  # tests/support/resolved.py

    from arctl.backends.tiny.trainer import train

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))  # the warm-up trained (or installed) here, not reused
    monkeypatch.delenv("ARCTL_TINY_WARMUP", raising=False)
    config = arm_config("main-ar-uniform", "ar-uniform", overrides=[*overrides, "wandb.mode=disabled"])
    run_dir = tmp_path / "run"
    assert train(config, run_dir, threading.Event()) == "completed"
    return json.loads((run_dir / "warmup.json").read_text()), _metrics(run_dir)


def test_a_micro_run_gives_the_committed_numbers(tmp_path, monkeypatch):
    writing = os.environ.get("ARCTL_WRITE_REFERENCE") == "1"
    kind = machine_kind()
    if not writing and kind not in references():
        pytest.skip(f"no reference numbers for this kind of machine ({kind}; there are: {'; '.join(references())}): "
                    "ARCTL_WRITE_REFERENCE=1 writes this machine's")
    reference = reference_path(kind)
    warm, metrics = _micro_run(tmp_path, monkeypatch, MICRO_AT_TINY_BUDGETS)
    assert warm["source"] == "trained"
    got = {"warmup_sha256": warm["weights_sha256"], "warmup_accuracy": warm["accuracy_per_budget"], "metrics": metrics}
    if writing:
        _write_reference(reference, got)
        pytest.skip(f"wrote {reference}")
    want = json.loads(reference.read_text())
    assert got["warmup_sha256"] == want["warmup_sha256"], "the warm-up's weights differ from the reference's"
    assert got["warmup_accuracy"] == want["warmup_accuracy"]
    found = first_difference(got["metrics"], want["metrics"])
    assert found is None, f"{found} (this run, then {reference.name})"
    varied = {k for row in want["metrics"].values() for k, v in row.items() if v == v and v != 0}
    assert {"train/entropy", "train/think_len/mean"} <= varied  # numbers that can differ
    if any(row.get("train/reward/mean") for row in want["metrics"].values()):
        assert "train/loss" in varied  # with a reward to learn from, the update's numbers are compared too


def test_a_micro_run_from_the_shipped_warm_up_gives_the_committed_numbers(tmp_path, monkeypatch):
    """RL from weights every machine shares: rewards to learn from, so the update's numbers (loss, entropy
    after an update, the next rollouts) are compared; an edit of the learning rate by 1% moves train/entropy
    by ~2e-5 at step 2."""
    writing = os.environ.get("ARCTL_WRITE_REFERENCE") == "1"
    kind = machine_kind()
    want = json.loads(references()[kind].read_text()).get("from_shipped") if kind in references() else None
    if not writing and want is None:
        pytest.skip(f"no reference numbers from the shipped warm-up for this kind of machine ({kind}; there are: "
                    f"{'; '.join(k for k, p in references().items() if 'from_shipped' in json.loads(p.read_text()))}): "
                    "ARCTL_WRITE_REFERENCE=1 writes this machine's")
    warm, metrics = _micro_run(tmp_path, monkeypatch, FROM_SHIPPED)
    assert warm["source"] == "shipped"
    got = {"warmup_sha256": warm["weights_sha256"], "metrics": metrics}
    if writing:
        _write_reference(reference_path(kind), got, key="from_shipped")
        pytest.skip(f"wrote the from_shipped numbers of {reference_path(kind)}")
    assert got["warmup_sha256"] == want["warmup_sha256"], "the shipped warm-up's weights differ from the reference's"
    found = first_difference(got["metrics"], want["metrics"])
    assert found is None, f"{found} (this run, then {references()[kind].name}'s from_shipped)"
    trained = [row for row in want["metrics"].values() if "train/loss" in row]
    assert trained and all(row["train/reward/mean"] > 0 for row in trained)  # a reward to learn from at every step
    assert any(row["train/loss"] != 0 for row in trained)


def test_the_references_of_every_kind_agree():
    """A reference left from before a change that moved the numbers fails only on its own kind of
    machine, perhaps months later (the AVX512 one, written before e83a86b, failed on the first AVX512
    machine since: docs/testbed.md). The micro run is so short that its warm-up's small differences
    across kinds change no sampled token (every number equal but train/entropy, by 2.4e-7), so the
    references of all kinds must agree: rewriting one kind's after a change that moves the numbers
    makes the others stale, and this says so on any machine. Where a change makes the kinds differ
    for real, delete the reference that cannot be rewritten (that kind then skips) and say so."""
    refs = {kind: json.loads(path.read_text()) for kind, path in references().items()}
    kinds = sorted(refs)
    assert kinds, "no reference committed"
    for other in kinds[1:]:
        found = first_difference(refs[other]["metrics"], refs[kinds[0]]["metrics"])
        assert found is None, (f"the references of {other!r} ({refs[other].get('written')}) and {kinds[0]!r} "
                               f"({refs[kinds[0]].get('written')}) differ: {found}. One is stale: rewrite it on "
                               "its kind (ARCTL_WRITE_REFERENCE=1) or delete it")
        assert refs[other]["warmup_accuracy"] == refs[kinds[0]]["warmup_accuracy"]
    shipped = [kind for kind in kinds if "from_shipped" in refs[kind]]  # the kinds that have these (a later case)
    for other in shipped[1:]:
        found = first_difference(refs[other]["from_shipped"]["metrics"], refs[shipped[0]]["from_shipped"]["metrics"])
        assert found is None, (f"the from_shipped references of {other!r} and {shipped[0]!r} differ: {found}. One is "
                               "stale: rewrite it on its kind (ARCTL_WRITE_REFERENCE=1) or delete its from_shipped")

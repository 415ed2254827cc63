"""Train the tiny scale's default warm-up here and ship it with arctl (docs/testbed.md).

    python benchmarks/ship_warmstart.py [--check]

Every tiny run of the default task starts from one supervised warm-up (16 min on two cores). arctl
ships that warm-up, ``arctl/backends/tiny/shipped/<key>/`` (the model, the tokenizer and
``warmup.json``: the weights' sha256, the accuracy per budget, and under ``shipped`` the machine,
date and commit it was trained on), so a new machine starts RL at once and from the same weights on
every kind of CPU (a warm-up trained on an AVX2 CPU differs from an AVX512 one in its last bits).

This script trains it in a scratch cache, exactly as a run would (``ARCTL_TINY_WARMUP=train``), and
replaces the shipped folder. Rerun it after a change to the warm-up, the task, the tiny model or the
tiny budgets: ``tests/tiny/test_shipped_warmup.py`` fails until then. ``--check`` trains it and
only compares with the shipped copy (sha256 of the weights), writing nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT = ("main-ar-uniform", "tiny")  # the experiment and scale whose warm-up is the default one
SUPPORT = ROOT / "tests" / "support"  # micro.py: the micro runs' reference numbers, one file per machine kind


def micro_reference_sha(kind: str) -> str | None:
    """The micro warm-up's weights sha256 in this kind's reference (tests/tiny/test_reproducible.py):
    recorded beside the shipped warm-start, so a change to the warm-up's code, which rewrites that
    reference, fails tests/tiny/test_shipped_warmup.py until the shipped one is trained again."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    from micro import references

    path = references().get(kind)
    return json.loads(path.read_text())["warmup_sha256"] if path else None


def default_config() -> dict:
    from arctl.compose import resolve_experiment

    return resolve_experiment(DEFAULT[0], scale=DEFAULT[1])[0].config


def _commit() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "arctl"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="train and compare with the shipped copy only")
    args = parser.parse_args(argv)

    from arctl.backends.tiny import warmup
    from arctl.backends.tiny.evaluate import budget_accuracy
    from arctl.backends.tiny.settings import WARMUP_ENV, TinyRun
    from arctl.config.files import CACHE_ENV

    config = default_config()
    run = TinyRun.from_config(config)
    key = warmup.warmup_key(config)
    kind = warmup.machine_kind()
    if not args.check and micro_reference_sha(kind) is None:
        print(f"no micro reference for {kind!r} in tests/tiny/reference: ship from a machine kind that has one")
        return 2
    started = time.time()
    import torch

    torch.use_deterministic_algorithms(run.deterministic)  # as the trainer has it when it trains the warm-up
    with tempfile.TemporaryDirectory(prefix="arctl-ship-") as scratch:
        os.environ[CACHE_ENV] = scratch
        os.environ[WARMUP_ENV] = "train"
        warmup.warmup_model(config, Path(scratch) / "run",
                            lambda m, t: budget_accuracy(m, t, config, run.warmup_eval_problems))
        trained = warmup.warmup_dir(config)
        info = json.loads((trained / "warmup.json").read_text())
        shipped = warmup.shipped_dir(key)
        if args.check:
            want = json.loads((shipped / "warmup.json").read_text())["weights_sha256"] if shipped else None
            same = want == info["weights_sha256"]
            print(f"{key}: trained {info['weights_sha256'][:12]}, shipped {str(want)[:12]}: "
                  f"{'the same' if same else 'DIFFERENT'}")
            return 0 if same else 1
        info["shipped"] = {"machine": kind,
                           "micro_reference_warmup_sha256": micro_reference_sha(kind), "cpus": os.cpu_count(),
                           "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
                           "wall_s": round(time.time() - started, 1), "experiment": "/".join(DEFAULT)}
        (trained / "warmup.json").write_text(json.dumps(info, indent=1) + "\n")
        shutil.rmtree(warmup.SHIPPED, ignore_errors=True)  # one shipped warm-start: the current default's
        warmup.SHIPPED.mkdir(parents=True)
        shutil.copytree(trained, warmup.SHIPPED / key)
    size = sum(p.stat().st_size for p in (warmup.SHIPPED / key).rglob("*") if p.is_file())
    print(f"shipped {warmup.SHIPPED / key}: weights sha256 {info['weights_sha256'][:12]}, accuracy per budget "
          f"{info['accuracy_per_budget']}, {size / 1e6:.1f} MB, {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

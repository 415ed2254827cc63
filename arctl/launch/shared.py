"""Arms shared between the experiments of a sweep (``share_arms: true``): one run serves several.

Two cells are *the same run* when their resolved configs are equal once the keys that only name a
run are removed: the experiment's name (``experiment``), the launch's names for the run (``run_id``,
``run_dir``) and its W&B names (``wandb.group``, ``wandb.name``, ``wandb.id``, ``wandb.tags``).
Everything else (the arm's name, the seed, every training, evaluation, cluster and W&B destination
key) must be equal. Arm ``grpo = [algo=grpo, prior=base]`` of main-grpo and of the three ablations
differs only in ``experiment`` and ``wandb.group``, so a sweep over them runs it once per seed.

The first cell in sweep order is kept and launched; each later one is *shared*: it names the kept
run (:attr:`LaunchItem.shares`), is not launched, and the launcher records that the kept run serves
its experiment: a ``members`` row in the registry (``arctl status EXP`` lists the run) and
``shared.json`` in the run dir (``{"experiments": [...]}``, the experiments it serves besides its
own), which ``arctl.track.runs.load_runs(experiments=...)`` reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from arctl.config.files import atomic_write
from arctl.launch.rundir import READ_KEYS

IDENTITY_KEYS = ("experiment", *READ_KEYS)
WANDB_IDENTITY_KEYS = ("group", "name", "id", "tags")
SHARED_FILE = "shared.json"  # the reader (arctl.track.runs.discover) knows this name too


def share_key(config: dict) -> str:
    """The config without the keys that only name the run, as canonical JSON."""
    kept = {k: v for k, v in config.items() if k not in IDENTITY_KEYS}
    if isinstance(kept.get("wandb"), dict):
        kept["wandb"] = {k: v for k, v in kept["wandb"].items() if k not in WANDB_IDENTITY_KEYS}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def mark_shared(items: list) -> list:
    """Mark each item (a :class:`arctl.launch.launcher.LaunchItem`) that is the same run as an
    earlier one: ``shares`` = the kept run's id, ``run_id`` = that id (the run the cell is),
    ``action`` = "shared" and a reason naming the kept cell. Returns ``items`` (same order).
    A run that another starts from (``trainer.init_from``: its ``after``) is never shared away: the
    other run's identity names it."""
    first: dict[str, object] = {}
    needed = {getattr(item, "after", None) for item in items} - {None}
    for item in items:
        if item.run_id in needed:
            continue
        kept = first.setdefault(share_key(item.config), item)
        if kept is item:
            continue
        item.shares = item.run_id = kept.run_id
        item.action = "shared"
        item.reason = f"same run as {kept.experiment}/{kept.arm}/s{kept.seed} (share_arms)"
    return items


def served(items: Iterable) -> dict[str, list[str]]:
    """Kept run id -> the experiments its shared cells belong to (sweep order, no repeats)."""
    out: dict[str, list[str]] = {}
    for item in items:
        if getattr(item, "shares", None):
            names = out.setdefault(item.shares, [])
            if item.experiment not in names:
                names.append(item.experiment)
    return out


def read_shared(run_dir: str | Path) -> list[str]:
    """The experiments ``run_dir/shared.json`` says the run serves besides its own ([] if none)."""
    try:
        data = json.loads((Path(run_dir) / SHARED_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return []
    names = data.get("experiments") if isinstance(data, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def write_shared(run_dir: str | Path, experiments: Iterable[str], own: str | None = None) -> list[str]:
    """Merge ``experiments`` (minus the run's ``own``) into ``run_dir/shared.json``, written
    atomically and only when its content changes (launching the sweep again rewrites nothing);
    returns the merged, sorted list."""
    path = Path(run_dir) / SHARED_FILE
    before = read_shared(run_dir)
    merged = sorted({*before, *experiments} - {own})
    if merged != before or not path.is_file():
        if not merged:
            return merged
        atomic_write(path, json.dumps({"experiments": merged}, indent=2) + "\n")
    return merged

"""The tiny warm-up's cache key and where its entry is, without torch: what a launch (its dry run) reads to say
which warm-ups its runs will train before their first step (:func:`launch_notes`); the warm-up itself is
:mod:`arctl.backends.tiny.warmup`, which imports these."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from arctl.algo.settings import Summary
from arctl.backends.tiny.tasks import task_section

CACHE_VERSION = 2  # 2: toy tasks by name, the weights' hash and the accuracy per budget in warmup.json
SHIPPED = Path(__file__).with_name("shipped")  # warm-starts shipped with arctl: <key>/{model,tokenizer,warmup.json}
TRAINED_SUFFIX = "-trained"  # the cache entry of a warm-up trained here where arctl ships one for the key


def inserted_style(config: dict) -> str:
    """The run's ``summary.inserted`` (:data:`arctl.algo.prompts.INSERTED_STYLES`): the warm-up trains
    its summaries after these inserted tokens, and checks its accuracy with them."""
    return str((config.get("summary") or {}).get("inserted") or Summary().inserted)


def warmup_key(config: dict) -> str:
    """Hash of everything the warmed-up weights depend on. The inserted tokens enter it only when
    they are not the default, so the default's key (and every run id's warm-up) is the one from
    before the setting existed. Known gap (a review of 2026-12-04): whether a second round is trained
    (``max_rounds`` > 1, accuracy below ``min_acc``) is decided by the first run's accuracy measure, which
    reads ``eval.temperature``, ``tiny.eval_seed``, ``tiny.max_rows`` and the whole ``eval.budgets``, none
    of them in the key: a run with other such values that trains an empty cache first decides the rounds
    for every later run of the key. The shipped warm-up (installed into an empty cache for the default
    key) is not affected; putting them in the key would change the shipped key."""
    tiny = config["tiny"]
    payload = {
        "version": CACHE_VERSION,
        "model": config["model"],
        "task": dict(zip(("name", "knobs"), task_section(tiny["task"]))),  # the selected task's knobs only
        "warmup": dict(tiny["warmup"]),  # threads too: the float sums (hence the weights) depend on them
        "max_budget": int(max(config["eval"]["budgets"])),
        "summary_max_tokens": int(config["summary"]["max_tokens"]),
    }
    if inserted_style(config) != Summary().inserted:
        payload["inserted"] = inserted_style(config)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def shipped_entry(key: str, root: Path = SHIPPED) -> Path | None:
    """The warm-start arctl ships for warm-up ``key`` (``root/<key>``, by default arctl/backends/tiny/shipped), if any."""
    folder = Path(root) / key
    return folder if (folder / "warmup.json").is_file() else None


def entry_dir(key: str, shipped: bool) -> Path:
    """Where warm-up ``key`` is cached: ``<cache>/tiny-warmup/<key>``, and where arctl ships a warm-start for it
    (``shipped``) and ``$ARCTL_TINY_WARMUP`` is ``train``, ``<key>-trained``."""
    from arctl.backends.tiny.settings import warmup_source
    from arctl.config.files import TINY_WARMUP_CACHE, cache_root

    trained = shipped and warmup_source() == "train"
    return cache_root() / TINY_WARMUP_CACHE / (key + TRAINED_SUFFIX if trained else key)


def launch_notes(configs: list[dict]) -> list[str]:
    """One line per warm-up the runs ``configs`` (those a launch would start) train before their first step: a key
    neither in the cache nor shipped with arctl (or ``ARCTL_TINY_WARMUP=train`` where it is shipped), trained by the
    first of them while the others of the key wait. A run that starts from another run's weights
    (``trainer.init_from``) takes none. From a hunt: a dry run of Elastic's arm said nothing of its 16-24 min
    warm-up, and on SLURM the other jobs of the key held their allocations waiting for it."""

    runs: dict[str, list[dict]] = {}
    for config in configs:
        if (config.get("trainer") or {}).get("init_from") or config.get("init_dir"):
            continue
        try:
            runs.setdefault(warmup_key(config), []).append(config)
        except (KeyError, TypeError, ValueError):
            continue  # a config the launch refuses on its own
    notes = []
    for key, of_key in runs.items():
        shipped = shipped_entry(key) is not None
        target = entry_dir(key, shipped)
        if (target / "warmup.json").is_file() or (shipped and target.name == key):
            continue  # cached, or installed from the shipped copy in seconds
        wk = of_key[0]["tiny"]["warmup"]
        why = "ARCTL_TINY_WARMUP=train" if shipped else "arctl ships none for it"
        notes.append(f"the tiny warm-up {key} ({len(of_key)} run{'s' if len(of_key) > 1 else ''}) is not cached and "
                     f"{why}: the first of them trains it before its step 0 ({wk.get('steps')} steps of "
                     f"{wk.get('batch_size')}, up to {wk.get('max_rounds')} rounds{_shipped_took()}), while the others "
                     "of it wait")
    return notes


def _shipped_took() -> str:
    """"; the shipped one took 24 min on 2 cores", from the shipped warm-start's record, or ""."""
    for record in sorted(SHIPPED.glob("*/warmup.json")):
        try:
            info = json.loads(record.read_text())
            minutes, cores = float(info["seconds"]) / 60, (info.get("shipped") or {}).get("cpus")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        return f"; the shipped one took {minutes:.0f} min" + (f" on {cores} cores" if cores else "")
    return ""

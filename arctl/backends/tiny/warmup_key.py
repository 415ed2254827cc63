"""The tiny warm-up's cache key, where its entry is, what it holds, who trains it and the room it needs, without torch:
what a launch (its dry run) reads to say which warm-ups its runs will train before their first step
(:func:`launch_notes`), and what the job checks before it trains one; the warm-up itself is
:mod:`arctl.backends.tiny.warmup`, which imports these."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

from arctl.algo.settings import Summary
from arctl.backends.tiny.tasks import task_section, toy_task
from arctl.config.files import pid_exists
from arctl.track.start_record import TRAINED_SUFFIX  # noqa: F401 - the cache entry of a warm-up trained here

CACHE_VERSION = 2  # 2: toy tasks by name, the weights' hash and the accuracy per budget in warmup.json
SHIPPED = Path(__file__).with_name("shipped")  # warm-starts shipped with arctl: <key>/{model,tokenizer,warmup.json}
# ``model.name`` is a label no builder reads (model.model_config): the key hashes the tiny scale's own name in its place,
# so a model renamed at the tiny scale keeps its key, and the shipped warm-up (a review of 2026-12-07: `model.name=
# my-tiny` trained a warm-up of 16-24 min, bit for bit the shipped one's weights on the kind that made it, another's
# elsewhere); tests/tiny/test_warmup_key_label.py checks it is the scale's name
MODEL_LABEL = "tiny-qwen2"


def inserted_style(config: dict) -> str:
    """The run's ``summary.inserted`` (:data:`arctl.algo.prompts.INSERTED_STYLES`): the warm-up trains
    its summaries after these inserted tokens, and checks its accuracy with them."""
    return str((config.get("summary") or {}).get("inserted") or Summary().inserted)


def warmup_key(config: dict) -> str:
    """Hash of everything the warmed-up weights depend on. The inserted tokens enter it only when
    they are not the default, so the default's key (and every run id's warm-up) is the one from
    before the setting existed. A run's own evaluation settings (:func:`measure_settings`) are not in it: whether a
    second round is trained (``max_rounds`` > 1) is decided by the warm-up's own evaluation
    (:func:`rounds_settings`: what the key hashes and the tiny scale's fixed settings), and each run measures the
    warm-up's accuracy under its own settings where they are not those the entry records. From a review of
    2026-12-04: the rounds followed the accuracy of the run that filled an empty cache, under its
    ``eval.temperature``, ``tiny.eval_seed``, ``tiny.max_rows`` and ``eval.budgets``, so the weights of a key
    depended on which run came first."""
    tiny = config["tiny"]
    payload = {
        "version": CACHE_VERSION,
        "model": {**config["model"], "name": MODEL_LABEL},
        "task": dict(zip(("name", "knobs"), task_section(tiny["task"]))),  # the selected task's knobs only
        "warmup": dict(tiny["warmup"]),  # threads too: torch may split a sum by thread (docs/testbed.md)
        "max_budget": int(max(config["eval"]["budgets"])),
        "summary_max_tokens": int(config["summary"]["max_tokens"]),
    }
    if inserted_style(config) != Summary().inserted:
        payload["inserted"] = inserted_style(config)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


SCALE_PROFILE = Path(__file__).parent / "conf" / "scale" / "tiny.yaml"  # the tiny scale's settings' one home


@functools.cache
def scale_eval() -> dict:
    """The tiny scale's own evaluation settings, read from its profile (:data:`SCALE_PROFILE`): ``temperature``
    (``eval.temperature``), ``eval_seed`` (``tiny.eval_seed``) and ``max_rows`` (``tiny.max_rows``)."""
    import yaml

    profile = yaml.safe_load(SCALE_PROFILE.read_text())
    return {"temperature": float(profile["eval"]["temperature"]), "eval_seed": int(profile["tiny"]["eval_seed"]),
            "max_rows": int(profile["tiny"]["max_rows"])}


def measure_settings(config: dict) -> dict:
    """What a run's measure of its warm-up's accuracy per budget (:func:`arctl.backends.tiny.evaluate.budget_accuracy`,
    the trainer's) reads beyond the key: ``eval.temperature``, ``tiny.eval_seed`` (its problems and sampling stream),
    ``tiny.max_rows`` and ``eval.budgets`` (sorted: the summaries of every budget share one stream, so the accuracy
    at one budget depends on the others). Recorded beside the accuracies a cache entry holds (``accuracy_eval``)."""
    return {"temperature": float(config["eval"]["temperature"]), "eval_seed": int(config["tiny"]["eval_seed"]),
            "max_rows": int(config["tiny"]["max_rows"]), "budgets": sorted(int(b) for b in config["eval"]["budgets"])}


def rounds_settings(config: dict) -> dict:
    """The warm-up's own evaluation, which decides whether another round is trained (``tiny.warmup.max_rounds`` > 1,
    below ``tiny.warmup.min_acc``): ``problems`` (``tiny.warmup.eval_problems``) drawn, and sampled, from ``seed``
    (``tiny.warmup.seed``), at the largest eval ``budget`` alone, at the tiny scale's ``temperature`` and
    ``max_rows`` (:func:`scale_eval`): only what the key hashes and fixed settings, so every run of a key trains
    the same rounds. Recorded in the entry (``rounds_eval``, with the accuracy of each round)."""
    wk, fixed = config["tiny"]["warmup"], scale_eval()
    return {"seed": int(wk["seed"]), "problems": int(wk["eval_problems"]),
            "budget": int(max(config["eval"]["budgets"])), "temperature": fixed["temperature"],
            "max_rows": fixed["max_rows"]}


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


def lock_path(key: str, target: Path) -> Path:
    """The lock the runs of warm-up ``key`` take to make its cache entry ``target``: ``<cache>/tiny-warmup/<key>.lock``
    (one per key, the ``-trained`` entry's too)."""
    return Path(target).parent / f"{key}.lock"


# ----------------------------------------------------------------------------- what a cache entry holds
def cache_problem(target: Path) -> str | None:
    """What is wrong with the cached warm-up ``target`` (its record unreadable, or of another key than the folder's
    name; its weights not those its record names; any other file of it not those made, by ``entry_sha256``: a disk
    error, an edit, a folder copied under another key's name; a file of it that cannot be read), or None. From a
    review: a damaged entry of the shared cache was used by every run, or failed deep in safetensors, while each
    run's record repeated the unchecked sha; from a hunt: an entry copied under another key's name trained another
    model than the run's config, unsaid, and an edited model/config.json trained from another model. An entry of an
    arctl that recorded neither checksum, or no key, is checked for what it records. Reads and hashes bytes only
    (no torch): the warm-up asks it under the key's lock, a launch's notes to say a damaged entry's training."""
    try:
        info = json.loads((target / "warmup.json").read_text())
        key = info.get("key")
    except (OSError, ValueError, AttributeError) as err:
        return f"its warmup.json cannot be read: {type(err).__name__}"
    if key is not None and str(key).removesuffix(TRAINED_SUFFIX) != target.name.removesuffix(TRAINED_SUFFIX):
        return f"its record is of warm-up key {key}, not {target.name}: a cache folder copied or renamed"
    try:
        if (recorded := info.get("weights_sha256")) is not None and (sha := weights_sha256(target / "model")) != recorded:
            return f"weights sha256 {sha[:12]}, recorded {str(recorded)[:12]}"
        if (recorded := info.get("entry_sha256")) is not None and (sha := entry_sha256(target)) != recorded:
            return f"its files' sha256 {sha[:12]}, recorded {str(recorded)[:12]}: its tokenizer or model config changed"
    except PermissionError:  # another member's file: not damage (warmup_model's error says whose)
        raise
    except OSError as err:  # e.g. a folder where the weights should be
        return f"its files cannot be read ({err.filename}: {err.strerror or err})"
    return None


def entry_sha256(entry: Path) -> str:
    """sha256 over every other file of the cache entry ``entry`` than its ``warmup.json`` (which records it) and its
    weights (:func:`weights_sha256`'s, recorded beside it): the tokenizer, the model's config, anything else in it;
    each file's path in the entry and bytes, in path order (a file added, removed or replaced by a folder changes
    it too)."""
    digest = hashlib.sha256()
    skip = {Path(entry) / "warmup.json", *_weight_files(Path(entry) / "model")}
    files = sorted(path.relative_to(entry).as_posix() for path in Path(entry).rglob("*")
                   if not path.is_dir() and path not in skip)
    for name in files:
        data = (Path(entry) / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the saved weight files of a model directory (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in _weight_files(model_dir):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _weight_files(model_dir: Path) -> list[Path]:
    """The saved weight files of a model directory, in name order."""
    return sorted(Path(model_dir).glob("*.safetensors")) or sorted(Path(model_dir).glob("*.bin"))


# ----------------------------------------------------------------------------- who trains it
HOLDER_SUFFIX = ".owner"  # <key>.lock.owner: the run that holds <key>.lock (JSON: run, host, pid, since)


def holder_path(lock: Path) -> Path:
    """The record of the run that holds the warm-up lock ``lock``: ``<key>.lock.owner`` beside it."""
    return Path(str(lock) + HOLDER_SUFFIX)


def write_holder(lock: Path, run_id: str) -> None:
    """Record, as it takes the warm-up lock ``lock``, who holds it: run ``run_id``, this host, this pid, the time
    (UTC), replaced in one step (what a killed holder left is overwritten). Never an error of the warm-up's: a disk
    that cannot take it (full, read-only) leaves the waiting runs saying "another run". From a hunt: a waiting run
    said "waiting for the warm-up (another run trains it)" for as long as a stopped process held the lock, and
    nothing named which run, host or process that was."""
    from arctl.config.files import atomic_write

    record = {"run": run_id, "host": socket.gethostname(), "pid": os.getpid(),
              "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    try:
        atomic_write(holder_path(lock), json.dumps(record) + "\n")
    except OSError:
        pass


def remove_holder(lock: Path) -> None:
    """Remove the record of the lock ``lock``'s holder, before its holder releases it (a run that takes it next
    writes its own)."""
    try:
        holder_path(lock).unlink(missing_ok=True)
    except OSError:
        pass


def lock_holder(lock: Path) -> str | None:
    """Who holds the warm-up lock ``lock``, as its record (:func:`write_holder`) says: "run R (host H, pid P, since
    T)"; None where there is no readable record, or one a process of this host that has ended left (stale: its
    lock was released with it)."""
    try:
        info = json.loads(holder_path(lock).read_text())
        run, host, pid, since = str(info["run"]), str(info["host"]), int(info["pid"]), str(info["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host == socket.gethostname() and not pid_exists(pid):
        return None
    return f"run {run} (host {host}, pid {pid}, since {since})"

    return True


def lock_held(lock: Path) -> bool:
    """Whether a process (of any host sharing the cache) holds the warm-up lock ``lock`` now: a shared lock on it is
    refused (asked without waiting, released at once; the lock file never made). False where it cannot be asked."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- the room it needs
WEIGHT_BYTES = 4  # the warm-up trains and saves float32 weights
TOKENIZER_WORD_BYTES = 64  # a word of the toy vocabulary in tokenizer.json (~23 bytes)
ENTRY_SLACK = 64 * 1024  # the model's config files, the weights' header, the tokenizer's fixed part (~10 KB)


def parameters(config: dict) -> int:
    """Parameters of the Qwen2 the warm-up builds from ``config``'s model section (embedding of the task's
    vocabulary, the lm head unless tied, per layer q/k/v with biases, o, the gated MLP and two norms, the last norm;
    the tokenizer's few special words are left to :data:`ENTRY_SLACK`)."""
    model = config["model"]
    hidden, layers, heads = int(model["hidden_size"]), int(model["num_layers"]), int(model["num_heads"])
    kv = int(model["num_kv_heads"]) * (hidden // heads)
    words = len(toy_task(config["tiny"]["task"]).vocabulary())
    layer = hidden * hidden + hidden + 2 * (hidden * kv + kv) + hidden * hidden + 3 * hidden * int(
        model["intermediate_size"]) + 2 * hidden
    return words * hidden * (1 if model["tie_embeddings"] else 2) + layers * layer + hidden


def entry_bytes(config: dict) -> int:
    """Bytes the warm-up entry of ``config`` takes in the cache: its weights (:func:`parameters` x
    :data:`WEIGHT_BYTES`), its tokenizer and its small files (an upper bound; the shipped one is 4.36 MB)."""
    words = len(toy_task(config["tiny"]["task"]).vocabulary())
    return parameters(config) * WEIGHT_BYTES + words * TOKENIZER_WORD_BYTES + ENTRY_SLACK


def room_problem(config: dict, key: str, target: Path) -> str | None:
    """Why the cache cannot take the warm-up entry ``target`` of ``config`` (key ``key``): the free space of its file
    system (its nearest existing folder) below :func:`entry_bytes`, as one line (what, where, what to do); None where
    it has room or the free space cannot be read. Asked by the job before it trains the warm-up (or installs the
    shipped copy) and by the launch for a key not cached. From a hunt: a cache on a full disk was found only once the
    whole warm-up had trained (16-24 min at tiny scale), as it was saved."""
    from arctl.config.files import CACHE_ENV, cache_named, nearest_existing

    need = entry_bytes(config)
    folder = nearest_existing(Path(target).parent.absolute())
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    if free >= need:
        return None
    return (f"the tiny warm-up {key} needs ~{need / 2**20:.1f} MiB in the user cache ({cache_named()}) and its file "
            f"system has {free / 2**20:.1f} MiB free ({folder}): free some space there, or set {CACHE_ENV} to a "
            "folder with room")


def launch_problem(config: dict) -> str | None:
    """What fails the warm-up of run ``config`` as its job starts, found at the launch without torch: the cache's
    file system has no room for an entry it must make (:func:`room_problem`); None for a run that starts from
    another run's weights (``trainer.init_from``: no warm-up), or whose key is cached."""
    if not takes_warmup(config):
        return None
    try:
        key = warmup_key(config)
        target = entry_dir(key, shipped_entry(key) is not None)
        return None if (target / "warmup.json").exists() else room_problem(config, key, target)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None  # a config the launch refuses on its own


def takes_warmup(config: dict) -> bool:
    """Whether run ``config`` starts from the warm-up: not where it starts from another run's weights
    (``trainer.init_from``; its job's ``init_dir``)."""
    return not ((config.get("trainer") or {}).get("init_from") or config.get("init_dir"))


# ----------------------------------------------------------------------------- what a launch says
def launch_notes(configs: list[dict]) -> list[str]:
    """One line per warm-up the runs ``configs`` (those a launch would start) train before their first step: a key
    neither in the cache nor shipped with arctl (or ``ARCTL_TINY_WARMUP=train`` where it is shipped), or cached but
    damaged (:func:`cache_problem`: the first run sets it aside and trains it), trained by the first of them while the
    others of the key wait, or, where another run holds the key's lock now, by that run (:func:`lock_holder`), which
    they all wait for. A run that starts from another run's weights (``trainer.init_from``) takes none. From hunts: a
    dry run of Elastic's arm said nothing of its 16-24 min warm-up, and on SLURM the other jobs of the key held their
    allocations waiting for it; a damaged entry was counted as cached, its training unsaid."""

    runs: dict[str, list[dict]] = {}
    for config in configs:
        if not takes_warmup(config):
            continue
        try:
            runs.setdefault(warmup_key(config), []).append(config)
        except (KeyError, TypeError, ValueError):
            continue  # a config the launch refuses on its own
    notes = []
    for key, of_key in runs.items():
        shipped = shipped_entry(key) is not None
        target = entry_dir(key, shipped)
        if shipped and target.name == key:
            continue  # installed from the shipped copy in seconds (again, where the cached copy is damaged)
        damage = None
        if (target / "warmup.json").exists():
            try:
                damage = cache_problem(target)
            except PermissionError:  # another member's entry: its job says whose (not a training)
                damage = None
            if damage is None:
                continue  # cached
        wk = of_key[0]["tiny"]["warmup"]
        runs_of = f"{len(of_key)} run{'s' if len(of_key) > 1 else ''}"
        if damage is not None:
            state, does = f"is cached but damaged ({damage})", "sets it aside and trains it"
        else:
            why = "ARCTL_TINY_WARMUP=train" if shipped else "arctl ships none for it"
            state, does = f"is not cached and {why}", "trains it"
        lock = lock_path(key, target)
        if lock_held(lock):  # another launch's run makes it now: these wait for that one
            head, tail = f"{lock_holder(lock) or 'another run'} trains it now, and they wait for it before their", ""
        else:
            head, tail = f"the first of them {does} before its", ", while the others of it wait"
        notes.append(f"the tiny warm-up {key} ({runs_of}) {state}: {head} step 0 ({wk.get('steps')} steps of "
                     f"{wk.get('batch_size')}, up to {wk.get('max_rounds')} rounds{_took(target, damage)}){tail}")
    return notes


def _took(target: Path, damaged: str | None) -> str:
    """"; it took 21 min when trained" from a damaged entry's own record where it can be read, else
    :func:`_shipped_took`'s."""
    if damaged is not None:
        try:
            return f"; it took {float(json.loads((target / 'warmup.json').read_text())['seconds']) / 60:.0f} min when trained"
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return _shipped_took()


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

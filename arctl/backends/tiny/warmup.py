"""Supervised warm-up of the tiny model on reference traces, cached for every workspace of the user.

Every arm and seed of a tiny run starts from the same warmed-up model: it is trained once per
config hash (model section + ``tiny.task`` + ``tiny.warmup`` + the max budget) into
``<cache>/tiny-warmup/<hash>/`` under a file lock, so concurrent arms (of any workspace) wait for
one another instead of training it twice (naming the run that holds it: its record beside the lock,
:func:`arctl.backends.tiny.warmup_key.write_holder`). ``<cache>`` is ``$ARCTL_CACHE``, else
``$XDG_CACHE_HOME/arctl``, else ``~/.cache/arctl`` (:func:`cache_root`). Where arctl ships the warm-start of a key
(``shipped/<key>``: the tiny scale's default, trained once on one machine, 16 min on two cores), the
cache gets that copy instead, its weights' sha256 checked (:func:`install_shipped`), so every machine
starts RL from the same weights; ``ARCTL_TINY_WARMUP=train`` trains it here instead. An entry is checked under the
lock before it is used (:func:`cache_problem`: its record of the key, the weights' and its other files' sha256) and once
loaded (:func:`model_mismatch`: the model and vocabulary its run's config builds); a damaged entry, or one that
does not load, is set aside and made again. A cache folder that cannot
be written fails the job in one line naming the setting it comes from (:class:`WarmupCacheError`; the launch
refuses such a run first), and so does a cache whose disk has no room for the entry, before it is trained
(:func:`arctl.backends.tiny.warmup_key.room_problem`); where the cache's file system has no locks (NFS without
lockd), the warm-up runs unlocked, with a warning. While it trains, the job log
gets a line every ~10 s (step, loss, ETA) and ``arctl status`` shows "warming up 640/1200". Examples are full reference traces or, with probability
``truncate_prob``, traces cut at a random token followed by the truncated summary prompt of
``arctl.algo.prompts`` (with the run's ``summary.inserted`` tokens) and a reference summary (which finishes up to ``summary_finish_steps``
terms with probability ``summary_continue_prob``), so the model answers after any prefix.
"""

from __future__ import annotations

import copy
import errno
import json
import logging
import math
import os
import platform
import shlex
import shutil
import stat
import time
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock, Timeout
from transformers import Qwen2ForCausalLM

from arctl.algo.prompts import InsertedTokens, summary_prompt
from arctl.backends.tiny.model import additive_mask, build_model, model_config
from arctl.backends.tiny.settings import WARMUP_ENV, warmup_source
from arctl.backends.tiny.tasks import ToyTask, toy_task
from arctl.backends.tiny.tokenizer import build_tokenizer, encode_words, load_tokenizer
from arctl.backends.tiny.warmup_key import (  # noqa: F401 - CACHE_VERSION, the entry checks: re-exported
    CACHE_VERSION,
    SHIPPED,
    TRAINED_SUFFIX,
    cache_problem,
    entry_dir,
    entry_sha256,
    inserted_style,
    lock_holder,
    lock_path,
    measure_settings,
    remove_holder,
    room_problem,
    rounds_settings,
    scale_eval,
    shipped_entry,
    warmup_key,
    weights_sha256,
    write_holder,
)
from arctl.config.files import (
    CACHE_ENV,
    CACHE_REMEDY,
    NO_LOCK_ERRNOS,
    PLACE_ERRNOS,
    cache_named,
    file_mode,
    no_lock_warning,
    not_readable,
)
from arctl.track.runs.pool import usable_cpus
from arctl.track.start_record import WARMUP_RECORD

log = logging.getLogger(__name__)


PROGRESS_EVERY_S = 10.0  # seconds between warm-up progress lines




def warmup_dir(config: dict) -> Path:
    """Where the warmed-up model of ``config`` is (or will be) cached: ``<key>``, and where arctl ships a
    warm-start for the key and ``$ARCTL_TINY_WARMUP`` is ``train``, ``<key>-trained``. From a hunt: one entry per
    key served both sources, so ``train`` did nothing once the shipped copy was cached, and after a ``train`` run
    every later default run of every workspace started from that warm-up, under the same run ids, unsaid."""
    key = warmup_key(config)
    return entry_dir(key, shipped_dir(key) is not None)


def workspace_of(run_dir: Path) -> Path:
    """``<ws>`` when ``run_dir`` is ``<ws>/runs/<id>``, else ``$ARCTL_HOME`` or ``./arctl-runs``."""
    run_dir = Path(run_dir).resolve()
    if run_dir.parent.name == "runs":
        return run_dir.parent.parent
    from arctl.config.files import workdir_path

    return workdir_path().resolve()


def resume_command(run_dir: Path) -> str:
    """The backquoted command that resumes run folder ``run_dir``, naming its workspace always: a job's line is
    read in a shell whose working directory the job cannot know, and a backend cannot ask the launch layer
    whether a bare command would mean that workspace (from a review: a bare `arctl resume` acted on
    ./arctl-runs)."""
    return f"`arctl resume {Path(run_dir).name} --workdir {shlex.quote(str(workspace_of(run_dir)))}`"


def training_example(
    problem, rng: np.random.Generator, tok, inserted: InsertedTokens, toy: ToyTask, wk: dict
) -> tuple[list[int], list[bool]]:
    """Token ids and the trainable mask (thinking and summary tokens) of one warm-up example: the
    task's reference thinking, cut at a random token with probability ``truncate_prob``, then the
    summary prompt and the task's reference summary after that prefix."""
    question = encode_words(tok, toy.prompt_words(problem))
    words = toy.reference_thinking(problem, rng)
    thinking = encode_words(tok, words)
    cut = len(thinking)
    if rng.random() < float(wk["truncate_prob"]):
        cut = int(rng.integers(0, len(thinking)))
    prompt = summary_prompt(question, thinking, cut, inserted)
    summary = encode_words(tok, toy.reference_summary(problem, words if prompt.finished else words[:cut],
                                                      prompt.finished, rng))
    return list(prompt.input_ids) + summary, list(prompt.trainable) + [True] * len(summary)


def pack_examples(examples: list[tuple[list[int], list[bool]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pack examples into as few rows as fit (first fit, longest first; row width = the longest
    example): ``input_ids``, ``labels`` (-100 off the trainable tokens), ``position_ids`` restarting
    at 0 per example and a block-diagonal causal additive ``attention_mask`` [R, 1, W, W]. Every
    example sees exactly its own tokens, so the loss equals that of padding each example to its own
    row, on ~half the tokens. (An example's first token is a question token, never a label, so no
    label crosses an example boundary.)"""
    width = max(len(ids) for ids, _ in examples)
    rows: list[list[int]] = []  # example indices per row
    free: list[int] = []
    for i in sorted(range(len(examples)), key=lambda i: -len(examples[i][0])):
        n = len(examples[i][0])
        r = next((r for r, f in enumerate(free) if f >= n), None)
        if r is None:
            rows.append([]), free.append(width)
            r = len(rows) - 1
        rows[r].append(i)
        free[r] -= n
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    seg = torch.full((len(rows), width), -1, dtype=torch.long)
    for r, members in enumerate(rows):
        at = 0
        for i in members:
            seq, train = examples[i]
            t, n = torch.tensor(seq), len(seq)
            ids[r, at : at + n] = t
            labels[r, at : at + n] = torch.where(torch.tensor(train), t, -100)
            pos[r, at : at + n] = torch.arange(n)
            seg[r, at : at + n] = i
            at += n
    cols = torch.arange(width)
    allowed = (cols[None, :] <= cols[:, None])[None] & (seg[:, :, None] == seg[:, None, :]) & (seg[:, None, :] >= 0)
    allowed |= torch.eye(width, dtype=torch.bool)[None]  # padding queries see themselves (no NaN)
    mask = additive_mask(allowed)[:, None]
    return {"input_ids": ids, "labels": labels, "position_ids": pos, "attention_mask": mask}


def lr_at(step: int, total: int, lr: float, min_ratio: float, warmup: int = 50) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``min_ratio * lr``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


class WarmupCacheError(RuntimeError):
    """The user cache cannot hold the warm-up: one line naming the setting the cache comes from."""


# a cache folder the user must change (a full disk is not one: the job's failure line says how full, where)
_CACHE_ERRNOS = PLACE_ERRNOS - {errno.ENOSPC, errno.EDQUOT}


def _cache_error(err: OSError, target: Path, run_dir: Path) -> WarmupCacheError:
    """The job's one line for a warm-up cache folder it cannot write (from a hunt: ``ARCTL_CACHE`` on a
    folder of root's, or ``HOME=/nonexistent``, failed the job "PermissionError: [Errno 13] Permission
    denied: '.../tiny-warmup'", naming no setting; the launch refuses them now, a job on another machine
    can still meet one). Its resume command names the run's workspace (:func:`resume_command`). An existing entry
    this user cannot read (another member's, in a cache a group shares) is said to be that: whose, its mode, and
    what its owner can do (:func:`unreadable_entry`), not "a folder you can write"."""
    if (line := unreadable_entry(target)) is not None:
        return WarmupCacheError(f"{line}, then {resume_command(run_dir)}")
    where = err.filename or target
    return WarmupCacheError(f"the tiny warm-up cache {target} cannot be used ({where}: {err.strerror or err}); "
                            f"the user cache is {cache_named()}: {CACHE_REMEDY}, then {resume_command(run_dir)}")


def _first_unreadable(target: Path) -> Path | None:
    """The first file or folder of the cache entry ``target`` (itself included) this user cannot read (a folder:
    list and enter), in name order; None where it can read them all, or there is no such entry."""
    if not os.path.lexists(target):
        return None
    if not os.access(target, os.R_OK | os.X_OK):
        return target
    for folder, dirs, names in os.walk(target):
        dirs.sort()
        for name in sorted(names):
            if not os.access(os.path.join(folder, name), os.R_OK):
                return Path(folder, name)
        for name in dirs:
            if not os.access(os.path.join(folder, name), os.R_OK | os.X_OK):
                return Path(folder, name)
    return None


def unreadable_entry(target: Path) -> str | None:
    """One line where the cached warm-up ``target`` holds a file (or folder) this user cannot read: which, whose it
    is, its mode, and the fix: its owner opens the entry to the group (``chmod -R g+rX <entry>``), or the user
    takes another cache (``ARCTL_CACHE``); None where there is none. From a hunt: in a cache a group shares
    (``ARCTL_CACHE`` on a 2775 folder), an entry whose weights another member's arctl wrote 0600 failed each other
    member's run "set ARCTL_CACHE to a folder you can write", a folder that was writable."""
    path = _first_unreadable(target)
    why = not_readable(path, fix=target) if path is not None else None
    if why is None:
        return None
    what = "its folder" if path == target else f"its {path.relative_to(target)}"  # (the job's line is cut at 500)
    return f"the cached tiny warm-up {target} cannot be read: {what}: {why}; or set {CACHE_ENV} to another folder"


class WarmupInterrupted(Exception):
    """The run was asked to stop during the warm-up (nothing is cached; the next start redoes it)."""


class WarmupProgress:
    """Progress of the warm-up: a job-log line every :data:`PROGRESS_EVERY_S` seconds (step, loss,
    ETA) and ``on_phase(text)`` ("warming up 640/1200", then None when done) for ``arctl status``."""

    def __init__(self, total: int, on_phase=None, every_s: float | None = None):
        self.total, self.on_phase = total, on_phase
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.start = self.last = time.monotonic()
        self.done = 0

    def update(self, steps_done: int, loss: float) -> None:
        self.done = steps_done
        now = time.monotonic()
        if now - self.last < self.every_s and steps_done < self.total:
            return
        self.last = now
        rate = (now - self.start) / max(steps_done, 1)
        eta = rate * (self.total - steps_done)
        print(f"tiny warm-up {steps_done}/{self.total} loss {loss:.4f} ETA {eta / 60:.1f} min", flush=True)
        self.phase(f"warming up {steps_done}/{self.total}")

    def phase(self, text) -> None:
        if self.on_phase is not None:
            try:
                self.on_phase(text)
            except Exception:  # noqa: BLE001 - progress reporting never breaks the warm-up
                pass


def train_steps(model, tok, inserted, toy: ToyTask, wk: dict, steps: int, rng: np.random.Generator,
                should_stop=None, progress: WarmupProgress | None = None, offset: int = 0) -> float:
    """``steps`` AdamW steps of next-token loss on trainable tokens; returns the last loss.
    ``should_stop()`` is polled every step (raises :class:`WarmupInterrupted`); ``progress``
    hears of every step (``offset`` steps of earlier rounds before these)."""
    opt = torch.optim.AdamW(model.parameters(), lr=float(wk["lr"]), weight_decay=0.0)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        if should_stop is not None and should_stop():
            raise WarmupInterrupted(f"stopped at warm-up step {step}/{steps}")
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, float(wk["lr"]), float(wk["min_lr_ratio"]))
        probs = toy.make_problems(rng, int(wk["batch_size"]))
        batch = pack_examples([training_example(p, rng, tok, inserted, toy, wk) for p in probs], tok.pad_token_id)
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = float(loss.detach())
        if step % 200 == 0 or step == steps - 1:
            log.info("tiny warm-up step %d/%d loss %.4f", step + 1, steps, loss_value)
        if progress is not None:
            progress.update(offset + step + 1, loss_value)
    model.eval()
    return loss_value


def warmup_model(config: dict, run_dir: Path, accuracy_fn, should_stop=None,
                 on_phase=None) -> tuple[Qwen2ForCausalLM, object, dict]:
    """Load the cached warmed-up model for ``config`` or train it (once, under a lock, on
    ``tiny.warmup.threads`` torch threads: a fixed number, so the same config gives the same weights
    on every machine of one kind; 0 = every core, fast and machine-dependent).

    Training continues for up to ``max_rounds`` rounds until the warm-up's own evaluation
    (:func:`rounds_accuracy`) reaches ``min_acc``, else a warning says so. ``accuracy_fn(model, tokenizer) ->
    {budget: accuracy}`` measures the run's accuracy at its eval budgets, under its own settings
    (:func:`measure_settings`): once when it trains the entry, and again for a run whose settings are not those
    the entry records (:func:`own_accuracy`). ``warmup.json`` records the weights' sha256, the accuracy per budget
    with the settings it was measured under, and the warm-up's own evaluation of each round.
    ``should_stop()`` (e.g. a preemption signal) aborts the training with :class:`WarmupInterrupted`.
    ``on_phase(text)`` hears "waiting on the tiny warm-up: run R (host H, pid P, since T) trains it", "warming up
    640/1200", None.
    Returns (model, tokenizer, info).
    """
    key = warmup_key(config)
    target = warmup_dir(config)
    try:
        return _warmup_model(config, key, target, run_dir, accuracy_fn, should_stop, on_phase)
    except OSError as err:
        if err.errno in _CACHE_ERRNOS and _in_cache(err, target):
            raise _cache_error(err, target, run_dir) from err
        raise


def _in_cache(err: OSError, target: Path) -> bool:
    """Whether ``err`` is about the warm-up cache folder of ``target``: a path in it, or one of the folders
    above it, which making it makes (not, say, the run's own folder)."""
    if err.filename is None:
        return False
    try:
        path, root = Path(os.fsdecode(err.filename)).absolute(), target.parent.absolute()
    except (OSError, ValueError):
        return False
    return path.is_relative_to(root) or root.is_relative_to(path)


WAITING_PHASE = "waiting on the tiny warm-up: {who} trains it"  # not "waiting for <run>" (the run a run starts from)


def _locked(lock: FileLock, target: Path, should_stop=None, on_phase=None) -> bool:
    """Take the warm-up's ``lock``, waiting (stoppable) while another run trains it; False where the
    cache's file system has no locks (ENOLCK, ...: a warning, and the warm-up goes on unlocked: from a
    hunt, runs failed "OSError: [Errno 37] No locks available", naming no path). While it waits, the phase and the
    job log name the run that holds the lock, as its record says (:func:`lock_holder`; "another run" where there is
    none), again each time that changes (a holder killed, another run taking over)."""
    try:
        try:
            lock.acquire(timeout=0)
            return True
        except Timeout:  # another run (of any workspace) trains it: wait for it, stoppable
            pass
        said = None
        while True:
            if (who := lock_holder(Path(lock.lock_file)) or "another run") != said:
                said = who
                if on_phase is not None:
                    on_phase(WAITING_PHASE.format(who=who))
                print(f"tiny warm-up: waiting for {who} to finish training {target}", flush=True)
            try:
                lock.acquire(timeout=1.0)
                return True
            except Timeout:
                if should_stop is not None and should_stop():
                    raise WarmupInterrupted("stopped while waiting for another run's warm-up") from None
    except OSError as err:
        if err.errno not in NO_LOCK_ERRNOS:
            raise
        no_lock_warning(lock.lock_file, err, f"the tiny warm-up into {target}")
        return False


def _warmup_model(config: dict, key: str, target: Path, run_dir: Path, accuracy_fn, should_stop, on_phase):
    lock = lock_path(key, target)
    if os.path.lexists(lock) and not lock.is_file():  # from a hunt: "cannot be used (...lock: Is a directory);
        # set ARCTL_CACHE to a folder you can write", a folder that was writable
        what = "a folder" if lock.is_dir() else "not a file"
        raise WarmupCacheError(f"the tiny warm-up's lock {lock} is {what}: arctl makes it a file and no run uses "
                               f"it as it is: remove it (rm -r {shlex.quote(str(lock))}), then {resume_command(run_dir)}")
    _make_entry(config, key, target, run_dir, accuracy_fn, should_stop, on_phase)
    try:
        info, tok, model = _load_entry(target)
    except _Unloadable:  # its check passed (an entry recording no checksum of these files): set aside, made again
        _make_entry(config, key, target, run_dir, accuracy_fn, should_stop, on_phase, check_load=True)
        try:
            info, tok, model = _load_entry(target)
        except _Unloadable as err:
            raise ValueError(f"the tiny warm-up {target} does not load, even made again ({err})") from err
    if (why := model_mismatch(config, model, tok)) is not None:  # from a hunt: an entry copied under another
        # key's name trained a 32-wide model for a run configured 48 wide, unsaid
        raise ValueError(f"the cached tiny warm-up {target} is not of this run's model ({why}): move it away "
                         f"(mv {shlex.quote(str(target))} {shlex.quote(str(target) + '.other')}; it is made "
                         f"again), then {resume_command(run_dir)}")
    wk = config["tiny"]["warmup"]
    rounds_acc = (info.get("rounds_eval") or {}).get("accuracy")  # the warm-up's own evaluation, each round
    if rounds_acc is None and int(wk["max_rounds"]) > 1 and not info.get("shipped"):  # (the shipped one's single
        # round stands under the warm-up's own evaluation: tests/tiny/test_warmup_round_decision.py)
        print(f"tiny warm-up: NOTE the cached warm-up {target} was made by an arctl that decided its rounds "
              f"({info.get('rounds')}) on its maker's evaluation settings, not on the warm-up's own: remove it to make "
              "it again by the rule of every run", flush=True)
    decided = float(rounds_acc[-1]) if rounds_acc else float(info["accuracy"])  # (an entry without it: its maker's)
    if decided < float(wk["min_acc"]):
        log.warning(
            "tiny warm-up: accuracy %.3f at the max budget is below tiny.warmup.min_acc=%.2f "
            "(cache %s); RL may not learn: raise tiny.warmup.steps",
            decided, float(wk["min_acc"]), target,
        )
    mine = own_accuracy(config, info, lambda: accuracy_fn(model, tok), earlier=_earlier_record(run_dir, info))
    info.update(accuracy_per_budget=mine, accuracy=mine[max(mine, key=int)], accuracy_eval=measure_settings(config))
    info["path"] = str(target)
    info["source"] = ("shipped" if target.name == key and shipped_dir(key) is not None
                      else "trained")  # the run's record says which
    return model, tok, info


def _make_entry(config: dict, key: str, target: Path, run_dir: Path, accuracy_fn, should_stop, on_phase,
                check_load: bool = False) -> None:
    """Under the key's lock (its holder, run ``run_dir``, recorded beside it: :func:`write_holder`): set the entry
    ``target`` aside where it is damaged (:func:`cache_problem`; with ``check_load``, also where it does not load:
    :func:`_load_entry`), then, where there is none, fail at once where the cache has no room for it
    (:func:`room_problem`), else install the shipped copy or train it."""
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path(key, target)))
    locked = _locked(lock, target, should_stop, on_phase)
    try:
        if locked:
            write_holder(Path(lock.lock_file), Path(run_dir).name)
        if (target / "warmup.json").exists() and (unread := _first_unreadable(target)) is not None:  # another
            # member's, not a damaged one: never set aside (warmup_model's error says whose, and the fix)
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(unread))
        if (target / "warmup.json").exists() and (why := cache_problem(target) or (
                check_load and _load_problem(target))):  # under the lock: no reader meanwhile
            aside = _set_aside(target, "damaged")
            print(f"tiny warm-up: WARNING the cached warm-up {target} is damaged ({why}); set aside as {aside.name}, "
                  "made again", flush=True)
        if (target.name == key and (target / "warmup.json").exists() and shipped_dir(key) is not None
                and warmup_source() != "train" and not _is_shipped(key, target)):  # an entry of an arctl that
            # trained into <key>: the default is the shipped copy, and this one is the trained entry's
            trained = target.with_name(key + TRAINED_SUFFIX)
            aside = trained if not trained.exists() else target.with_name(
                f"{key}.replaced-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            target.rename(aside)
            print(f"tiny warm-up: the cached warm-up {target} was trained here, not the warm-start arctl ships for "
                  f"this config; moved to {aside.name} ({WARMUP_ENV}=train uses it), the shipped copy installed",
                  flush=True)
        if not (target / "warmup.json").exists() and (short := room_problem(config, key, target)) is not None:
            raise WarmupCacheError(f"{short}, then {resume_command(run_dir)}")
        if not (target / "warmup.json").exists() and not install_shipped(key, target, alone=locked):
            threads = torch.get_num_threads()
            # the CPUs this process may use (taskset, a SLURM step), not the host's: more threads than those
            # over-subscribe them (from a review)
            torch.set_num_threads(int(config["tiny"]["warmup"].get("threads") or 0) or usable_cpus())
            print(f"tiny warm-up: training the shared model into {target}", flush=True)
            try:
                _train_into(config, target, accuracy_fn, should_stop, on_phase, alone=locked)
            finally:
                torch.set_num_threads(threads)
    finally:
        if locked:
            remove_holder(Path(lock.lock_file))  # before the release: the next holder's record is its own
            lock.release()
    if on_phase is not None:
        on_phase(None)


def _set_aside(target: Path, why: str) -> Path:
    """Rename the entry ``target`` to ``<name>.<why>-<time>-<pid>[-N]`` (a name no other entry set aside has: one
    set aside twice in a second, made again from the shipped copy in between, kept both) and return that path."""
    stem = f"{target.name}.{why}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    aside, n = target.with_name(stem), 1
    while os.path.lexists(aside):
        n += 1
        aside = target.with_name(f"{stem}-{n}")
    target.rename(aside)
    return aside


class _Unloadable(Exception):
    """The cached entry does not load (its tokenizer or model config cut or edited); its message says why."""


def _load_entry(target: Path) -> tuple[dict, object, Qwen2ForCausalLM]:
    """The record, tokenizer and model of the cached entry ``target``; :class:`_Unloadable` where one of them does not
    load (from a hunt: a cut tokenizer.json or model/config.json failed every run of the key with a raw
    traceback, and the entry was never set aside). A file this user may not read is not damage: raised as it is."""
    try:
        info = json.loads((target / "warmup.json").read_text())
        float(info["accuracy"])
        tok = load_tokenizer(target / "tokenizer")
        model = Qwen2ForCausalLM.from_pretrained(str(target / "model"), attn_implementation="sdpa")
    except PermissionError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever a damaged file raises in json, tokenizers, transformers
        text = " ".join(str(err).split())[:200]
        raise _Unloadable(f"it does not load: {type(err).__name__}: {text}") from err
    model.eval()
    return info, tok, model


def _load_problem(target: Path) -> str | None:
    """Why the cached entry ``target`` does not load, or None where it does."""
    try:
        _load_entry(target)
    except _Unloadable as err:
        return str(err)
    return None


MODEL_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                "vocab_size", "tie_word_embeddings", "max_position_embeddings")  # what model_config sets from a run


def model_mismatch(config: dict, model, tok) -> str | None:
    """How the loaded warm-up ``model`` and its tokenizer ``tok`` differ from what the run's ``config`` builds (the
    model section's shape, the task's vocabulary), or None where they do not."""
    want_tok = build_tokenizer(toy_task(config["tiny"]["task"]).vocabulary())
    want = model_config(config["model"], len(want_tok), want_tok.pad_token_id, want_tok.eos_token_id)
    diffs = [f"{field} {getattr(model.config, field, None)}, the run's {getattr(want, field)}"
             for field in MODEL_FIELDS if getattr(model.config, field, None) != getattr(want, field)]
    if tok.get_vocab() != want_tok.get_vocab():
        diffs.append("its tokenizer's vocabulary is not the task's")
    return "; ".join(diffs) or None


def _is_shipped(key: str, target: Path) -> bool:
    """Whether the cached warm-up ``target`` holds the weights arctl ships for ``key`` (by their recorded sha256)."""
    source = shipped_dir(key)
    if source is None:
        return False
    try:
        mine = json.loads((target / "warmup.json").read_text()).get("weights_sha256")
        shipped = json.loads((source / "warmup.json").read_text()).get("weights_sha256")
    except (OSError, ValueError, AttributeError):
        return False
    return mine is not None and mine == shipped


def recorded_settings(info: dict) -> dict | None:
    """The settings (:func:`measure_settings`) the accuracies per budget of the cache entry whose record is ``info``
    were measured under: its ``accuracy_eval``; for the warm-start arctl shipped before it was recorded (a record
    with ``shipped`` and none: ``benchmarks/ship_warmstart.py`` measured it as the tiny scale's default run,
    main-ar-uniform, does), the tiny scale's (:func:`scale_eval`) at its budgets; None where they are unknown (an
    entry an earlier arctl trained)."""
    if isinstance(recorded := info.get("accuracy_eval"), dict):
        return recorded
    if info.get("shipped") and info.get("accuracy_per_budget"):
        return {**scale_eval(), "budgets": sorted(int(b) for b in info["accuracy_per_budget"])}
    return None


def _earlier_record(run_dir: Path, info: dict) -> dict | None:
    """The warm-up record an earlier attempt of the run in ``run_dir`` wrote (its ``warmup.json``), where it is of the
    weights of the cache entry whose record is ``info``; else None."""
    try:
        record = json.loads((Path(run_dir) / WARMUP_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or info.get("weights_sha256") is None:
        return None
    return record if record.get("weights_sha256") == info["weights_sha256"] else None


def own_accuracy(config: dict, info: dict, measure, earlier: dict | None = None) -> dict[str, float]:
    """The warm-up's accuracy at this run's ``eval.budgets``, measured under this run's settings
    (:func:`measure_settings`): the entry's own (``info``), or the one an earlier attempt of the run recorded
    (``earlier``, of the same weights), where it was measured under the same settings (nothing measured: a run with
    other eval settings than the entry's measured them again at every resume, ~15 s), else ``measure() -> {budget:
    accuracy}`` (the run's own generator: the same numbers in every run that asks), the entry left as it is. From a review of 2026-12-07: a run recorded as its warm-up's accuracy
    (``run_dir/warmup.json``, W&B, claims.md) the one measured by the run that made the cache, under that run's
    ``eval.temperature``, ``tiny.eval_seed``, ``tiny.max_rows`` and ``eval.budgets``."""
    mine = measure_settings(config)
    for record in (info, earlier or {}):
        have = record.get("accuracy_per_budget") or {}
        if _same(recorded_settings(record), mine) and all(str(b) in have for b in mine["budgets"]):
            return {str(b): float(have[str(b)]) for b in mine["budgets"]}
    return {str(b): float(a) for b, a in sorted((int(b), a) for b, a in measure().items())}


def _same(recorded: dict | None, mine: dict) -> bool:
    """Whether the recorded settings ``recorded`` (read back from JSON) are ``mine``."""
    try:
        return recorded is not None and measure_settings({
            "eval": {"temperature": recorded["temperature"], "budgets": recorded["budgets"]},
            "tiny": {"eval_seed": recorded["eval_seed"], "max_rows": recorded["max_rows"]}}) == mine
    except (KeyError, TypeError, ValueError):
        return False


def rounds_accuracy(model, tok, config: dict) -> float:
    """The warm-up's own evaluation (:func:`rounds_settings`): accuracy at the largest eval budget alone on
    ``tiny.warmup.eval_problems`` problems drawn, and sampled, from ``tiny.warmup.seed``, at the tiny scale's
    temperature and row batch; what decides another round. The trainer's measure
    (:func:`arctl.backends.tiny.evaluate.budget_accuracy`) under those settings."""
    from arctl.backends.tiny.evaluate import budget_accuracy  # (it imports this module)

    fixed, own = rounds_settings(config), copy.deepcopy(config)
    own["eval"].update(temperature=fixed["temperature"], budgets=[fixed["budget"]])
    own["tiny"].update(eval_seed=fixed["seed"], max_rows=fixed["max_rows"])
    return float(budget_accuracy(model, tok, own, fixed["problems"])[fixed["budget"]])


def shipped_dir(key: str) -> Path | None:
    """The warm-start arctl ships for warm-up ``key`` (``arctl/backends/tiny/shipped/<key>``; :data:`SHIPPED`, which
    tests replace), if any."""
    return shipped_entry(key, SHIPPED)


def install_shipped(key: str, target: Path, alone: bool = True) -> bool:
    """Put the shipped warm-start of ``key`` in the cache at ``target``, its weights' sha256 checked
    against its record; False when there is none, when ``$ARCTL_TINY_WARMUP`` is ``train``, or when
    the shipped copy is damaged (a warning; the caller then trains the warm-up). The copy's ``warmup.json`` records
    the sha256 of its other files (:func:`entry_sha256`), checked against the shipped record's where it has one."""
    source = shipped_dir(key)
    if source is None or warmup_source() == "train":
        return False
    info = json.loads((source / "warmup.json").read_text())
    sha = weights_sha256(source / "model")
    if sha != info.get("weights_sha256"):
        log.warning("tiny warm-up: the shipped warm-start %s is damaged (weights sha256 %s, recorded %s); "
                    "training the warm-up instead (reinstall arctl to restore it)", source, sha[:12],
                    str(info.get("weights_sha256"))[:12])
        return False
    tmp = _staging(target, alone)
    _copy_as_made(source, tmp)
    files = entry_sha256(tmp)  # recorded in the cache's copy: a shipped record without it (before 2026-12-07) is kept
    if info.get("entry_sha256", files) != files:
        shutil.rmtree(tmp, ignore_errors=True)
        log.warning("tiny warm-up: the shipped warm-start %s is damaged (its files' sha256 %s, recorded %s); "
                    "training the warm-up instead (reinstall arctl to restore it)", source, files[:12],
                    str(info.get("entry_sha256"))[:12])
        return False
    (tmp / "warmup.json").write_text(json.dumps({**info, "entry_sha256": files}, indent=1) + "\n")
    _publish(tmp, target)
    where = (info.get("shipped") or {}).get("machine", "another machine")
    print(f"tiny warm-up: the warm-start shipped with arctl for this config ({key}, weights sha256 {sha[:12]}, "
          f"trained on {where}); {WARMUP_ENV}=train trains it here instead", flush=True)
    return True


def _copy_as_made(source: Path, dest: Path) -> None:
    """Copy the folder ``source`` to the new folder ``dest``, every file and folder made as this user makes any (the
    umask's mode; a setgid folder's bit and group), not with the installed package's modes, which a plain
    ``shutil.copytree`` copies (a package installed under umask 077 ships 0600 files and 0700 folders, which no
    other member of a cache a group shares can read)."""
    dest.mkdir()
    made = stat.S_IMODE(dest.stat().st_mode)  # a folder as this user makes one here
    shutil.copytree(source, dest, copy_function=shutil.copyfile, dirs_exist_ok=True)  # files made anew; folders
    for folder, _, _ in os.walk(dest):  # get the package's modes (copystat): given back those of a new folder
        os.chmod(folder, made)


def machine_kind() -> str:
    """What float sums depend on: the CPU model, the kernels torch picks for it, torch's version."""
    model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), None)
    model = model or platform.processor() or platform.machine()
    return f"{model} | {torch.backends.cpu.get_cpu_capability()} | torch {torch.__version__}"


def _train_into(config: dict, target: Path, accuracy_fn, should_stop=None, on_phase=None, alone: bool = True) -> None:
    toy, wk = toy_task(config["tiny"]["task"]), config["tiny"]["warmup"]
    tok = build_tokenizer(toy.vocabulary())
    inserted = InsertedTokens.from_tokenizer(tok, inserted_style(config))
    mcfg = model_config(config["model"], len(tok), tok.pad_token_id, tok.eos_token_id)
    model = build_model(mcfg, int(wk["seed"]))
    rng = np.random.default_rng(int(wk["seed"]))
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(int(wk["seed"]))
    t0 = time.perf_counter()
    decided, rounds, loss = [], 0, float("nan")
    steps, top = int(wk["steps"]), rounds_settings(config)["budget"]
    progress = WarmupProgress(steps * int(wk["max_rounds"]), on_phase)
    try:
        for rounds in range(1, int(wk["max_rounds"]) + 1):
            progress.total = steps * rounds  # extra rounds only when the accuracy falls short
            loss = train_steps(model, tok, inserted, toy, wk, steps, rng, should_stop, progress, steps * (rounds - 1))
            decided.append(rounds_accuracy(model, tok, config))  # the warm-up's own: not the run's settings
            done = decided[-1] >= float(wk["min_acc"]) or rounds == int(wk["max_rounds"])
            print(f"tiny warm-up round {rounds}/{int(wk['max_rounds'])}: loss {loss:.4f}, its own evaluation's "
                  f"accuracy {decided[-1]:.3f} at the largest budget {top} (tiny.warmup.min_acc "
                  f"{float(wk['min_acc']):.2f}); " + ("done" if done else f"training round {rounds + 1}"), flush=True)
            if done:
                break
        per_budget = {int(b): float(a) for b, a in accuracy_fn(model, tok).items()}  # this run's, as it records it
    finally:
        torch.random.set_rng_state(torch_state)
    tmp = _staging(target, alone)
    model.save_pretrained(str(tmp / "model"))
    tok.save_pretrained(str(tmp / "tokenizer"))
    info = {"accuracy": per_budget[max(per_budget)],  # the maker's, under its settings (accuracy_eval)
            "accuracy_per_budget": {str(b): a for b, a in sorted(per_budget.items())},
            "accuracy_eval": measure_settings(config), "rounds": rounds,
            "rounds_eval": {**rounds_settings(config), "accuracy": decided},  # what decided the rounds
            "loss": loss, "seconds": time.perf_counter() - t0, "key": target.name, "threads": torch.get_num_threads(),
            "torch": torch.__version__, "machine": machine_kind(), "weights_sha256": weights_sha256(tmp / "model"),
            "entry_sha256": entry_sha256(tmp)}
    (tmp / "warmup.json").write_text(json.dumps(info, indent=1))
    _publish(tmp, target)


def _staging(target: Path, alone: bool = True) -> Path:
    """An empty sibling of ``target`` to build a cache entry in: ``<name>.tmp`` (what a crash left there
    removed) under the key's lock (``alone``), else (a file system without locks) ``<name>.tmp-<pid>``,
    which another run building the same entry at the same moment does not remove."""
    tmp = target.with_name(target.name + ".tmp" + ("" if alone else f"-{os.getpid()}"))
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def _publish(tmp: Path, target: Path) -> None:
    """Replace ``target`` with the finished ``tmp`` (under the key's lock): the entry appears whole, by
    one rename of the staged folder, so a half-built entry is never taken for a warm-up. An entry another
    run published meanwhile (possible only unlocked, on a file system without locks) is kept, ``tmp`` dropped:
    that run may be loading it. Every file of ``tmp`` is first given the mode the umask gives a new file
    (:func:`_as_made`)."""
    _as_made(tmp)
    if not (target / "warmup.json").exists():
        shutil.rmtree(target, ignore_errors=True)
        try:
            tmp.rename(target)
            return
        except OSError:
            if not (target / "warmup.json").exists():
                raise
    shutil.rmtree(tmp, ignore_errors=True)


def _as_made(tmp: Path) -> None:
    """Give every file of the staged entry ``tmp`` the mode any file this user makes gets (0666 less the umask:
    :func:`arctl.config.files.file_mode`); its folders have theirs as made. From a hunt: safetensors writes the
    weights 0600 whatever the umask, so in a cache a group shares (a 2775 folder, umask 002) no other member could
    read a warm-up one of them trained."""
    mode = file_mode()
    for folder, _, names in os.walk(tmp):
        for name in names:
            os.chmod(os.path.join(folder, name), mode)

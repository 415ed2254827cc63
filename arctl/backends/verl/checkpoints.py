"""verl checkpoints a resume can trust: each step saved once, a save marked complete only after it
ended, and verl's tracker pointing at a complete checkpoint before every attempt.

verl 0.9.1 saves ``global_step_N/`` (the actor's shards, ``data.pt``) and then rewrites
``latest_checkpointed_iteration.txt`` in place (truncate, write); ``find_latest_ckpt_path`` reads it
with ``int()`` and resumes from the folder it names. Three ways to a resume that fails or loads a
broken checkpoint:

- a step where ``trainer.save_freq`` fires and a stop is requested was saved twice into the same
  folder (verl's save, then the stop's): a kill during the second save (a step is abandoned on
  TERM) left the tracker naming a half-overwritten folder. :class:`SaveOnce` saves a step once.
- a kill during a save of a new step leaves a partial folder; a kill between the tracker's truncate
  and its write leaves it empty, and every later attempt dies in ``int('')``.
- a folder damaged after it was saved (a full disk, a truncated file).

After a save has returned, :func:`mark_complete` writes ``global_step_N/arctl_complete.json`` (every
file's size). Before each attempt :func:`repair` points the tracker (an atomic write) at the newest
folder whose marker holds and whose files still have their sizes, or removes it when there is none
(the run starts over), and says what it skipped; skipped folders stay on disk for inspection.

A complete checkpoint past a step whose row the run lost (a node lost right after the save) is not resumed from
either (:func:`arctl.backends.verl.history.resume_point`): it is set aside (:func:`set_aside`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from arctl.config.files import atomic_write

TRACKER = "latest_checkpointed_iteration.txt"  # verl's pointer to the newest checkpoint
MARKER = "arctl_complete.json"
FOLDER = "global_step_{}"
_FOLDER_RE = re.compile(r"global_step_(\d+)")


def folder(checkpoint_dir: Path | str, step: int) -> Path:
    return Path(checkpoint_dir) / FOLDER.format(int(step))


def _files(step_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(step_dir)): p.stat().st_size
            for p in sorted(step_dir.rglob("*")) if p.is_file() and p.name != MARKER}


def mark_complete(checkpoint_dir: Path | str, step: int) -> None:
    """Record that the save of ``step`` has ended: ``arctl_complete.json`` with every file's size."""
    step_dir = folder(checkpoint_dir, step)
    atomic_write(step_dir / MARKER, json.dumps({"step": int(step), "files": _files(step_dir)}, indent=1))


def problem(checkpoint_dir: Path | str, step: int) -> str | None:
    """Why the checkpoint of ``step`` cannot be resumed from, or None when it is complete."""
    step_dir = folder(checkpoint_dir, step)
    try:
        recorded = json.loads((step_dir / MARKER).read_text())
    except FileNotFoundError:
        return "its save did not finish (no completion marker)"
    except (OSError, ValueError) as err:
        return f"its completion marker cannot be read ({err})"
    files = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or recorded.get("step") != int(step):
        return "its completion marker is not arctl's"
    try:
        now = _files(step_dir)
    except OSError as err:
        return f"its files cannot be listed ({err})"
    for name, size in files.items():
        if name not in now:
            return f"{name} is missing"
        if now[name] != size:
            return f"{name} has {now[name]} bytes, {size} when saved"
    return None


def saved_steps(checkpoint_dir: Path | str) -> list[int]:
    """Steps with a ``global_step_N`` folder, newest first."""
    d = Path(checkpoint_dir)
    if not d.is_dir():
        return []
    steps = [int(m.group(1)) for p in d.iterdir() if p.is_dir() and (m := _FOLDER_RE.fullmatch(p.name))]
    return sorted(steps, reverse=True)


def newest_complete(checkpoint_dir: Path | str) -> tuple[int, list[str]]:
    """The step of the newest complete checkpoint (0: none) and one line per newer one skipped."""
    d, notes = Path(checkpoint_dir), []
    for step in saved_steps(d):
        why = problem(d, step)
        if why is None:
            return step, notes
        notes.append(f"checkpoint {folder(d, step)} skipped: {why}")
    return 0, notes


SET_ASIDE = ".rows-lost"  # the suffix of a checkpoint folder a resume went back past (its steps' rows were lost)


def set_aside(checkpoint_dir: Path | str, step: int) -> Path:
    """Rename the folder of ``step`` ``global_step_N`` + :data:`SET_ASIDE` (``-2``, ``-3``... where the step was set
    aside before): left on disk, as skipped folders are, and never again resumed from, counted, pruned or saved
    over (those look for ``global_step_N`` alone). Returns where it went."""
    d = Path(checkpoint_dir)
    target, n = d / f"{FOLDER.format(int(step))}{SET_ASIDE}", 1
    while target.exists():  # the step set aside before, saved again, and set aside again
        n += 1
        target = d / f"{FOLDER.format(int(step))}{SET_ASIDE}-{n}"
    folder(d, step).rename(target)
    return target


def repair(checkpoint_dir: Path | str) -> tuple[int, list[str]]:
    """Point verl's tracker at the newest complete checkpoint (remove it when there is none).
    Returns that step (0: the run starts over) and one line per checkpoint skipped or tracker fixed."""
    d = Path(checkpoint_dir)
    step, notes = newest_complete(d)
    tracker = d / TRACKER
    try:
        recorded = tracker.read_text().strip()
    except FileNotFoundError:
        recorded = None
    except (OSError, UnicodeDecodeError) as err:
        recorded = f"<unreadable: {err}>"
    if step and recorded != str(step):
        notes.append(f"{tracker} said {recorded!r}; now {step}")
        atomic_write(tracker, str(step))
    elif not step and recorded is not None:
        notes.append(f"{tracker} said {recorded!r} but no checkpoint is complete: the run starts over")
        tracker.unlink()
    return step, notes


def prune(checkpoint_dir: Path | str, keep: int) -> list[int]:
    """Remove every ``global_step_N`` folder older than the newest ``keep`` complete ones (whole
    folders: the actor's shards, verl's ``data.pt`` and arctl's marker); returns the steps removed.
    A folder newer than those (a save that did not finish) is left, as :func:`repair` leaves it.
    verl's own ``max_actor_ckpt_to_keep`` is not used: it removes only ``global_step_N/actor`` and
    forgets what it saved before a requeue, so a preempted run would keep one checkpoint per attempt."""
    d = Path(checkpoint_dir)
    steps = saved_steps(d)
    complete = [s for s in steps if problem(d, s) is None]
    if len(complete) <= max(1, keep):
        return []
    oldest_kept = complete[max(1, keep) - 1]
    removed = [s for s in steps if s < oldest_kept]
    for s in removed:
        shutil.rmtree(folder(d, s), ignore_errors=True)
    return removed


class SaveOnce:
    """Mixin of verl's trainer: ``_save_checkpoint`` saves a step once (verl's ``save_freq`` and a
    stop request at the same step call it twice), marks the save complete when it has ended, and
    then keeps only the newest ``arctl.keep_checkpoints`` complete checkpoints (:func:`prune`)."""

    _arctl_saved_step: int | None = None

    def _save_checkpoint(self):
        step = int(self.global_steps)
        if self._arctl_saved_step == step:
            return None
        from arctl.backends.verl import stop_request

        ckpt = self.config.trainer.default_local_dir
        with stop_request.saving(stop_request.stop_file_of(self.config)):  # not abandoned while it writes
            if folder(ckpt, step).is_dir() and problem(ckpt, step) is not None:
                # an earlier attempt's save of this step that repair skipped (damaged, or never finished):
                # verl writes its files over it in place, and a kill during that would leave its old marker
                # over a mix of both, taken for complete; this attempt's save starts from an empty folder
                # (where a file cannot be removed, as a busy one on NFS, at least without the old marker)
                shutil.rmtree(folder(ckpt, step), ignore_errors=True)
                (folder(ckpt, step) / MARKER).unlink(missing_ok=True)
            out = super()._save_checkpoint()
            mark_complete(ckpt, step)
        self._arctl_saved_step = step
        keep = self.config.get("arctl", {}).get("keep_checkpoints")
        if keep:
            prune(ckpt, int(keep))
        return out

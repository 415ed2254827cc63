"""Checkpoints of a tiny run: model, optimizer, every RNG stream, step and W&B run id.

``run_dir/checkpoints/step_{step:06d}.pt`` written atomically (temp file, flushed to disk, + rename),
then its checksum ``step_{step:06d}.pt.sha256`` (JSON: sha256, bytes, step); the newest ``keep`` up to
the one just saved are kept, and damaged newer ones (a resume skipped them) are renamed ``*.damaged``.
Restoring one continues the run exactly: same weights, same optimizer moments, same sampling
generator and the same python / numpy / torch global RNG states.

A checkpoint is verified before it is loaded: a file whose bytes no longer match its checksum
(flipped bits, truncated, emptied) or that does not load is skipped, with a warning, for the newest
intact one (:func:`newest_intact`); if none is intact the run fails with one line naming the files.
A checkpoint without a checksum file (an older arctl, or a job killed between the two renames) is
used if it loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from arctl.config.files import atomic_write, file_sha256, replacing

_NAME = re.compile(r"^step_(\d+)\.pt$")
SUM_SUFFIX = ".sha256"
DAMAGED_SUFFIX = ".damaged"  # a damaged checkpoint newer than the run's next save, kept for a look


class CheckpointError(RuntimeError):
    """No checkpoint of the run can be used: one line naming each file and what is wrong with it."""


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def _checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file, oldest first."""
    d = checkpoint_dir(run_dir)
    if not d.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)))


def save_checkpoint(
    run_dir: Path, step: int, model, optimizer, generator: torch.Generator, wandb_id: str | None, keep: int,
    covers: Path | None = None,
) -> Path:
    """Save the checkpoint of ``step`` (durable: flushed to disk before the older ones are pruned). ``covers``:
    the file of the rows the checkpoint covers (the run's metrics file, appended without a flush at every step),
    flushed to disk first, so that a crash never leaves the checkpoint without them (from a hunt: a node lost
    right after the step-4 checkpoint left metrics.jsonl ending at step 2)."""
    d = checkpoint_dir(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    state = {
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "torch_rng": torch.random.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "wandb_id": wandb_id,
    }
    path = d / f"step_{step:06d}.pt"
    for leftover in d.glob(".step_*.tmp"):  # a save a kill cut short (a checkpoint's size each)
        leftover.unlink(missing_ok=True)
    # files of this step or newer are damaged ones the run resumed past (newest_intact took none of them): set
    # aside before the save, never counted among the kept (from a review: with keep=1 the save just written was
    # pruned beside one), and never left to a kill: a damaged .pt whose checksum had gone, or a new .pt beside
    # the old checksum, was taken for intact or for damaged (torch.save's bytes differ from save to save)
    for newer_step, p in _checkpoints(run_dir):
        if newer_step >= step:
            for f in (p, p.with_name(p.name + SUM_SUFFIX)):
                if f.exists():
                    f.replace(f.with_name(f.name + DAMAGED_SUFFIX))
    # serialized in memory, then written by Python: torch.save's own writer (given a path or a file object)
    # turns a full disk into "RuntimeError: [enforce fail at inline_container.cc:672] unexpected pos 128 vs 0"
    # (from a hunt), where a write of ours raises OSError(ENOSPC), which replacing() names with the checkpoint's
    # path (a tiny checkpoint is small: its second copy in memory costs nothing)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    if covers is not None and Path(covers).exists():
        _flush(Path(covers))
    with replacing(path, durable=True) as tmp:
        with open(tmp, "wb") as f:
            f.write(buffer.getbuffer())
        info = {"sha256": file_sha256(tmp), "bytes": tmp.stat().st_size, "step": int(step)}
    atomic_write(path.with_name(path.name + SUM_SUFFIX), json.dumps(info), durable=True)
    old = _checkpoints(run_dir)
    for _, p in old[: max(0, len(old) - max(1, keep))]:
        p.unlink(missing_ok=True)
        p.with_name(p.name + SUM_SUFFIX).unlink(missing_ok=True)
    return path


def _flush(path: Path) -> None:
    """``path`` and its folder's entry of it on disk (fsync); an error names ``path`` (fsync's does not)."""
    for target in (path, path.parent):
        try:
            fd = os.open(target, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            if err.filename:
                raise
            raise OSError(err.errno, err.strerror, str(path)) from err


def _problem(path: Path) -> str | None:
    """Why ``path`` cannot be trusted (its bytes against its checksum file), or None."""
    try:
        size = path.stat().st_size
        recorded = json.loads(path.with_name(path.name + SUM_SUFFIX).read_text())
    except FileNotFoundError:
        return None  # no checksum: used if it loads
    except (OSError, ValueError) as err:
        return f"its checksum file cannot be read ({type(err).__name__})"
    if not isinstance(recorded, dict) or not isinstance(recorded.get("sha256"), str):
        return "its checksum file is damaged"
    if size == 0:
        return "it is empty"
    if isinstance(recorded.get("bytes"), int) and size != recorded["bytes"]:
        return f"it has {size} bytes, {recorded['bytes']} were written (truncated?)"
    if file_sha256(path) != recorded["sha256"]:
        return "its bytes do not match the checksum written with it"
    return None


def weights_sha256(model_state: dict) -> str:
    """sha256 of a model's weights (a state dict): each tensor's name, dtype, shape and bytes, in name order. The
    identity of the weights themselves, not of a checkpoint file (which also holds the optimizer, the RNG states
    and the W&B id, and so differs between two runs that trained the same weights: from a hunt, a --force rerun
    of a source with bit-identical weights left its KL dependents unable to resume)."""
    digest = hashlib.sha256()
    for name in sorted(model_state):
        tensor = model_state[name].detach().cpu().contiguous()
        digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def load_checkpoint(path: Path) -> dict:
    """A tiny checkpoint's state (ValueError if the file is some other pickle)."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(state, dict) or not {"model", "optimizer", "generator", "step"} <= set(state):
        raise ValueError("not a tiny checkpoint")
    return state


@dataclass
class Found:
    """The newest checkpoint that passed its checks (None: the run starts from scratch), its state,
    and the newer ones that did not, with why."""

    path: Path | None = None
    state: dict | None = None
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def warning(self) -> str | None:
        if not self.skipped:
            return None
        bad = "; ".join(f"{p.name}: {why}" for p, why in self.skipped)
        return f"skipped {len(self.skipped)} damaged checkpoint(s) ({bad}); resumed from {self.path.name}"


def newest_intact(run_dir: Path, below: int | None = None) -> Found:
    """The newest checkpoint whose bytes match its checksum and that loads (of a step before ``below``, where
    given: those from it on are left out, not counted as damaged). CheckpointError (one line) if there are
    checkpoints and none of them is intact."""
    found = Found()
    for step, path in reversed(_checkpoints(run_dir)):
        if below is not None and step >= below:
            continue
        why = _problem(path)
        if why is None:
            try:
                found.path, found.state = path, load_checkpoint(path)
                return found
            except Exception as err:  # noqa: BLE001 - any way a file fails to load makes it unusable
                why = f"it does not load ({type(err).__name__}: {' '.join(str(err).split())[:120]})"
        found.skipped.append((path, why))
    if found.skipped:
        files = "; ".join(f"{p} ({why})" for p, why in found.skipped)
        raise CheckpointError(f"no intact checkpoint to resume from: {files}. Restore one, or delete "
                              f"{checkpoint_dir(run_dir)} to start the run over")
    return found


def resume_step(run_dir: Path) -> int | None:
    """The step the run's next attempt resumes from: that of its newest intact checkpoint (:func:`newest_intact`,
    the one the trainer loads), 0 where it has none (the next attempt starts over), None where it has checkpoints
    and none is intact (the next attempt fails, naming them)."""
    try:
        found = newest_intact(run_dir)
    except CheckpointError:
        return None
    return 0 if found.state is None else int(found.state["step"])


def restore(state: dict, model, optimizer, generator: torch.Generator) -> dict:
    """Put a loaded checkpoint's state back; returns ``{"step", "wandb_id"}``."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    torch.random.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return {"step": int(state["step"]), "wandb_id": state.get("wandb_id")}


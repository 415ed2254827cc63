"""Whether the checkpoints of the runs a launch starts fit the workspace's file system, said before GPU hours are spent.

Each run keeps its newest complete checkpoints in its run folder (verl: ``verl.keep_checkpoints``) and holds one more
while a save completes; a save that does not fit fails its run after hours of GPU time (a paper sweep's 27 runs keep
up to ~1.7 TB). Each run's backend says how big one of its checkpoints is (:meth:`arctl.backends.base.Backend.
checkpoint_gb`, read here without the network) and how many it keeps (``checkpoints_kept``); the sum is compared with
the free space of the file system holding the workspace's runs. A note, never a refusal: other jobs free space, and a
quota is not the free space.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from arctl.config.files import nearest_existing

GB = 10**9  # decimal gigabytes, as the backends' checkpoint_gb and df -H say them


@dataclass
class CheckpointRoom:
    """What the checkpoints of a launch's runs need at once, and the room there is (GB)."""

    gb: float  # at most at once, less what resumed runs hold already
    free_gb: float | None  # free on the runs folder's file system; None: it cannot be read
    runs: int  # runs whose checkpoint size is known (and not nothing)
    unknown: int  # runs whose backend cannot say here
    folder: Path  # where the free space was measured
    held_gb: float = 0.0  # what the resumed runs' folders hold already (counted in the free space's use)
    # (checkpoints held at once, ~GB each) -> runs; the settings that say how many each keeps ("verl.keep_checkpoints=2")
    shapes: Counter = field(default_factory=Counter)
    settings: list[str] = field(default_factory=list)
    keep_one_gb: float | None = None  # the need with every setting at 1; None: no run keeps more than one

    @property
    def over(self) -> bool:
        return self.free_gb is not None and self.gb > self.free_gb

    def as_json(self) -> dict:
        return {"gb": round(self.gb, 1), "free_gb": None if self.free_gb is None else round(self.free_gb, 1),
                "runs": self.runs, "unknown": self.unknown}

    def line(self) -> str:
        """One line: what the runs need and the room; with advice where it does not fit."""
        unknown = f"{self.unknown} run{'s' if self.unknown != 1 else ''} of unknown size"
        if not self.runs:
            return f"the checkpoints' room is not checked: {unknown} (their backend cannot say here: e.g. a model not downloaded)"
        if len(self.shapes) == 1:
            (held, size), = self.shapes
            each = f"{held} x ~{size:,.0f} GB each"
        else:
            each = ", ".join(f"{n} run{'s' if n != 1 else ''} of {held} x ~{size:,.0f} GB"
                             for (held, size), n in sorted(self.shapes.items(), key=lambda s: (-s[0][1], -s[0][0])))
        why = f"{each}: {', '.join(self.settings)}, +1 while a save completes" if self.settings else each
        less = f", less the {self.held_gb:,.0f} GB the resumed runs hold already" if self.held_gb >= 0.5 else ""
        also = f"; and {unknown}" if self.unknown else ""
        runs = f"the {self.runs} runs'" if self.runs != 1 else "the run's"
        text = f"{runs} checkpoints need up to {self.gb:,.0f} GB at once ({why}{less}{also})"
        if self.free_gb is None:
            return f"{text}; the free space of {self.folder} cannot be read"
        text += f"; the workspace's file system ({self.folder}) has {self.free_gb:,.0f} GB free"
        if not self.over:
            return text
        fixes = []
        if self.keep_one_gb is not None:
            names = " and ".join(dict.fromkeys(s.split("=")[0] for s in self.settings))
            fixes.append(f"{names}=1 needs {self.keep_one_gb:,.0f} GB")
        fixes.append("or put the workspace where there is room" if fixes else "put the workspace where there is room")
        return f"{text}: a save that does not fit fails its run after hours of GPU time ({'; '.join(fixes)})"


def free_folder(workspace) -> Path:
    """The nearest existing folder of the workspace's runs folder (a new workspace has none yet)."""
    return nearest_existing(Path(workspace.runs_dir).absolute())


def held_gb(run_dir: Path) -> float:
    """GB the files of a run folder take (a resumed run's kept checkpoints are most of it)."""
    total = 0
    for root, _, files in os.walk(run_dir):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total / GB


def checkpoint_room(items, workspace) -> CheckpointRoom | None:
    """What the checkpoints of ``items`` (the launch items a launch would start or resume) need at once and the free
    space of the workspace's runs folder; None: no run saves checkpoints (a tiny run's are nothing to count) or none
    would start."""
    from arctl.backends.base import BackendError, get_backend

    need = held = 0.0
    keep_one = 0.0
    runs = unknown = 0
    shapes: Counter = Counter()
    settings: dict[str, None] = {}
    keeps_more = False
    for item in items:
        try:
            backend = get_backend(str(item.config.get("backend", "tiny")))
        except BackendError:  # the launch's own checks say so
            unknown += 1
            continue
        size = getattr(backend, "checkpoint_gb", lambda config: None)(item.config)
        if size is None:
            unknown += 1
            continue
        if size <= 0:
            continue
        kept = getattr(backend, "checkpoints_kept", lambda config: None)(item.config)
        at_once = kept[1] + 1 if kept else 1
        runs += 1
        shapes[(at_once, round(size))] += 1
        if kept:
            settings[f"{kept[0]}={kept[1]}"] = None
            keeps_more = keeps_more or kept[1] > 1
        already = held_gb(workspace.run_dir(item.run_id)) if item.action == "resume" else 0.0
        held += min(already, at_once * size)
        need += max(0.0, at_once * size - already)
        keep_one += max(0.0, (2 if kept else 1) * size - already)
    if not runs and not unknown:
        return None
    folder = free_folder(workspace)
    try:
        free = shutil.disk_usage(folder).free / GB
    except OSError:
        free = None
    return CheckpointRoom(gb=need, free_gb=free, runs=runs, unknown=unknown, folder=folder, held_gb=held,
                          shapes=shapes, settings=list(settings), keep_one_gb=keep_one if keeps_more else None)


def disk_note(items, workspace) -> str | None:
    """A note (its text, for a ``note:`` line) when the checkpoints of the runs ``items`` would start or resume need
    more than the workspace's file system has free; None: they fit, or nothing can be said."""
    room = checkpoint_room(items, workspace)
    return room.line() if room is not None and room.over else None

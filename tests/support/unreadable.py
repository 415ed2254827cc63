"""A folder another user made unreadable, on a machine where the tests run as root (who reads any folder: chmod
alone would not do it)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def forbid(monkeypatch, folder: Path) -> None:
    """Make everything inside ``folder`` fail with EACCES, as another user's folder of mode 0700 does; the folder
    itself can be stat'ed, as such a folder can."""
    inside = f"{folder}/"

    def guard(real, itself: bool):
        def call(path, *args, **kwargs):
            name = path if isinstance(path, int) else os.fsdecode(os.fspath(path))
            if isinstance(name, str) and (name.startswith(inside) or (itself and name == str(folder))):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
            return real(path, *args, **kwargs)
        return call

    for name, itself in (("stat", False), ("scandir", True), ("listdir", True)):
        monkeypatch.setattr(os, name, guard(getattr(os, name), itself))

"""File modes in tests: a umask set for a block, and a path's permission bits."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """This process's umask is ``mask`` inside the block, and what it was after it."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    """The permission bits of ``path`` (``0o664``)."""
    return stat.S_IMODE(Path(path).stat().st_mode)

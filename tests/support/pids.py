"""Process ids for tests of dead jobs."""

from __future__ import annotations

import os


def unused_pid() -> int:
    """A pid no process has now, counting down from 999,999 (another user's process is skipped)."""
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1

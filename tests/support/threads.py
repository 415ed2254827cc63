"""Calls off the main thread."""

from __future__ import annotations

import threading


def in_worker_thread(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a thread of its own, as verl grades (math-verify without its signal-based
    timeouts, which work on the main thread only)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn(*args, **kwargs)))
    t.start()
    t.join()
    return out[0]

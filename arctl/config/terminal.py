"""Whether a stream is a terminal that can redraw a line: the one rule of where arctl draws tables sized to a width,
animates progress bars and spinners, and redraws a log's progress-bar frames. No I/O beyond ``isatty``.

rich's ``Console.is_terminal`` answers True for a pipe or a file under ``FORCE_COLOR``/``TTY_COMPATIBLE`` (and rich
13.x records that in the console's ``_force_terminal`` as it is built), which put box tables 80 columns wide and
hundreds of bar frames into CI logs and ``| tee`` files (from a hunt and its review): here only ``os.isatty`` of the
stream's descriptor counts; the environment chooses colour only.
"""

from __future__ import annotations

import os

DUMB_TERMS = ("dumb", "unknown")  # TERM values of a terminal that cannot redraw a line (as rich reads them)


def is_tty(stream) -> bool:
    """Whether ``stream``'s descriptor is a terminal (False without one: a StringIO, a test's capture, closed)."""
    try:
        return os.isatty(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def can_redraw() -> bool:
    """Whether the terminal (``TERM``) can redraw a line: not ``dumb`` (an Emacs shell, some CI web terminals)."""
    return os.environ.get("TERM", "").lower() not in DUMB_TERMS


def redraws(stream) -> bool:
    """Whether ``stream`` is a terminal that can redraw a line (:func:`is_tty` and :func:`can_redraw`)."""
    return is_tty(stream) and can_redraw()

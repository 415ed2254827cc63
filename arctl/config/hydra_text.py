"""Python values written in Hydra's override grammar (``KEY=<text>``), read back as the same value."""

from __future__ import annotations

import math
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")  # a string Hydra reads back as that string, unquoted


def override_value(value: Any) -> str:
    """``value`` in Hydra's override grammar: ``null``, ``true``/``false``, numbers, ``[..]``, ``{k:v}``,
    a string unquoted where Hydra reads it back as itself, else quoted (a comma, ``*``, a space:
    unquoted they would be a sweep, a glob, or another value). ValueError for NaN and infinities."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"override value {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in ("null", "true", "false", "nan", "inf"):
        return text
    return quoted(text)


def quoted(text: str) -> str:
    """``text`` in single quotes as Hydra reads it back: a quote escaped, and the backslashes before a quote
    (or before the closing one) doubled; other backslashes are Hydra's as they are (``D:\\runs`` stays)."""
    body = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    body = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, body)
    return f"'{body}'"

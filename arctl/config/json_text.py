"""JSON that every parser reads (RFC 8259): the one writer of arctl's machine-readable documents (every
``--json`` output, :func:`arctl.cli.common.print_json`; ``claims.json``, :mod:`arctl.report.claims_render`).

Python's ``json`` writes a non-finite float as a bare ``NaN``/``Infinity`` token, which is not JSON:
``JSON.parse`` (node, a browser) and strict parsers refuse the whole document (from a hunt: one diverged
seed's NaN made ``claims.json`` and ``report --claims --json`` unreadable to them). Here such a number is
``null``, and the document is dumped with ``allow_nan=False``, so a value the walk misses raises instead
of writing an invalid document. No I/O.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any


def finite(data: Any) -> Any:
    """``data`` with every non-finite number (NaN, ±inf, numpy's too) ``None``, every other real a plain
    float or int (a numpy scalar included), tuples as lists; other values as they are."""
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    if isinstance(data, bool | int | str) or data is None:
        return data
    if isinstance(data, numbers.Integral):  # numpy's integers: json.dumps cannot write them
        return int(data)
    if isinstance(data, numbers.Real):
        value = float(data)
        return value if math.isfinite(value) else None
    return data


def json_text(data: Any, indent: int | None = None) -> str:
    """``data`` as one JSON document: non-finite numbers ``null`` (:func:`finite`), ASCII only, and what JSON
    has no type for (a path, a date) as its ``str``."""
    return json.dumps(finite(data), indent=indent, default=str, allow_nan=False)

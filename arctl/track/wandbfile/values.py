"""The values of W&B records: ``value_json`` texts → floats (history) or Python values (config,
summary), and the key of an item."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np

_JSON_CONSTANTS = {"true": 1.0, "false": 0.0, "null": math.nan}


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    c = _JSON_CONSTANTS.get(text)
    if c is not None:
        return c
    try:
        v = json.loads(text)
    except ValueError:
        return math.nan
    if isinstance(v, bool | int | float):
        return float(v)
    return math.nan  # strings, media, tables: not a number


def _is_nan_text(text: str) -> bool:
    """Whether ``text`` is a logged NaN (W&B writes ``float("nan")`` as ``NaN``), as opposed to a value
    that is not a number at all (a string, ``null``, media), which is not logged as a number."""
    try:
        return math.isnan(float(text))
    except ValueError:
        return False


def _nan_flags(values: np.ndarray, text_of: Callable[[int], str]) -> np.ndarray:
    """bool [n]: which of ``values`` (NaN where not a number) are logged NaNs; ``text_of(i)``: the
    text of value i, asked for the NaN ones only."""
    flags = np.zeros(len(values), dtype=bool)
    for i in np.flatnonzero(np.isnan(values)).tolist():
        flags[i] = _is_nan_text(text_of(i))
    return flags


def _floats(texts: list[str]) -> np.ndarray:
    try:
        return np.array(texts, dtype=np.float64)
    except ValueError:
        return np.array([_to_float(t) for t in texts], dtype=np.float64)


def _json_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _item_key(item) -> str:
    nk = item.nested_key
    return ".".join(nk) if nk else item.key

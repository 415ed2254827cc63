"""The values of W&B records: ``value_json`` texts → floats (history) or Python values (config,
summary), and the key of an item."""

from __future__ import annotations

import json
import math

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

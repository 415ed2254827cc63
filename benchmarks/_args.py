"""Argument types shared by the benchmark scripts, so that a zero, a negative number or a typo on the
command line ends in argparse's one-line ``error: argument --x: ...`` (exit 2) before any workload
starts, instead of a traceback (or an inf/NaN "result") minutes later.

The scripts are run as ``python benchmarks/x.py``: Python puts the script's folder on sys.path, so
``from _args import positive_int`` finds this file; the scripts under benchmarks/gpu/ put
benchmarks/ there themselves, and tests that load a script with importlib prepend it.
"""

from __future__ import annotations

import argparse
import json


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """A count or a size: 1 or more (a repeat count of 0 gives no time at all; a size of 0 no workload)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def non_negative_int(text: str) -> int:
    """A length that may be empty (0 or more)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def int_list(text: str) -> list[int]:
    """A comma-separated list of whole numbers, each 1 or more, e.g. ``1,64`` (empty items are skipped)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} holds no numbers: give a comma-separated list like 1,2,4")
    values = []
    for item in items:
        try:
            values.append(positive_int(item))
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    return values


def json_object(text: str) -> dict:
    """A JSON object, e.g. ``{"EOS": 2.0}``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({err.msg} at character {err.pos})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object: give one like '{{\"EOS\": 2.0}}'")
    return value

"""Helper process for :mod:`arctl.algo.verify`: compares answers in its main thread, where
math-verify's signal-based timeouts work. Protocol: one JSON ``[pred, gold, timeout_s]`` per stdin
line, one ``0``/``1`` per stdout line; prints ``ready`` once at start; exits at end of input."""

from __future__ import annotations

import json
import sys


def main() -> None:
    import math_verify  # noqa: F401  (import before announcing readiness)

    from arctl.algo.verify import _equivalent_main_thread

    print("ready", flush=True)
    for line in sys.stdin:
        try:
            pred, gold, timeout_s = json.loads(line)
            ok = _equivalent_main_thread(str(pred), str(gold), float(timeout_s))
        except BaseException as exc:  # noqa: BLE001 - math-verify timeouts derive from BaseException
            if isinstance(exc, KeyboardInterrupt):
                raise
            ok = False
        print("1" if ok else "0", flush=True)


if __name__ == "__main__":
    main()

"""Budget-control methods a test registers in-process, for that test only.

    isolate_methods(monkeypatch)          # then registry.register_method(...) as the test needs
"""

from __future__ import annotations

import itertools

_FRESH = itertools.count(1)


def isolate_methods(monkeypatch) -> None:
    """The method registry as it was before the test once it ends: the methods it registered dropped, and the run
    config's schema and the compositions cached meanwhile (keyed by ``registry.generation()``) never read again: the
    test counts generations from a value of its own, never seen before, and the old count comes back after it. From a
    CI order: restoring the methods alone left the generation advanced, and the schema built with a test's ``halve``
    (``budget_control.halve.factor``) served the later tests of its worker."""
    from arctl.algo.methods import registry

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    monkeypatch.setattr(registry, "_GENERATION", [-1000 * next(_FRESH)])

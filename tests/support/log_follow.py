"""`arctl logs --follow` in tests: the run as the follower's refreshes see it, one state per refresh."""

from __future__ import annotations

import dataclasses


def following(monkeypatch, steps) -> None:
    """``arctl logs`` sees the run as each of ``steps`` says, one per refresh: (record fields, action before)."""
    from arctl.launch import refresh

    calls = []

    def fake_refresh(reg, workspace, records, reading=False):
        fields, action = steps[min(len(calls), len(steps) - 1)]
        calls.append(1)
        if action:
            action()
        return [dataclasses.replace(r, **fields) for r in records]

    monkeypatch.setattr(refresh, "refresh", fake_refresh)

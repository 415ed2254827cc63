"""A plugin's setting added in a later version of its package (``added_later=True`` in its field's metadata:
``arctl.algo.ranges.checks``, ``arctl.config.schema.setting``) renames none of the runs written before it: at
its default it stays out of the run's identity, and a frozen config without it is read with it at its default,
as arctl's own later keys are (``arctl.launch.run_id.ADDED_AT_DEFAULT``). From a review: a plugin that added a
knob renamed every run of its method or backend, which then neither resumed nor was found by the report."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from method_registry import isolate_methods  # tests/support/method_registry.py

from arctl.algo.methods import registry
from arctl.algo.ranges import PROB, I, checks
from arctl.config.schema import setting
from arctl.launch.run_id import config_hash, with_keys_added_later


@dataclass(frozen=True)
class GrowSettings:
    factor: float = field(default=0.5, metadata=checks(range=PROB))
    rounds: int = field(default=3, metadata=checks(range=I(1, 9), added_later=True))  # version 2 of the package
    floor: float = field(default=0.0, metadata=checks(range=PROB))  # version 2 too, but not marked


class Grow(registry.ControlMethod):
    name = "grow_later"
    settings = GrowSettings


@pytest.fixture
def grow(monkeypatch):
    isolate_methods(monkeypatch)
    return registry.register_method(Grow())


def _method_config(**own) -> dict:
    return {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny",
            "budget_control": {"method": "grow_later", "grow_later": {"factor": 0.5, **own}}}


def test_a_methods_key_added_later_keeps_the_earlier_runs_ids(grow):
    written_before = _method_config()  # version 1 of the package: no `rounds`
    assert config_hash(_method_config(rounds=3)) == config_hash(written_before)
    assert config_hash(_method_config(rounds=4)) != config_hash(written_before)  # a new value is a new run
    # an unmarked key is part of the identity at any value, as before
    assert config_hash(_method_config(floor=0.0)) != config_hash(written_before)
    # the frozen config is read with the key at its default: the same computation, the same id
    read = with_keys_added_later(written_before)
    assert read["budget_control"]["grow_later"] == {"factor": 0.5, "rounds": 3}
    assert written_before["budget_control"]["grow_later"] == {"factor": 0.5}  # not changed in place
    assert config_hash(read) == config_hash(written_before)


def test_the_key_counts_only_for_the_method_that_declares_it(grow):
    """Another method's run with a section of that name is not touched (only the chosen method's section is part
    of the identity at all)."""
    l1 = {"experiment": "e", "arm": "a", "seed": 0, "backend": "tiny",
          "budget_control": {"method": "l1", "l1_alpha": 0.0003, "grow_later": {"factor": 0.5}}}
    assert with_keys_added_later(l1)["budget_control"]["grow_later"] == {"factor": 0.5}


class _Backend:
    @dataclass
    class Settings:
        width: int = setting(4, range=I(1, 64))
        depth: int = setting(2, range=I(1, 64), added_later=True)

    def settings_type(self):
        return self.Settings


def test_a_backends_key_added_later_keeps_the_earlier_runs_ids(monkeypatch):
    from arctl.compose import plugins

    monkeypatch.setattr(plugins, "backends", lambda: {"fakelater": _Backend()})
    before = {"experiment": "e", "arm": "a", "seed": 0, "backend": "fakelater", "fakelater": {"width": 4}}
    assert config_hash({**before, "fakelater": {"width": 4, "depth": 2}}) == config_hash(before)
    assert config_hash({**before, "fakelater": {"width": 4, "depth": 5}}) != config_hash(before)
    assert with_keys_added_later(before)["fakelater"] == {"width": 4, "depth": 2}
    # a tiny run beside it is not the plugin's: its section is the built-in's
    tiny = {**before, "backend": "tiny", "tiny": {"depth": 2}}
    assert with_keys_added_later(tiny)["tiny"] == {"depth": 2}


def test_a_report_reads_a_run_from_before_the_key_as_the_cell_it_computes(grow):
    """A workspace that spans the plugin's upgrade: the cell's run from before the key (no `rounds`) is the one
    the report's composed cell (`rounds` at its default) names, not a rerun at another value."""
    import numpy as np
    import pandas as pd

    from arctl.report.cells import one_run_per_cell
    from arctl.track.runs import Runs

    def row(run_id, **own):
        return {"run_id": run_id, "experiment": "e", "arm": "a", "seed": 0, "config.backend": "tiny",
                "config.budget_control.method": "grow_later", "config.budget_control.grow_later.factor": 0.5,
                **{f"config.budget_control.grow_later.{k}": v for k, v in own.items()}}

    table = pd.DataFrame.from_records([row("before"), row("later", rounds=4)])
    history = pd.DataFrame({"run_id": table["run_id"], "experiment": "e", "arm": "a", "seed": 0, "step": 0,
                            "metric": "eval/toy/final_acc", "value": np.arange(2, dtype=float)})
    cell = {"backend": "tiny", "budget_control.method": "grow_later", "budget_control.grow_later.factor": 0.5,
            "budget_control.grow_later.rounds": 3}
    kept = one_run_per_cell(Runs(history=history, runs=table), compose=lambda *a: dict(cell))
    assert list(kept.runs["run_id"]) == ["before"]
    assert kept.runs["config.budget_control.grow_later.rounds"].tolist() == [3]

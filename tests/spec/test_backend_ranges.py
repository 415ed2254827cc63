"""A backend declares the ranges of its own config section (``Backend.config_ranges``), and
validation derives its checks from them: every numeric key of the tiny section has a range there
(the stale ``tiny.task.<knob>`` ranges of before the tasks had names checked nothing), and a value
outside it is one error naming the key, before anything runs."""

from __future__ import annotations

import pytest

from arctl.backends.base import BackendDefaults, get_backend
from arctl.compose import SpecError, resolve_experiment
from arctl.compose.limits import ranges
from arctl.compose.plugins import backend_ranges

RANGES = ranges()


def _numeric_leaves(node, prefix):
    for k, v in node.items():
        if isinstance(v, dict):
            yield from _numeric_leaves(v, f"{prefix}{k}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield prefix + k, v


TINY = resolve_experiment("main-ar-uniform", scale="tiny", seeds=[0])[0].config
TINY_KEYS = dict(_numeric_leaves(TINY["tiny"], "tiny."))


def test_every_numeric_key_of_the_tiny_section_has_the_backends_range():
    ranges = get_backend("tiny").config_ranges()
    assert TINY_KEYS and set(TINY_KEYS) <= set(ranges)  # every knob of every task, warm-up, engine
    assert all(k.startswith("tiny.") for k in ranges)  # a backend declares only its own section
    assert all(RANGES[k] == r for k, r in ranges.items())
    assert all(r.contains(TINY_KEYS[k]) for k, r in ranges.items() if k in TINY_KEYS)  # defaults in range
    assert BackendDefaults().config_ranges() == {} and set(backend_ranges()) >= set(ranges)


def _outside(r):
    return r.hi + 1 if r.hi < 1e9 else r.lo - 1


@pytest.mark.parametrize("key", sorted(TINY_KEYS))
def test_a_tiny_value_out_of_its_range_is_one_error_naming_the_key(key):
    r = get_backend("tiny").config_ranges()[key]
    bad = _outside(r)
    with pytest.raises(SpecError) as err:
        resolve_experiment("main-ar-uniform", [f"{key}={int(bad) if r.integer else bad}"], scale="tiny", seeds=[0])
    text = str(err.value)
    assert key in text and "\n" not in text


@pytest.mark.parametrize("key", ["trainer.total_steps", "eval.num_problems"])
def test_the_tiny_backend_needs_a_number_where_verl_takes_a_datasets_size(key):
    with pytest.raises(SpecError, match=f"{key} is null.*needs a number"):
        resolve_experiment("main-ar-uniform", [f"{key}=null"], scale="tiny", seeds=[0])


def test_a_backend_target_is_an_object_with_the_protocol(tmp_path, monkeypatch):
    """A ``module:attribute`` target loads the object; one without train() (a bare function, the
    contract before the protocol) or a missing module is one BackendError naming it."""
    from arctl.backends.base import Backend, BackendError

    (tmp_path / "my_backend.py").write_text(
        "from arctl.backends.base import BackendDefaults\n"
        "class B(BackendDefaults):\n    name = 'mine'\n    def train(self, config, run_dir, stop_event=None):\n"
        "        return 'completed'\n"
        "BACKEND = B()\n"
        "def train(config, run_dir, stop_event=None):\n    return 'completed'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = get_backend("my_backend:BACKEND")
    assert isinstance(backend, Backend) and backend.name == "mine" and backend.config_ranges() == {}
    with pytest.raises(BackendError, match="'my_backend:train' has no train"):
        get_backend("my_backend:train")
    with pytest.raises(BackendError, match="cannot load backend 'no_such_module_x:BACKEND'"):
        get_backend("no_such_module_x:BACKEND")
    assert get_backend("arctl.launch.testing:BACKEND").name == "count"


def test_composing_a_sweep_reads_the_installed_packages_entry_points_once(monkeypatch):
    """Reading the backends' entry points scans every installed package's metadata (~50 ms); composing
    `arctl sweep paper` asked 78 times (135 with the dry run's scripts). Once per process now (a plugin
    installed later: a new process)."""
    import importlib.metadata

    from arctl.algo.methods import registry
    from arctl.compose import resolve_sweep

    real, scans = importlib.metadata.distributions, []
    monkeypatch.setattr(importlib.metadata, "distributions", lambda **kw: scans.append(1) or real(**kw))
    registry._scan.cache_clear()
    try:
        cells = resolve_sweep("paper", [], scale="tiny")
        # one scan per entry-point group (arctl.backends, arctl.methods)
        assert len(cells) > 20 and len(scans) == 2, (len(cells), len(scans))
    finally:
        registry._scan.cache_clear()

"""The lower bounds of ranges a user meets at a typo or while debugging, pinned at the value each one documents (from
a mutation hunt: ``cluster.mem_gb``'s 0.125 and COUNT's 1 could be moved and no test noticed).

- ``cluster.mem_gb``: at least 128 MB (arctl/config/ranges.py: ``--mem=0`` is the whole node to SLURM, and 0.01, a
  typo for 10, would be ``--mem=10MB``: a job that queues for hours to be killed at its first import).
- every key whose range is COUNT (a cadence or a count of things: a checkpoint every step is common when debugging a
  preemption): 1 is accepted, 0 refused.
- ``scale.summary_max_tokens`` out of its range (1 .. 100000) is blamed on the scale key the user wrote, at both bounds,
  not on ``summary.max_tokens`` ("no override writes it"), which takes it as its default. (The other keys of
  OPEN_SECTION_RANGES cannot be written on the command line: an override of one is refused, naming the key to set.)

Each bound is written here as a number, not read from :func:`arctl.compose.limits.ranges`: a test that reads the bound
it checks would follow a wrong one."""

from __future__ import annotations

import pytest

from arctl.compose import SpecError, resolve_experiment
from arctl.compose.limits import ranges
from arctl.config.ranges import COUNT


def _resolve(overrides, name="main-ar-uniform"):
    return resolve_experiment(name, overrides, scale="tiny", seeds=[0])[0].config


def _refusal(overrides, name="main-ar-uniform") -> str:
    with pytest.raises(SpecError) as err:
        _resolve(overrides, name)
    text = str(err.value)
    assert "\n" not in text, text
    return text


def _get(cfg, key):
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


@pytest.mark.parametrize("value", ["0", "0.01", "0.124"])
def test_cluster_mem_gb_below_128_mb_is_refused_naming_the_key(value):
    text = _refusal([f"cluster.mem_gb={value}"], "main-grpo")
    assert text.startswith("main-grpo/grpo: cluster.mem_gb: cluster.mem_gb="), text
    assert "expected a number >= 0.125" in text, text


def test_cluster_mem_gb_of_128_mb_is_accepted():
    assert _resolve(["cluster.mem_gb=0.125"], "main-grpo")["cluster"]["mem_gb"] == 0.125


COUNT_KEYS = sorted(k for k, r in ranges().items() if r == COUNT)


def test_the_count_keys_are_the_cadences_and_counts():
    assert {"trainer.save_freq", "trainer.test_freq", "cluster.max_array_size", "tiny.max_rows",
            "tiny.warmup.steps"} <= set(COUNT_KEYS)


@pytest.mark.parametrize("key", COUNT_KEYS)
def test_a_count_of_one_is_accepted_and_zero_refused(key):
    assert _get(_resolve([f"{key}=1"]), key) == 1
    text = _refusal([f"{key}=0"])
    assert f": {key}: {key}=0 is invalid: expected an integer >= 1 and" in text, text


@pytest.mark.parametrize("value", [0, 100001])
def test_scale_summary_max_tokens_out_of_range_names_the_scale_key(value):
    text = _refusal([f"scale.summary_max_tokens={value}"], "main-grpo")
    assert text.startswith(f"main-grpo/grpo: scale.summary_max_tokens: scale.summary_max_tokens={value} is invalid: "
                           "expected an integer >= 1 and <= 100000"), text
    assert "no override writes it" not in text and "e.g. scale.summary_max_tokens=" in text, text


@pytest.mark.parametrize("value", [1, 100000])
def test_scale_summary_max_tokens_at_its_bounds_is_accepted(value):
    assert _resolve([f"scale.summary_max_tokens={value}"], "main-grpo")["summary"]["max_tokens"] == value

"""arctl's one YAML reader (arctl/config/safe_yaml.py) on what a person writes in a spec or finds in a frozen
config: YAML's merge keys load as PyYAML's safe loader loads them, a date stays text, and values no config
holds are one line (from a review of composition)."""

from __future__ import annotations

import pytest
import yaml

from arctl.config.safe_yaml import YamlError, load


def test_a_merge_key_loads_as_the_safe_loader_loads_it_and_an_explicit_key_wins():
    text = "base: &b {a: 1, b: 2}\narms:\n  x:\n    <<: *b\n    b: 3\n  y: {<<: [*b], c: 4}\n"
    assert load(text) == yaml.safe_load(text) == {"base": {"a": 1, "b": 2},
                                                   "arms": {"x": {"a": 1, "b": 3}, "y": {"a": 1, "b": 2, "c": 4}}}


def test_a_key_written_twice_is_still_refused_beside_a_merge():
    with pytest.raises(YamlError, match="key 'b' appears twice"):
        load("base: &b {a: 1}\nx:\n  <<: *b\n  b: 3\n  b: 4\n")


def test_dates_and_times_stay_the_text_written():
    """A date in a frozen config was a datetime.date, which the run id's JSON could not hash (a traceback)."""
    assert load("name: 2024-01-01\nat: 2001-12-14 21:59:43.10 -5\n") == {"name": "2024-01-01",
                                                                        "at": "2001-12-14 21:59:43.10 -5"}


@pytest.mark.parametrize("text, kind", [("s: !!set {a, b}\n", "set"), ("b: !!binary aGVsbG8=\n", "binary")])
def test_values_no_config_holds_are_one_line(text, kind):
    with pytest.raises(YamlError, match=rf"line 1, column 4: {kind} values are not config values"):
        load(text)


def test_a_second_merge_key_in_one_mapping_is_refused():
    """A review: two `<<` in one mapping load silently, the second dropping the first's keys (PyYAML's rule);
    the sequence form merges several."""
    with pytest.raises(YamlError, match="'<<' appears twice in one mapping"):
        load("a: &a {x: 1}\nb: &b {x: 2}\nc: {<<: *a, <<: *b}\n")
    assert load("a: &a {x: 1}\nb: &b {y: 2}\nc: {<<: [*a, *b]}\n")["c"] == {"x": 1, "y": 2}

"""arctl's one YAML reader (arctl/config/safe_yaml.py) on what a person writes in a spec or finds in a frozen
config: YAML's merge keys load as PyYAML's safe loader loads them, a date stays text, and values no config
holds are one line (from a review of composition)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from arctl.config import safe_yaml
from arctl.config.safe_yaml import Loader, PythonLoader, YamlError, load


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


# libyaml's parser (safe_yaml.Loader) against PyYAML's own (safe_yaml.PythonLoader), on documents PyYAML writes,
# then damaged: the tokens a person mistypes in a spec, and characters no YAML allows
_SCALARS = st.sampled_from([1, -2.5, 0, "txt", "", None, True, False, "a: b", "2024-01-01", "~", "0x1f", "1e3", ".inf",
                            "1_000", "0o17", "+12", "1:20", "yes", "No", "=", "é", "x y", "<<", "- a", "#c", "'q'"])
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["a", "b", "<<", "1", "x y", "é"]), inner, max_size=3),
                       max_leaves=12)
_TOKENS = st.sampled_from(list(":-[]{},#&*|>'\"%@` \n\t?") + list("abc1.e+") + [
    "<<: *a\n", "&a ", "*a", "!!str ", "!!int ", "!!float ", "? ", "--- ", "...\n", "\x00", "\x07", "\ufeff", "é"])


@st.composite
def _documents(draw):
    doc = yaml.dump(draw(_VALUES), default_flow_style=draw(st.sampled_from([None, True, False])),
                    allow_unicode=draw(st.booleans()))
    for at, token, delete in draw(st.lists(st.tuples(st.integers(0, 400), _TOKENS, st.booleans()), max_size=4)):
        at = at % (len(doc) + 1)
        doc = doc[:at] + doc[at + 1:] if delete else doc[:at] + token + doc[at:]
    return doc


def _read(text, loader_class=None):
    try:
        return "read", repr(load(text, loader_class))  # repr: NaN equals NaN
    except YamlError as err:
        return "refused", str(err)


@settings(max_examples=400, deadline=None)
@given(_documents())
def test_libyaml_reads_what_pyyaml_reads_to_the_same_value_and_refuses_in_one_line(doc):
    """Every document PyYAML's loader reads, load() reads to the same value (libyaml refuses a few that PyYAML reads,
    and reads a BOM inside a text or an empty `!` value otherwise: load() reads those with PyYAML); anything else is
    a YamlError, never another exception (a control character and `!!int abc` were tracebacks). libyaml reads some
    documents PyYAML refuses (tabs inside plain text): accepted, as any YAML 1.1 reader does."""
    python, c_only, mixed = _read(doc, PythonLoader), _read(doc, Loader), _read(doc)
    if python[0] == "read":
        assert mixed == python
    elif safe_yaml._libyaml_reads_as_pyyaml(doc):
        assert mixed == (python if c_only[0] == "refused" else c_only)
    else:
        assert mixed == python
    if python[0] == "read" and c_only[0] == "read" and safe_yaml._libyaml_reads_as_pyyaml(doc):
        assert c_only == python


@pytest.mark.parametrize("text, value", [
    ("---\n\ufeffa: 1\n", {"\ufeffa": 1}),  # libyaml skips a BOM at the start of any line (from a review)
    ("a: [1,\n\ufeff2]\n", {"a": [1, "\ufeff2"]}),
    ("a: !\nb: 1", {"a": None, "b": 1}),  # an empty value tagged `!`: '' to libyaml
    ("- !\n", [None]),
    ("{a:[1]}", {"a": [1]}),  # libyaml refuses a flow key with no space after its colon
])
def test_where_the_two_readers_differ_load_reads_as_before(text, value):
    assert load(text) == load(text, PythonLoader) == value


@pytest.mark.parametrize("loader_class", [None, PythonLoader, Loader], ids=["load", "pyyaml", "libyaml"])
@pytest.mark.parametrize("text, message", [
    ('a: 1\nb: "x\x07"\n', r"line 2, column 6: character #x0007: "),
    ("a: 1\n\x00", r"line 2, column 1: character #x0000: "),
    ("a: 1\u2028b: \x07", r"line 2, column 4: character #x0007: "),  # YAML's line breaks, not only \n
    ("a: 1\r\nb: \x07", r"line 2, column 4: character #x0007: "),
    ("seeds: [!!int abc]\n", r"line 1, column 9: int value 'abc' cannot be read \(invalid literal"),
    ("x: !!float 1.2.3\n", r"line 1, column 4: float value '1.2.3' cannot be read"),
    ("x: {!!int : 1}\n", r"line 1, column 5: int value '' cannot be read"),
    ("x: !!map [a, b]\n", r"line 1, column 4: expected a mapping node, but found sequence"),
    ("x: !!map abc\n", r"line 1, column 4: expected a mapping node, but found scalar"),
])
def test_a_character_yaml_does_not_allow_or_a_value_its_tag_cannot_make_is_one_line_where_it_is(text, message,
                                                                                               loader_class):
    with pytest.raises(YamlError, match=message):
        load(text, loader_class)


@pytest.mark.parametrize("text, message", [
    (b"a: \xc3\xa9\n\x07", r"line 2, column 1: character #x0007: "),  # PyYAML's position: characters, not bytes
    (b"\xef\xbb\xbfa: \xc3\xa9\n\x07", r"line 2, column 1: character #x0007: "),
    (b"a: 1\nb: \xff\xfe", r"line 2, column 4: character #x00ff: "),  # bytes that do not decode: the byte offset
    ("a: \ud800", r"line 1, column 4: character #xd800: "),  # a lone surrogate: libyaml cannot encode the text
])
def test_bytes_and_text_libyaml_cannot_take_are_read_by_pyyaml_with_the_place_of_the_fault(text, message):
    with pytest.raises(YamlError, match=message):
        load(text)

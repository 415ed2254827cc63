"""The one YAML reader of arctl: PyYAML's safe loader with bounds on what a file may make.

Every YAML file arctl reads (specs, frozen run configs, report specs, labels) is input: a user edits
a spec after ``arctl cp``, a run directory may be damaged or written by someone else. PyYAML's safe
loader builds aliases as shared objects, so a few lines of nested anchors (``l1: &l1 [*l0, *l0, ...]``
nine levels deep) load in microseconds and then blow up whatever walks them (OmegaConf, a deep copy,
a hash): minutes and gigabytes. :func:`load` refuses, with one line and before anything is built:

- a file over :data:`MAX_BYTES`;
- nesting deeper than :data:`MAX_DEPTH`, as written or once aliases are expanded;
- more than :data:`MAX_NODES` values once aliases are expanded; a recursive alias;
- a key twice in one mapping (PyYAML keeps the last silently: a second ``arms:`` would drop the first);
  a key that overrides one a merge (``<<: *base``) brings is YAML's rule, not a duplicate;
- ``!!binary`` and ``!!set`` (no config value is bytes or a set); a date or time stays the text it is
  (a ``2024-01-01`` in a frozen config was a ``datetime.date``, which the run id cannot hash: from a review).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_BYTES = 1 << 20  # specs and frozen configs are a few kB
MAX_DEPTH = 64
MAX_NODES = 100_000


class YamlError(ValueError):
    """The text is not YAML arctl reads: one line (what, and where in the text when known)."""


class _Bounds:
    """The bounds and refusals above, over any of PyYAML's safe loaders (a mixin before the loader)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):  # `!!map [a, b]`: the base class's check, before the loop
            raise yaml.constructor.ConstructorError(None, None, f"expected a mapping node, but found {node.id}",
                                                    node.start_mark)
        seen, merges = set(), 0
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:  # `<<: *base` (from a review: refused as "could not determine a
                merges += 1                # constructor for the tag ...merge", which safe_load accepts)
                if merges > 1:  # a second `<<` drops the first's keys silently: `<<: [*a, *b]` merges both
                    raise yaml.constructor.ConstructorError(
                        None, None, "'<<' appears twice in one mapping (merge several with <<: [*a, *b])",
                        key_node.start_mark)
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base class reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark)
            seen.add(key)
        self.flatten_mapping(node)  # the merges, explicit keys winning
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node, deep=False):
        """A value its tag cannot make (``!!int abc``, ``!!float``) is a YAML error at the value, not the
        constructor's ValueError or IndexError (a traceback: from a review)."""
        try:
            return super().construct_object(node, deep=deep)
        except (yaml.YAMLError, YamlError):
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError) as err:
            what = f" {node.value!r}" if isinstance(node, yaml.ScalarNode) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.tag.rsplit(':', 1)[-1]} value{what} cannot be read ({err})", node.start_mark) from None


MERGE_TAG = "tag:yaml.org,2002:merge"


def _refused(loader, node):
    raise yaml.constructor.ConstructorError(None, None, f"{node.tag.rsplit(':', 1)[-1]} values are not config values "
                                            "(write a list or a text)", node.start_mark)


class PythonLoader(_Bounds, yaml.SafeLoader):
    """PyYAML's safe loader, all Python, with the bounds: what :data:`Loader` is without libyaml."""


try:
    from yaml.cyaml import CParser
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    CParser = None

if CParser is not None:
    class LibyamlLoader(_Bounds, yaml.composer.Composer, CParser, yaml.constructor.SafeConstructor,
                        yaml.resolver.Resolver):
        """The same loader on libyaml's scanner and parser (C; 3.9x faster on a frozen run config, 9.2 -> 2.4 ms):
        libyaml's events, composed into nodes by PyYAML's Python composer (so the depth bound holds while
        composing; libyaml's own composer recurses in C without one) and built by the safe constructor.
        tests/spec/test_safe_yaml.py checks it against :class:`PythonLoader`."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._depth = 0


Loader = LibyamlLoader if CParser is not None else PythonLoader  # what load() reads with

for _cls in {PythonLoader, Loader}:
    _cls.add_constructor("tag:yaml.org,2002:timestamp", yaml.constructor.SafeConstructor.construct_yaml_str)
    for _tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:set"):
        _cls.add_constructor(_tag, _refused)


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _expanded(root) -> tuple[int, int]:
    """(values, depth) of the tree ``root`` stands for once every alias is expanded; each shared
    node is measured once (iteratively: no recursion however the aliases chain)."""
    size: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            parts = [size[id(c)] for c in _children(node)]
            size[key] = (1 + sum(p[0] for p in parts), 1 + max((p[1] for p in parts), default=0))
            if size[key][0] > MAX_NODES or size[key][1] > MAX_DEPTH:
                return size[key]
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlError("a recursive alias (an anchor used inside itself)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    return size[id(root)]


def load(text: str | bytes, loader_class: type | None = None) -> Any:
    """The YAML document in ``text`` (None for an empty one), within the bounds above; YamlError
    otherwise. Read with :data:`Loader` (libyaml's parser where PyYAML has it); a document it refuses is read
    again with :class:`PythonLoader`, whose reading and message decide: libyaml refuses a few documents PyYAML
    reads (a flow key written without a space, ``{a:[1]}``), and arctl read them before. ``loader_class``: one
    loader only (the tests compare the two)."""
    if len(text) > MAX_BYTES:
        raise YamlError(f"{len(text)} bytes: YAML files arctl reads are at most {MAX_BYTES} bytes")
    if loader_class is None and Loader is not PythonLoader and _libyaml_reads_as_pyyaml(text):
        try:
            return _load(text, Loader)
        except (YamlError, UnicodeError):  # UnicodeError: a lone surrogate in the text (libyaml reads UTF-8)
            pass
    return _load(text, loader_class or PythonLoader)


def _libyaml_reads_as_pyyaml(text: str | bytes) -> bool:
    """False where libyaml and PyYAML may read one text to two values (a review fuzzed both; PyYAML reads these):
    a BOM after the first character (libyaml skips one at the start of any line) and any tag (``!``: an empty
    value tagged ``!`` is null to PyYAML and '' to libyaml). Bytes are decoded by PyYAML alone."""
    return isinstance(text, str) and "!" not in text and "\ufeff" not in text[1:]


def _load(text: str | bytes, loader_class: type) -> Any:
    loader = None
    try:
        loader = loader_class(text)  # PyYAML's reader checks every character here
        node = loader.get_single_node()
        if node is None:
            return None
        values, depth = _expanded(node)
        if values > MAX_NODES:
            raise YamlError(f"expands to more than {MAX_NODES} values (anchors and aliases: *name repeats &name)")
        if depth > MAX_DEPTH:
            raise YamlError(f"nested more than {MAX_DEPTH} levels deep once aliases are expanded")
        return loader.construct_document(node)
    except yaml.reader.ReaderError as err:  # was a traceback (raised by the reader before the try: from a review)
        raise YamlError(_unreadable(text, err)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise YamlError(f"invalid YAML{where}: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _unreadable(text: str | bytes, err: yaml.reader.ReaderError) -> str:
    """One line for a character YAML does not allow (a control character, bytes that are not UTF-8), with its
    line and column (YAML's line breaks): the first such character of the text, or the reader's byte position
    in bytes that do not decode."""
    char, where, at = err.character, "", None
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")  # PyYAML counts a character's position in the decoded text
        except UnicodeDecodeError:
            at = err.position if isinstance(err.position, int) else None
    if isinstance(text, str) and isinstance(char, int) and 0 <= char <= 0x10FFFF and chr(char) in text:
        at = text.index(chr(char))
    if at is not None:
        lines = re.split(r"\r\n|[\n\r\x85\u2028\u2029]" if isinstance(text, str) else rb"\r\n|[\n\r]", text[:at])
        where = f" at line {len(lines)}, column {len(lines[-1]) + 1}"
    shown = f" #x{char:04x}" if isinstance(char, int) and char >= 0 else ""
    return f"invalid YAML{where}: character{shown}: {err.reason}"

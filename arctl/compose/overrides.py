"""Hydra override strings: parse, classify (config-group choice vs key), and police additions."""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass, field

from arctl.algo.verify import bracket_depth
from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.paths import config_groups, group_options
from arctl.compose.plugins import open_sections, run_config
from arctl.compose.resolvers import value_problem
from arctl.config.schema import bool_fields
from arctl.track.identity import known_secrets, secret_shown

# a run's identity: set from the spec, --arm and --seeds, never by an override (the registry, the run
# id and W&B would name one run while another trains)
IDENTITY_KEYS = ("experiment", "arm", "seed")
# what --scale chooses (a scale profile's YAML sets them): overridden, a tiny run was labelled paper (reports
# filter by scale.name) and a run it starts from was resolved at the named scale (from a review)
SCALE_KEYS = ("scale.name", "scale.model")
MAX_OVERRIDE_CHARS = 4096  # an override is a line a person writes
MAX_NESTING = 32  # brackets: Hydra's parser recurses per level


def override_key(text: str) -> str:
    """The key an override text writes: ``KEY=VALUE``, ``+KEY=``, ``++KEY=``, ``~KEY`` -> ``KEY``."""
    return text.split("=", 1)[0].strip().lstrip("+~")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:60] + "...")


@dataclass(frozen=True)
class Overrides:
    """Overrides split into config-group choices (last one wins) and key overrides (in order);
    ``added``: the keys of those written ``+key=``/``++key=`` (checked once composed: a key the config
    lacks must be one its backend reads, :func:`arctl.compose.plugins.added_key_problem`)."""

    groups: dict[str, str]
    keys: list[str]
    added: list[str] = field(default_factory=list)
    # the keys the key overrides write, a section given as a dict as its leaves (``optim={lr:2e-6}``: optim.lr)
    written: list[str] = field(default_factory=list)


def leaf_keys(key: str, value) -> list[str]:
    """The keys writing ``value`` at ``key`` sets: a dict's leaves (``optim``, ``{lr: 2e-6}`` -> ``optim.lr``), else
    ``key`` (from a review: a section given as a dict was refused over a default it holds, never written)."""
    if isinstance(value, dict) and value:
        return [k for name, sub in value.items() for k in leaf_keys(f"{key}.{name}", sub)]
    return [key]


def _parse_hint(text: str) -> str:
    """What to do about an override Hydra cannot parse: an interpolation whose arguments hold a comma
    (``${arctl.grid:${scale.budgets},32}``) parses only quoted, which Hydra's message does not say."""
    key, _, value = text.partition("=")
    if "${" in value and "," in value and value[:1] not in "'\"":
        return (f"quote a value holding an interpolation with a comma: {key}=\"{value}\" (in a shell, in single "
                f"quotes, so that the shell leaves ${{...}} alone: '{key}=\"{value}\"')")
    return "see Hydra's override grammar"


@functools.lru_cache(maxsize=1)
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@functools.lru_cache(maxsize=4096)
def _parsed_once(text: str):
    (parsed,) = _parser().parse_overrides([text])
    return parsed


def parse_overrides(texts) -> list:
    """Hydra's parse of override texts (``OverridesParser.parse_overrides``: each text parsed on its own), each text's
    parse remembered in this process: Hydra's grammar takes ~1 ms an override, and composing a sweep parses the same
    texts once per cell, arm and seed (a dry run of `arctl sweep paper` ~5,000 times). Every call gets copies of its
    own (Hydra's applier is handed them). Raises Hydra's ``OverrideParseException`` as it does (never remembered)."""
    return [copy.deepcopy(_parsed_once(text)) for text in texts]


def split_overrides(overrides: list[str], where: str) -> Overrides:
    """Parse ``overrides`` with Hydra's grammar; group choices are checked against arctl/conf."""
    from hydra.errors import HydraException

    groups: dict[str, str] = {}
    keys: list[str] = []
    added: list[str] = []
    written: list[str] = []
    groups_known = config_groups()  # read once per call: a directory listing per config dir
    bools = set(bool_fields(run_config()))
    nullable_bools = set(bool_fields(run_config(), nullable=True))
    secrets = known_secrets(os.environ)
    for text in overrides:
        if isinstance(text, str) and (name := next((n for n, v in secrets.items() if v in text), None)):
            # before anything parses or shows it: an error line would echo it, and a later override of the same
            # key would leave the composed config clean while the text stays in the command line (from an audit:
            # `wandb.notes=$KEY wandb.notes=x` passed, and W&B recorded the command line then; it no longer sees it)
            raise SpecError(f"the value of {secret_shown(name)} is written in an override (overrides are frozen into "
                            "the run's config and its job script)", where,
                            "a secret is read from the environment where it is used, never written in an override")
        if isinstance(text, str) and text.startswith("~"):
            raise SpecError(f"override {text!r} deletes a key", where, "set it to null instead: KEY=null")
        if not isinstance(text, str) or "=" not in text:
            raise SpecError(f"override {text!r} is not KEY=VALUE", where, "e.g. thinking.lam=0.7 or prior=linear")
        if not text.split("=", 1)[0].strip().lstrip("+"):
            raise SpecError(f"override {text!r} has no key before '='", where, "e.g. thinking.lam=0.7 or prior=linear")
        if len(text) > MAX_OVERRIDE_CHARS:
            raise SpecError(f"override {_shown(text)} is {len(text)} characters long", where,
                            f"an override is at most {MAX_OVERRIDE_CHARS} characters")
        if bracket_depth(text) > MAX_NESTING:
            raise SpecError(f"override {_shown(text)} nests brackets {bracket_depth(text)} deep", where,
                            f"at most {MAX_NESTING} levels")
        try:
            (parsed,) = parse_overrides([text])
        except HydraException as err:
            msg = str(err).strip().splitlines()[0]
            raise SpecError(f"cannot parse override {text!r} ({msg})", where, _parse_hint(text)) from None
        if parsed.is_sweep_override():  # a,b / range(..) / glob(..): one run per value in Hydra's multirun
            raise SpecError(f"override {text!r} is a sweep over several values, not one value", where,
                            "sweep with a sweep spec's grid (`arctl cp priors` shows one), or quote a value "
                            "holding a comma: KEY='a,b'")
        if parsed.package is not None:  # Hydra's group@package: arctl's groups have one place each (from a review:
            # `prior@thinking=linear` was taken for prior=linear, the thinking prior, whatever the package said)
            raise SpecError(f"override {text!r} names a package (@{parsed.package})", where,
                            f"choose the option without it: {parsed.key_or_group.lstrip('+')}=<option>; the summary's "
                            "prior is summary.prior=<name>")
        if parsed.key_or_group.lstrip("+") in IDENTITY_KEYS:
            raise SpecError(f"override {text!r} sets the run's identity", where,
                            "the experiment, arm and seed come from the spec, --arm and --seeds")
        if parsed.key_or_group.lstrip("+") in SCALE_KEYS:
            raise SpecError(f"override {text!r} sets what --scale chooses", where,
                            "choose the scale with --scale, and a model with model=<option>")
        found = value_problem(parsed.value())  # what a value may interpolate: arctl.compose.resolvers
        if found:
            raise SpecError(f"override {found}", where, "write the value itself")
        key = parsed.key_or_group
        if parsed.is_delete():
            raise SpecError(f"override {text!r} deletes a key", where, "set it to null instead: KEY=null")
        if key in groups_known and not parsed.is_add() and not parsed.is_force_add():
            option = parsed.value()
            options = group_options(key)
            if not isinstance(option, str) or option not in options:
                raise SpecError(f"unknown {key} option {option!r} in {text!r}", where, did_you_mean(str(option), options))
            groups[key] = option
            continue
        if (parsed.is_add() or parsed.is_force_add()) and not key.startswith(open_sections()):
            raise SpecError(
                f"override {text!r} adds a new key",
                where,
                "arctl specs are closed: use an existing key (`arctl show EXP` lists them); "
                f"new keys are allowed only under {', '.join(s.rstrip('.') for s in open_sections())} (the backends' sections)",
            )
        name = key.lstrip("+")
        if name in bools and not isinstance(parsed.value(), bool):
            # OmegaConf would take 2 (any nonzero number), 'yes', 'on' or '1' for true
            raise SpecError(f"override {text!r}: {name} is true or false", where, f"write {name}=true or {name}=false")
        if name in nullable_bools and not isinstance(parsed.value(), bool) and parsed.value() is not None:
            raise SpecError(f"override {text!r}: {name} is true, false or null", where,
                            f"write {name}=true, {name}=false or {name}=null")
        keys.append(text)
        written += leaf_keys(name, parsed.value())
        if parsed.is_add() or parsed.is_force_add():
            added.append(name)
    return Overrides(groups=groups, keys=keys, added=added, written=written)

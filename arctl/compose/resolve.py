"""Compose resolved run configs (one per arm x seed) from experiments and sweeps.

Order of precedence, lowest first: the schema (arctl/config/schema.py: every key's type and default);
arctl/conf/config.yaml and its groups; the experiment's ``groups``; ``scale`` (``--scale`` or
``scale=``; the tiny scale picks ``model=tiny`` unless the user chose a model); the experiment's
``overrides``, its ``scales.<scale>`` overrides; the arm's overrides; the sweep's overrides and grid
point; the user's overrides.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from pathlib import Path

from arctl.algo import settings as algo_settings
from arctl.compose import plugins
from arctl.compose.errors import SpecError, closest, did_you_mean
from arctl.compose.experiment import Experiment, load_experiment, read_yaml_file
from arctl.compose.overrides import override_key, parse_overrides, split_overrides
from arctl.compose.paths import (
    CONF_DIR,
    config_dirs,
    config_groups,
    default_option,
    group_options,
    hydra_searchpath,
    package_config_dirs,
    shadowed_option,
    spec_files,
)
from arctl.compose.resolvers import budget_grid, composed_problem, leftover_problem
from arctl.compose.resolvers import register as register_resolvers
from arctl.compose.run import ResolvedRun  # noqa: F401 - re-exported (arctl.compose.ResolvedRun)
from arctl.compose.sweep import load_sweep
from arctl.compose.validate import (
    check_ranges,
    is_written,
    read_at_another_scale,
    unread_settings,
    validate_config,
)
from arctl.config import safe_yaml, schema
from arctl.config.hydra_text import override_value, quoted

# a scale profile without `preempt_warning_s`: SLURM's warning before the time limit (at most a quarter of it)
DEFAULT_PREEMPT_WARNING_S = 60
# the scale's keys that _finalize reads as another key's default (beside the schema's ``${scale.X}`` defaults)
FINALIZE_SCALE_DEFAULTS = {"scale.preempt_warning_s": "cluster.preempt_warning_s"}
# the scale's keys that _finalize derives other values from (the evaluation budgets, the Dr. GRPO constant): the
# scale's own settings, not only another key's default
FINALIZE_SCALE_READS = ("scale.budgets", "scale.summary_max_tokens")
_SCALE_REFERENCE = re.compile(r"^\$\{(?:oc\.select:)?(scale\.\w+)(?:,[^}]*)?\}$")

# (methods registered in this process, the search path, choices)
_BASE_CONFIGS: dict[tuple[int, str, tuple[str, ...]], object] = {}


def _compose_groups(group_overrides: tuple[str, ...]):
    """Hydra-compose config.yaml with config-group choices only; cached per choice set, since a
    compose reads every config file again (~0.1 s) and a sweep repeats a few choice sets."""
    from hydra import compose, initialize_config_dir

    from arctl.algo.methods.registry import generation

    # the backends' config-group options (their scale profiles) and the user's conf/ ones, after arctl/conf; in the
    # key, so that a process that changes folder (another project's conf/) does not reuse a stale compose
    searchpath = hydra_searchpath()
    key = (generation(), searchpath, group_overrides)  # a method registered since has a section of its own (a review)
    if key not in _BASE_CONFIGS:
        for text in group_overrides:  # the user's option files, read as spec files are before Hydra reads them
            group, _, option = text.lstrip("~+").partition("=")
            path = option_file(group.strip(), option.strip()) if option.strip() else None
            if path is not None and path.parent.parent not in package_config_dirs():
                read_option_file(path)
        schema.register(plugins.run_config())  # config.yaml's first default: every key's type and default
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            _BASE_CONFIGS[key] = compose(config_name="config", overrides=[searchpath, *group_overrides])
    return _BASE_CONFIGS[key]


def compose_config(overrides: list[str]) -> dict:
    """Compose arctl/conf/config.yaml with Hydra overrides; return the resolved plain dict.

    Same semantics as ``hydra.compose(config_name="config", overrides=overrides)``: group choices
    build the defaults list, then key overrides are applied in order on the struct config by
    Hydra's own override applier.
    """
    import copy

    import yaml
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    register_resolvers()
    cfg = None
    try:
        parsed = parse_overrides(overrides)
        known = config_groups()
        groups = tuple(o.input_line for o in parsed if o.key_or_group in known and not o.is_add())
        keys = [o for o in parsed if not (o.key_or_group in known and not o.is_add())]
        cfg = copy.deepcopy(_compose_groups(groups))
        ConfigLoaderImpl._apply_overrides_to_config(keys, cfg)
        found = composed_problem(cfg)  # before anything is resolved (arctl.compose.resolvers)
        if found:
            raise SpecError(found[1], found[0], "write the value itself")
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except (HydraException, OmegaConfBaseException) as err:
        raise (_argument_problem(cfg, err) or _translate(err)) from None
    except yaml.YAMLError as err:  # a file Hydra read that the check of the chosen options did not (one a user's
        # option's defaults list brings): a traceback before, from a hunt
        raise _yaml_problem(err) from None
    found = leftover_problem(data)
    if found:
        raise SpecError(found[1], found[0], "write the value itself")
    return data


def option_file(group: str, option: str) -> Path | None:
    """The file Hydra reads for ``group=option``: the first of the config search path
    (:func:`arctl.compose.paths.config_dirs`, its one home) that has ``<group>/<option>.yaml``; None if none."""
    for folder in config_dirs():
        path = folder / group / f"{option}.yaml"
        if path.is_file():
            return path
    return None


def read_option_file(path: Path) -> dict:
    """A user's config-group option file, read by the one bounded YAML reader (:mod:`arctl.config.safe_yaml`) as a
    spec file is: a YAML mistake in it (a tab, a key twice) is one line naming the file, the line and the fix. From a
    hunt: Hydra's own reading of it was a 132-line traceback (``yaml.scanner.ScannerError``). An empty file is an
    empty option, as Hydra reads it."""
    data = read_yaml_file(path, lambda said: "indent with spaces: YAML does not allow a tab there" if "'\\t'" in said
                          else "write each key once in a mapping" if "appears twice" in said else "fix the file")
    if data is not None and not isinstance(data, dict):
        raise SpecError("expected a mapping at the top level", str(path),
                        "a config-group option is a mapping of config keys, e.g. thinking: {prior: custom}")
    return data or {}


def _yaml_problem(err) -> SpecError:
    """A YAML error of a file Hydra read (``err.problem_mark.name``): the file read again as :func:`read_option_file`
    reads it, for the same line; else YAML's own words."""
    mark = getattr(err, "problem_mark", None)
    path = Path(mark.name) if mark is not None and mark.name and not mark.name.startswith("<") else None
    if path is not None and path.is_file():
        read_option_file(path)  # raises its one line
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return SpecError(f"invalid YAML{where}: {getattr(err, 'problem', None) or type(err).__name__}",
                     str(path) if path is not None else "a config-group option", "fix the file")


def _translate(err: Exception) -> SpecError:
    """Turn Hydra/OmegaConf errors into one clear line."""
    from omegaconf.errors import MissingMandatoryValue

    mine = _cause(err, SpecError)  # an arctl resolver's own error, unwrapped
    if mine is not None:  # named after the key that called the resolver, where the resolver could not say
        key = getattr(err, "full_key", None)
        return mine if mine.where or not key else SpecError(mine.what, str(key), mine.hint)
    found = _type_error(err) or _unknown_key_in_file(err)
    if found:
        return found
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    if isinstance(err, MissingMandatoryValue):
        key = getattr(err, "full_key", None) or "?"
        hint = "prior=custom needs thinking.probs=[P_1,...,P_m]" if "probs" in str(key) else f"set {key}=..."
        return SpecError(f"missing value for {key}", str(key), hint)
    if "Could not override" in first or "not in struct" in text or "Key '" in first:
        match = re.search(r"Could not override '([^']+)'", text) or re.search(r"Key '([^']+)'", text)
        key = match.group(1) if match else "?"
        from omegaconf.errors import ConfigKeyError

        # the unknown key inside a mapping written whole (optim={lr:2e-6,lrr:1}: 'optim.lrr', not 'optim', which
        # exists; from a hunt, the line said "unknown config key 'optim' - did you mean 'optim'")
        inner = str(getattr(_cause(err, ConfigKeyError), "full_key", None) or "")
        key = inner if key != "?" and inner.startswith(key + ".") else key
        return SpecError(
            f"unknown config key {key!r}",
            "overrides",
            _key_hint(key) + " (`arctl show EXP` prints every key)",
        )
    appended = re.search(r"Could not append to config\. An item is already at '([^']+)'", first)
    if appended:  # +key= of a key the config has
        key = appended.group(1)
        return SpecError(f"+{key}= adds a key the config already has", key, f"drop the +: {key}=...")
    key = str(getattr(err, "full_key", None) or "") or "overrides"  # the key whose value failed to resolve
    if first.startswith("Interpolation key"):  # ${KEY} naming no key of the config
        return SpecError(first, key, "an interpolation ${KEY} names a config key (`arctl show EXP` prints "
                         "every key), e.g. eval.budgets=${thinking.budgets}")
    return SpecError(first, key)


_KEY_PART = re.compile(r"[^.\[\]]+|\[(\d+)\]")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)\}")  # ${key}: no resolver, no relative key


def _raw_value(data, key: str):
    """The value at dotted ``key`` (``eval.grid[0]``) of an unresolved container, or None."""
    for part in _KEY_PART.finditer(key):
        index = part.group(1)
        try:
            data = data[int(index)] if index is not None else data[part.group(0)]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _argument_problem(cfg, err: BaseException) -> SpecError | None:
    """Where an arctl resolver refused an argument that its call read from another key (``eval.grid``'s
    ``${arctl.grid:${scale.budgets},${eval.grid_size}}`` with ``eval.grid_size=0``), that key's own range
    error: the user wrote that key, not the one that calls the resolver (a spec's, perhaps). None otherwise."""
    from omegaconf import OmegaConf

    from arctl.compose.limits import range_problem

    key = getattr(err, "full_key", None)
    if cfg is None or not key or _cause(err, SpecError) is None:
        return None
    raw = OmegaConf.to_container(cfg, resolve=False)
    text = _raw_value(raw, str(key))
    for ref in _REFERENCE.findall(text) if isinstance(text, str) else ():
        value = _raw_value(raw, ref)
        if value is None or (isinstance(value, str) and "${" in value):
            continue
        nested: dict = {}
        node = nested
        *parents, last = ref.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        found = range_problem(nested)
        if found and found[0] == ref:
            return SpecError(found[1], ref, f"override it, e.g. {ref}=...")
    return None


def _cause(err: BaseException | None, kind: type) -> BaseException | None:
    """``err`` or the first of its causes (Hydra wraps OmegaConf's errors) that is a ``kind``."""
    while err is not None and not isinstance(err, kind):
        err = err.__cause__ or err.__context__
    return err


_EXPECTED = {"Float": "a number", "Integer": "an integer", "String": "a string", "bool": "true or false",
             "ListConfig": "a list, e.g. [1,2]", "DictConfig": "a mapping"}
_SCHEMA_TYPES = {"list": "a list, e.g. [1,2]", "tuple": "a list, e.g. [1,2]", "dict": "a mapping",
                 "bool": "true or false", "int": "an integer", "float": "a number", "str": "text"}


def _schema_expected(key: str) -> str | None:
    """What the schema's field for ``key`` takes, in words (an entry's type for ``key[i]`` of a list); None for a
    key the schema does not type. OmegaConf's message names the type of the value it could not convert, not the
    key's (from a hunt: ``wandb.notes=${thinking.budgets}``, a text key, was said to expect a list)."""
    base, _, index = key.partition("[")
    found = dict(schema._walk(plugins.run_config())).get(base)
    if found is None:
        return None
    kind = found.type if isinstance(found.type, str) else re.sub(r"<class '([\w.]+)'>", r"\1", str(found.type))
    kind = re.sub(r"^(?:typing\.)?Optional\[(.*)\]$", r"\1", kind.strip())
    kind = re.sub(r"\s*\|\s*None$|^None\s*\|\s*", "", kind)
    if index:
        entry = re.match(r"(?:typing\.)?[Ll]ist\[(.*)\]$", kind)
        if not entry:
            return None
        kind = entry.group(1)
    name = re.match(r"(?:typing\.|builtins\.)?(\w+)", kind)
    return _SCHEMA_TYPES.get(name.group(1).lower()) if name else None


def _type_error(err: BaseException) -> SpecError | None:
    """A value of the wrong type for the schema (``arctl.config.schema``), anywhere in ``err``'s
    causes: one line naming the key, the value and the type the key takes (the schema's field's type; OmegaConf's
    message only for a key the schema does not type)."""
    from omegaconf.errors import ValidationError

    err = _cause(err, ValidationError)
    if err is None:
        return None
    key = str(getattr(err, "full_key", "") or "?")
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    value = (re.search(r"Value '(.*)' (?:of type|is not)", first)
             or re.search(r"Cannot convert '\w+' to string: '(.*)'$", first))
    expected = _schema_expected(key) or next(
        (what for name, what in _EXPECTED.items() if re.search(rf"\b{name}\b", first)), None)
    if expected:
        what = f"{key}={value.group(1)} is invalid" if value else f"{key} has a value of the wrong type"
        what += f": expected {expected}"
    else:
        what = f"{key}: {first}"
    return SpecError(what, key, "every key's type is in arctl/config/schema.py (`arctl show EXP` prints the values)")


def _unknown_key_in_file(err: BaseException) -> SpecError | None:
    """A config-group option (``<group>/<option>.yaml`` of :func:`option_file`: arctl's, a backend's or the user's
    ``conf/``) that sets a key the schema does not have: one line naming the key, the file Hydra read and the key's
    line in it. From a hunt: a user's ``P/conf/prior/my.yaml`` was said to be ``arctl/conf/prior/my.yaml``."""
    from omegaconf.errors import ConfigKeyError

    where = re.match(r"In '([^']+)'", str(err).strip())
    err = _cause(err, ConfigKeyError)
    key = getattr(err, "full_key", None)
    if err is None or not where or not key:
        return None
    key = str(key)
    group, _, option = where.group(1).rpartition("/")
    path = option_file(group, option) if group else None
    if path is None:
        return SpecError(f"unknown config key {key!r}", f"arctl/conf/{where.group(1)}.yaml", _key_hint(key))
    text = path.read_text(encoding="utf-8")
    global_ = re.search(r"^#\s*@package\s+_global_\s*$", text, re.MULTILINE) is not None
    if not global_ and (key == group or key.startswith(group + ".")):  # its keys went under the group's package
        return SpecError(f"unknown config key {key!r}: without a '# @package _global_' line Hydra puts the "
                         f"file's keys under {group!r}", str(path),
                         "add '# @package _global_' as its first line (arctl's own options have it)")
    line = _key_line(text, key)
    return SpecError(f"unknown config key {key!r}" + (f" at line {line}" if line else ""), str(path), _key_hint(key))


def _key_line(text: str, key: str) -> int | None:
    """The line of YAML ``text`` that writes dotted ``key`` (its deepest key written there), or None."""
    import yaml

    loader = safe_yaml.PythonLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()
    line = None
    for part in key.split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        if found is None:
            break
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _key_hint(key: str) -> str:
    near = closest(key, compose_config_keys())
    if near:
        return "did you mean " + " or ".join(repr(k) for k in near) + "?"
    return "no such key in arctl/conf/config.yaml"


_KEYS_CACHE: list[str] = []


def compose_config_keys() -> list[str]:
    """Every dotted key of the default config (for suggestions)."""
    if not _KEYS_CACHE:
        cfg = compose_config(["experiment=x", "arm=x"])
        _KEYS_CACHE.extend(_dotted_keys(cfg))
    return _KEYS_CACHE


def _dotted_keys(node: dict, prefix: str = "") -> list[str]:
    keys = []
    for k, v in node.items():
        path = f"{prefix}{k}"
        keys.append(path)
        if isinstance(v, dict):
            keys.extend(_dotted_keys(v, path + "."))
    return keys


def _finalize(cfg: dict) -> dict:
    """Derived values: evaluation budgets and the final-evaluation budget grid.

    ``eval.budgets: null`` -> the scale's budgets and the thinking budgets, up to the largest
    thinking budget (GRPO trains at the max budget only but is evaluated at every budget; an arm
    evaluated past its training budget, like Elastic Reasoning, sets them, see ``arctl.grid``);
    ``eval.grid: null`` -> ``eval.grid_size`` budgets evenly spaced up to the largest thinking budget;
    ``optim.loss_norm_len: null`` -> the authors' Dr. GRPO constant (``arctl.algo.settings``) of the
    larger of the scale's and the arm's largest budget and of the scale's summary cap;
    ``cluster.preempt_warning_s: null`` -> the scale's warning, at most a quarter of the time limit.
    """
    budgets = cfg["thinking"]["budgets"]
    if not (isinstance(budgets, list) and budgets and all(isinstance(b, int) for b in budgets)):
        return cfg  # validation reports it
    top = max(budgets)
    if cfg["eval"].get("budgets") is None:
        scale_budgets = [b for b in cfg["scale"].get("budgets") or [] if isinstance(b, int)]
        cfg["eval"]["budgets"] = sorted({b for b in scale_budgets + budgets if 0 < b <= top})
    if cfg["eval"].get("grid") is None:
        size = cfg["eval"]["grid_size"]  # the schema's default where not set
        if not isinstance(size, int) or isinstance(size, bool):
            raise SpecError(f"eval.grid_size={size!r} must be an integer", "eval.grid_size")
        cfg["eval"]["grid"] = budget_grid(top, size)
    cluster, scale_cfg = cfg.get("cluster") or {}, cfg.get("scale") or {}
    time_min = cluster.get("time_min")
    if cluster.get("preempt_warning_s") is None and isinstance(time_min, int) and time_min > 0:
        default = scale_cfg.get("preempt_warning_s") or DEFAULT_PREEMPT_WARNING_S
        cluster["preempt_warning_s"] = max(1, min(int(default), time_min * 60 // 4))
    # one constant for the arms compared side by side: the scale's b_m, also for an arm trained at a
    # smaller budget (Elastic's t), or the arm's own when it thinks longer (the 16k runs); the scale's
    # summary cap, also for an arm with its own (Elastic's s)
    optim = cfg.get("optim") or {}
    max_tokens = (cfg.get("scale") or {}).get("summary_max_tokens", (cfg.get("summary") or {}).get("max_tokens"))
    if optim.get("loss_norm_len") is None and isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        scale_top = max([top, *[b for b in (cfg.get("scale") or {}).get("budgets") or [] if isinstance(b, int)]])
        optim["loss_norm_len"] = algo_settings.authors_loss_norm_len(scale_top, max_tokens)
    return cfg


def scale_defaults() -> dict[str, str]:
    """``scale.X`` -> the key whose default it is and nothing more: the schema's fields whose default is
    ``${scale.X}`` (``rollout.n``, ``cluster.cpus_per_task``, ...) and what :func:`_finalize` fills in from the scale
    (:data:`FINALIZE_SCALE_DEFAULTS`), but for the scale keys it derives other values from. Typed on the command
    line, such a key gave another run id than the key it is the default of, for the same run (from a hunt:
    ``scale.rollout_n=16`` and ``rollout.n=16``), so it is refused there (:func:`_refuse_scale_defaults`)."""
    found = {}
    for key, fld in schema._walk(plugins.run_config()):
        match = _SCALE_REFERENCE.match(fld.default) if isinstance(fld.default, str) else None
        if match:
            found.setdefault(match.group(1), key)
    found.update(FINALIZE_SCALE_DEFAULTS)
    return {scale_key: key for scale_key, key in found.items() if scale_key not in FINALIZE_SCALE_READS}


# a value Hydra reads as a number, a boolean or an infinity rather than as the text typed
_NOT_TEXT = re.compile(r"[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)|true|false",
                       re.IGNORECASE)


@functools.cache
def text_keys() -> frozenset[str]:
    """The keys of the typed sections that hold one text (``str``, ``str | None``)."""
    return frozenset(key for key, fld in schema._walk(plugins.run_config())
                     if str(fld.type) in ("str", "str | None", "<class 'str'>"))


def as_typed(text: str) -> str:
    """A command-line ``KEY=VALUE`` whose key holds text and whose value Hydra would read as a number or a boolean,
    with the value quoted: the text as typed. From a hunt: ``wandb.group=1.10`` grouped the run under '1.1',
    ``wandb.project=2e5`` logged to '200000.0', ``cluster.qos=1_000`` asked SLURM for '1000'. The run's
    ``user_overrides`` keep the text as it was typed."""
    head, sep, value = text.partition("=")
    if not sep or head.lstrip().startswith("~") or override_key(text) not in text_keys() \
            or not _NOT_TEXT.fullmatch(value.strip()):
        return text
    return f"{head}={quoted(value.strip())}"


def _refuse_scale_defaults(user) -> None:
    """A command-line override of a key of :func:`scale_defaults`: one line naming the key to set instead."""
    defaults = scale_defaults()
    for text in user.keys:
        key = override_key(text)
        if key in defaults:
            raise SpecError(f"override {text!r}: {key} is {defaults[key]}'s default", COMMAND_LINE,
                            f"set {defaults[key]}")


@functools.cache
def scale_model(scale: str) -> str | None:
    """The model option a scale fixes (``scale.model`` in its YAML: the tiny scales' ``tiny``), which
    replaces an experiment's model choice unless the user or a sweep picks one; None: the spec's."""
    value = (compose_config([f"scale={scale}", "experiment=x", "arm=x"]).get("scale") or {}).get("model")
    return str(value) if value else None


def resolve_arm(
    experiment: Experiment,
    arm: str,
    seed: int,
    scale: str | None = None,
    user_overrides: list[str] | None = None,
    sweep_overrides: list[str] | None = None,
    sweep: str | None = None,
    sweep_file: str | None = None,
    unread: list | None = None,
) -> ResolvedRun:
    """One run of ``experiment``'s ``arm``. The settings the user wrote on the command line that this run never
    reads (:func:`arctl.compose.validate.unread_settings`) are refused; given ``unread``, they and those the spec
    files write are appended to it instead (:class:`Unread`): a launch of several arms refuses a setting none of
    the runs that write it reads (:func:`_refuse_unread`). A launch's many seeds of an arm: :class:`_Arms`."""
    plan = _ArmPlan.make(experiment, arm, scale, user_overrides, sweep_overrides, sweep, sweep_file)
    try:
        cfg = compose_config(plan.overrides(seed))
    except SpecError as err:
        raise _placed(err, plan.parts, plan.run) from None
    return plan.finish(seed, cfg, unread)


@dataclasses.dataclass(frozen=True)
class _ArmPlan:
    """What :func:`resolve_arm` does for an arm before it composes a seed's config, none of which reads the seed
    (the parts and where each was written, the scale, the config-group choices, the Hydra overrides around
    ``seed=``), and :meth:`finish`, what it does with one seed's composed config."""

    experiment: Experiment
    arm: str
    scale: str
    parts: list  # (Overrides, where they were written), in the order Hydra applies them
    groups: dict[str, str]
    head: list[str]  # the Hydra overrides before seed=SEED
    tail: list[str]  # and after it
    swept_place: str
    sweep: str | None
    user_overrides: list
    sweep_overrides: list

    @property
    def run(self) -> str:
        return f"{self.experiment.name}/{self.arm}"

    def overrides(self, seed: int) -> list[str]:
        return [*self.head, f"seed={seed}", *self.tail]

    @classmethod
    def make(cls, experiment: Experiment, arm: str, scale: str | None, user_overrides: list[str] | None,
             sweep_overrides: list[str] | None, sweep: str | None, sweep_file: str | None) -> _ArmPlan:
        user = split_overrides(list(user_overrides or []), COMMAND_LINE)
        _refuse_scale_defaults(user)
        swept_place = _sweep_place(sweep, sweep_file)
        swept = split_overrides(list(sweep_overrides or []), swept_place)
        if scale is not None and not str(scale).strip():
            raise SpecError("--scale is empty", "--scale",
                            f"give one of {', '.join(group_options('scale'))}, or leave it out")
        if scale and user.groups.get("scale", scale) != scale:
            raise SpecError(f"--scale {scale} and scale={user.groups['scale']} disagree", "command line",
                            "give the scale once")
        scale = user.groups.get("scale") or scale or default_option("scale")  # config.yaml's defaults list
        if scale not in group_options("scale"):
            failed = plugins.backend_failures()  # a scale a backend that does not load would bring (from a review)
            raise SpecError(f"unknown scale {scale!r}" + (f" (backends that cannot be used: "
                            f"{'; '.join(failed.values())})" if failed else ""), "--scale",
                            did_you_mean(scale, group_options("scale")))
        where = f"{experiment.path}"
        spec_parts = [(split_overrides(texts, place), place) for texts, place in (
            (experiment.overrides, f"{where}: overrides"),
            (experiment.scales.get(scale, []), f"{where}: scales.{scale}"),
            (experiment.arms[arm], f"{where}: arms.{arm}"))]
        (exp_all, _), (exp_scale, _), (arm_ov, _) = spec_parts
        parts = [*spec_parts, (swept, swept_place), (user, COMMAND_LINE)]  # (overrides, where they were written)
        for part, place in parts[:-1]:
            if "scale" in part.groups:  # the launch picks the scale; a spec choosing one would be overruled
                raise SpecError(f"scale={part.groups['scale']} in a spec", place, "the scale is chosen with --scale")
        if "scale" in experiment.groups:
            raise SpecError(f"groups: {{scale: {experiment.groups['scale']}}} in a spec", f"{where}: groups",
                            "the scale is chosen with --scale")
        for unknown in sorted(set(experiment.scales) - set(group_options("scale"))):  # a typo applies to no scale
            close = difflib.get_close_matches(unknown, group_options("scale"), n=1, cutoff=0.7)
            if close:  # (a scale no installed plugin provides, far from every known one, is another machine's)
                raise SpecError(f"scales.{unknown}: no such scale", f"{where}: scales", f"did you mean {close[0]!r}?")
        for other, texts in experiment.scales.items():  # the keys and options of the sections this run does not apply
            if other != scale and other in group_options("scale") and texts:
                _check_other_scale(f"{where}: scales.{other}", other, tuple(texts), experiment.name)

        groups: dict[str, str] = {}
        for part in (experiment.groups, exp_all.groups, exp_scale.groups, arm_ov.groups, swept.groups, user.groups):
            for group, option in part.items():  # every choice is checked, also one a later part replaces
                if group not in config_groups():
                    raise SpecError(f"unknown config group {group!r}", where, did_you_mean(group, list(config_groups())))
                if option not in group_options(group):
                    raise SpecError(f"unknown {group} option {option!r}", where,
                                    did_you_mean(option, group_options(group)))
                if (shadow := shadowed_option(group, option)) is not None:  # a user's copy Hydra would never read
                    raise shadow
            groups.update(part)
        groups["scale"] = scale
        fixed = scale_model(scale)  # a scale that fixes the model (tiny) wins over the spec's choice
        if fixed and "model" not in user.groups and "model" not in swept.groups:
            groups["model"] = fixed
        for group, option in groups.items():
            if option not in group_options(group):
                raise SpecError(f"unknown {group} option {option!r}", where, did_you_mean(option, group_options(group)))
        head = [f"{g}={o}" for g, o in sorted(groups.items())]
        # names as text: Hydra would read an arm "1e3" as 1000.0, "true" as True, "null" as no arm
        head += [f"experiment={override_value(experiment.name)}", f"arm={override_value(arm)}"]
        tail = exp_all.keys + exp_scale.keys + arm_ov.keys + swept.keys + [as_typed(text) for text in user.keys]
        return cls(experiment=experiment, arm=arm, scale=scale, parts=parts, groups=groups, head=head, tail=tail,
                   swept_place=swept_place, sweep=sweep, user_overrides=list(user_overrides or []),
                   sweep_overrides=list(sweep_overrides or []))

    def finish(self, seed: int, cfg: dict, unread: list | None) -> ResolvedRun:
        """The run of ``seed`` from its composed config ``cfg`` (:func:`compose_config` of :meth:`overrides`):
        its ranges and rules checked, its derived values filled in, its settings that it never reads found."""
        experiment, arm, scale, parts, sweep = self.experiment, self.arm, self.scale, self.parts, self.sweep
        where, swept_place = f"{experiment.path}", self.swept_place
        (exp_all, _), (exp_scale, _), (arm_ov, _), (swept, _), (user, _) = parts
        try:
            check_ranges(cfg)  # once, before the derived values are computed from them (eval.grid_size, ...)
        except SpecError as err:  # said where the value was written, as a compose error is (from a hunt)
            raise _placed(err, parts, self.run, composed=True) from None
        _check_added_keys(parts, cfg, tuple(f"{g}={o}" for g, o in sorted(self.groups.items())))
        cfg = _finalize(cfg)
        if (cfg.get("trainer") or {}).get("init_run") is not None:
            raise SpecError("trainer.init_run is written by the launcher", f"{experiment.name}/{arm}: trainer.init_run",
                            "set trainer.init_from=ARM (or EXPERIMENT/ARM): the launcher finds that run")
        if sweep:
            cfg["wandb"]["group"] = sweep if cfg["wandb"]["group"] == experiment.name else cfg["wandb"]["group"]
        try:
            validate_config(cfg, ranges_checked=True)
        except SpecError as err:
            raise _placed(err, parts, self.run, composed=True) from None
        # the keys every part of the run writes, the spec's files as well as the command line: a key that no run
        # reads where it is written changes the run id and not one number (a user's sweep or experiment file was
        # not checked: a sweep's grid over reward.alpha with no length penalty made cells that differed in their
        # run ids only). A spec runs at every scale: what only another scale's backend reads is its to write, but
        # for its scales.<scale> section. Each key is the last part's that writes it, as Hydra applies them.
        sources = [(exp_all, f"{where}: overrides"), (exp_scale, f"{where}: scales.{scale}"),
                   (arm_ov, f"{where}: arms.{arm}"), (swept, swept_place), (user, COMMAND_LINE)]
        written = {place: set(_user_keys(part)) for part, place in sources}
        found = Unread(written={(place, k) for place, keys in written.items() for k in keys})
        for what, key, hint in unread_settings(cfg, set().union(*written.values()), grid_literal=_grid_literal(parts)):
            place = [p for p, keys in written.items() if is_written(keys, key)][-1]
            if place == COMMAND_LINE:
                found.add(SpecError(what, f"{experiment.name}/{arm}: {key}", hint), (place, key))
            elif place == f"{where}: scales.{scale}" or not read_at_another_scale(key, cfg):
                found.add(SpecError(what, f"{place} ({experiment.name}/{arm}): {key}", hint), (place, key))
        if unread is None:  # one run alone: what the command line wrote (a spec file's key may be another arm's to
            # read, which only the launch's runs together can tell; from a review: a report could not compose such
            # an arm)
            for err, ident in zip(found.problems, found.ids):
                if ident[0] == COMMAND_LINE:
                    raise err
        if unread is not None:
            unread.append(found)
        return ResolvedRun(
            experiment=experiment.name,
            arm=arm,
            seed=seed,
            config=cfg,
            sweep=sweep,
            user_overrides=list(self.user_overrides),
            sweep_overrides=list(self.sweep_overrides),
        )


class _Arms:
    """The runs of one launch (:func:`resolve_experiment`, :func:`resolve_sweep`), each arm planned and composed
    once for all its seeds (:class:`_SeedConfigs`) instead of once a seed (from a hunt: ~90 ms a run, 90 s to plan
    a 1,000-seed launch). :meth:`run` is :func:`resolve_arm`, with the same config, run and error; where an arm's
    config cannot be shown to read its seed only as :class:`_SeedConfigs` recomputes it, or a seed's fails to
    compose, that seed goes :func:`resolve_arm`'s way. Lives as long as the launch's resolving: the spec files and
    the config folders do not change under it."""

    def __init__(self) -> None:
        self._arms: dict[tuple, tuple[Experiment, _ArmPlan, _SeedConfigs] | None] = {}

    def run(self, experiment: Experiment, arm: str, seed: int, scale: str | None = None,
            user_overrides: list[str] | None = None, sweep_overrides: list[str] | None = None,
            sweep: str | None = None, sweep_file: str | None = None, unread: list | None = None) -> ResolvedRun:
        key = (id(experiment), arm, scale, tuple(user_overrides or ()), tuple(sweep_overrides or ()), sweep,
               sweep_file)
        try:
            found = self._arms.get(key, _ABSENT)
        except TypeError:  # an override that is no text: resolve_arm's error
            found = None
        if found is _ABSENT:
            found = self._arms[key] = self._prepare(experiment, arm, seed, scale, user_overrides, sweep_overrides,
                                                    sweep, sweep_file)
        cfg = found[2].config(seed) if found is not None else None
        if cfg is None:
            return resolve_arm(experiment, arm, seed, scale, user_overrides, sweep_overrides, sweep=sweep,
                               sweep_file=sweep_file, unread=unread)
        return found[1].finish(seed, cfg, unread)

    @staticmethod
    def _prepare(experiment, arm, seed, scale, user_overrides, sweep_overrides, sweep, sweep_file):
        try:
            plan = _ArmPlan.make(experiment, arm, scale, user_overrides, sweep_overrides, sweep, sweep_file)
        except Exception:  # noqa: BLE001 - resolve_arm raises it, as it did
            return None
        configs = _SeedConfigs.make(plan, seed)
        return (experiment, plan, configs) if configs is not None else None


# a resolver no spec may call (arctl.compose.resolvers.ALLOWED): the seed's value while _SeedConfigs applies the
# overrides that follow seed=, to find any that reads it
_SEED_PROBE = "arctl.seed_probe"
_SEED_PROBED: list[bool] = []
_DYNAMIC_KEY = re.compile(r"\$\{[^}:]*\$\{|\$\{\s*\.*\s*\}")  # ${a.${b}}, ${..}: a key no text names
_KEY_WORD = re.compile(r"[^\s\\{}()\[\].:'\",$=]+")  # a key's parts, as an interpolation writes them


def _seed_probe():
    _SEED_PROBED.append(True)
    raise RuntimeError("the seed was read while the overrides after seed= applied")


class _SeedConfigs:
    """One arm's composed config at any seed from one Hydra compose: :func:`compose_config` composes and resolves
    the whole config again for each (Hydra's overrides, a deep copy, ~300 interpolations). Equal, key for key, value
    for value and type for type, to what :func:`compose_config` gives for ``seed=SEED``, as:

    - the config-group choices come before ``seed=`` and never read it (:func:`_compose_groups`);
    - the key overrides after ``seed=`` (none may write it: ``IDENTITY_KEYS``) are applied once, with the seed a
      probe resolver that records any read (a container interpolation Hydra walks through, a merge): a read, or
      the probe's text anywhere else once ``seed=`` is applied, and the arm takes :func:`resolve_arm`'s way;
    - per seed ``seed=SEED`` is applied as Hydra applies it, and the top-level keys whose resolved value may read
      the seed (:func:`_seed_units`: ``seed`` itself, ``wandb`` for ``wandb.name: ${arm}-s${seed}``, a section an
      override like ``data.seed=${seed}`` writes) are resolved again as ``OmegaConf.to_container`` resolves them;
      every other key is the first seed's value, copied;
    - a seed whose config fails to resolve (or leaves ``${`` in it) is None: :func:`resolve_arm` gives its error."""

    def __init__(self, cfg, base: dict, units: list[str]) -> None:
        self._cfg, self._base, self._units = cfg, base, units

    @classmethod
    def make(cls, plan: _ArmPlan, seed: int) -> _SeedConfigs | None:
        import copy

        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from omegaconf import OmegaConf

        register_resolvers()
        if not OmegaConf.has_resolver(_SEED_PROBE):
            OmegaConf.register_new_resolver(_SEED_PROBE, _seed_probe)
        known = config_groups()
        if "seed" in known:  # a config group named seed (a user's conf/seed/): seed=SEED would choose an option
            return None
        try:
            parsed = parse_overrides(plan.overrides(seed))
            seeded = parsed[len(plan.head)]
            if seeded.key_or_group != "seed" or seeded.is_add():
                return None
            groups = tuple(o.input_line for o in parsed if o.key_or_group in known and not o.is_add())
            keys = [o for o in parsed if not (o.key_or_group in known and not o.is_add())]
            at = next(i for i, o in enumerate(keys) if o is seeded)
            cfg = copy.deepcopy(_compose_groups(groups))
            ConfigLoaderImpl._apply_overrides_to_config(keys[:at], cfg)
            probe = "${" + _SEED_PROBE + ":}"
            OmegaConf.update(cfg, "seed", probe, merge=True)
            _SEED_PROBED.clear()
            ConfigLoaderImpl._apply_overrides_to_config(keys[at + 1:], cfg)
            if _SEED_PROBED or cfg._get_node("seed")._value() != probe:
                return None
            ConfigLoaderImpl._apply_overrides_to_config([seeded], cfg)
            if composed_problem(cfg):
                return None
            raw = OmegaConf.to_container(cfg, resolve=False)
            if any(_SEED_PROBE in text for text in _texts(raw)):
                return None
            base = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        except Exception:  # noqa: BLE001 - resolve_arm says what fails, as it did
            return None
        if not isinstance(base, dict) or leftover_problem(base) or _SEED_PROBED:
            return None
        units = _seed_units(raw)
        return cls(cfg, base, [key for key in base if key in units])

    def config(self, seed: int) -> dict | None:
        """The resolved config of ``seed``; None where it does not resolve (:func:`compose_config`'s error)."""
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from omegaconf import OmegaConf

        try:
            if type(seed) is int:  # what Hydra's applier does with seed=SEED, whose value it parses to that int
                OmegaConf.update(self._cfg, "seed", seed, merge=True)
            else:
                ConfigLoaderImpl._apply_overrides_to_config(parse_overrides([f"seed={seed}"]), self._cfg)
            data = _plain_copy(self._base)
            for key in self._units:
                data[key] = _resolved_at(self._cfg, key)
        except Exception:  # noqa: BLE001
            return None
        if leftover_problem({key: data[key] for key in self._units}):
            return None
        return data


def _resolved_at(cfg, key: str):
    """The value ``OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)`` gives top-level ``key``,
    resolved as it resolves it (``BaseContainer._to_content``'s ``get_node_value``)."""
    from omegaconf import Container
    from omegaconf.basecontainer import BaseContainer

    node = cfg._get_child(key, throw_on_missing_value=True)._dereference_node()
    if isinstance(node, Container):
        return BaseContainer._to_content(node, resolve=True, throw_on_missing=True)
    return node._value()


def _texts(data):
    """Every text in a plain container, keys aside."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _texts(value)
    elif isinstance(data, list):
        for value in data:
            yield from _texts(value)


def _seed_units(raw: dict) -> set[str]:
    """The top-level keys of an unresolved config (``to_container(resolve=False)``) whose resolved value may read
    ``seed``: ``seed`` and those holding an interpolation that names it, or names a key (or a section above one)
    that does, to a fixed point. A word of an interpolation that is such a key's name or part of its path counts,
    wherever it is written (a resolver's argument, an ``oc.select`` default); an interpolation whose key is computed
    (``${a.${b}}``, ``${oc.select:${b}}``) or is a section above it (``${..}``) counts whatever it names."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(node, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, str(k)))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, str(i)))
        elif isinstance(node, str) and "${" in node:
            found.append((path, node))

    walk(raw, ())
    names, units = {"seed"}, {"seed"}
    changed = True
    while changed:
        changed, left = False, []
        for path, text in found:
            words = set(_KEY_WORD.findall(text))
            if (_DYNAMIC_KEY.search(text) or ("select" in text and text.count("${") > 1)
                    or not names.isdisjoint(words)):
                names.update(path)
                names.update(w for part in path for w in _KEY_WORD.findall(part))
                units.add(path[0])
                changed = True
            else:
                left.append((path, text))
        found = left
    return units


def _plain_copy(data):
    """A copy of a resolved config: new dicts and lists, the same immutable leaves."""
    import copy

    if isinstance(data, dict):
        return {key: _plain_copy(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_plain_copy(value) for value in data]
    if data is None or isinstance(data, (str, int, float, bool)):
        return data
    return copy.deepcopy(data)


_ABSENT = object()
GROUP_KEYS = {"prior": ("thinking.prior", "thinking.probs")}  # a group choice the user makes: the keys it sets


def _user_keys(user) -> list[str]:
    """The keys the command line's overrides write (a config-group choice as the keys it sets): what the
    user asked for, beside what the scale, the experiment, its arms and the sweep set themselves."""
    keys = list(user.written)
    for group in user.groups:
        keys += GROUP_KEYS.get(group, ())
    return keys


def _grid_literal(parts) -> bool:
    """Whether the last override writing ``eval.grid`` writes a value that does not read ``eval.grid_size``
    (a list written out): then :func:`_finalize` does not derive the grid, and the size is read by nothing."""
    last = None
    for part, _ in parts:
        for text in part.keys:
            if override_key(text) == "eval.grid":
                last = text.split("=", 1)[1].strip()
    return last is not None and last != "null" and "eval.grid_size" not in last


COMMAND_LINE = "command line"


@dataclasses.dataclass
class Unread:
    """One run's settings that it never reads (``resolve_arm(unread=...)``): each error with its setting's
    identity (where it was written, the key), and the identities of every setting the run's parts write."""

    written: set[tuple[str, str]]
    problems: list[SpecError] = dataclasses.field(default_factory=list)
    ids: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, err: SpecError, ident: tuple[str, str]) -> None:
        self.problems.append(err)
        self.ids.append(ident)


def _refuse_unread(runs: list[Unread], others=None) -> None:
    """A setting that no run of the launch which writes it reads: the first such run's error. One that some run
    reads is that run's (an experiment's overrides apply to every arm: ``reward.alpha`` for its length-penalty
    arms; a sweep's grid to every cell). ``others``: the lists of the experiment's arms the launch left out
    (``--arm``), asked only where a setting would be refused: one of them reading it keeps it (from a review:
    ``--arm grpo-dense reward.alpha=0.3`` was refused where the whole experiment's launch had made that very run)."""
    def unread_everywhere(ident, among) -> bool:
        return all(ident in run.ids for run in among if ident in run.written)

    more = None
    for run in runs:
        for err, ident in zip(run.problems, run.ids):
            if not unread_everywhere(ident, runs):
                continue
            if others is not None:
                more = others() if more is None else more
                if not unread_everywhere(ident, more):
                    continue
            raise err


def _unread_overrides(found: Unread, texts: list[str], place: str = COMMAND_LINE) -> list[str]:
    """The overrides ``texts`` written at ``place`` (the command line's; a sweep's file: its overrides and grid
    point) of which the run of ``found`` reads nothing (its settings there that
    :func:`arctl.compose.validate.unread_settings` finds): a key override all of whose keys are such settings (a
    section given as a dict: each leaf), a config-group choice one of whose keys is (``prior=uniform`` beside one
    thinking budget)."""
    unread = [key for where, key in found.ids if where == place]

    def covered(key: str) -> bool:
        return any(key == u or key.startswith(u + ".") for u in unread)

    dropped = []
    for text in texts if unread else ():
        part = split_overrides([text], place)
        keys = _user_keys(part)
        if keys and (any(map(covered, keys)) if part.groups else all(map(covered, keys))):
            dropped.append(text)
    return dropped


def _as_read(run: ResolvedRun, found: Unread, experiment: Experiment, scale: str | None,
             sweep_file: str | None = None, arms: _Arms | None = None) -> ResolvedRun:
    """``run`` resolved without the overrides it reads nothing of (:func:`_unread_overrides`): the command
    line's and its sweep's (overrides and grid point), once :func:`_refuse_unread` has found another run of the
    launch that reads them: its config and id are those it has where they were not written. From a hunt:
    ``arctl run ablation-dense reward.alpha=0.3`` gave GRPO, which has no length penalty, a new run id, so it
    trained again with the same numbers; a sweep's ``grid: {reward.alpha: [0.1, 0.2]}`` over ablation-dense
    trained GRPO and GRPO+dense once per value. The CLI says which runs were left as they were
    (:func:`unread_notes`: each run's ``user_overrides`` holds what it was resolved with;
    :func:`sweep_unread_notes`: its ``sweep_not_read`` what it was resolved without)."""
    dropped = _unread_overrides(found, run.user_overrides)
    swept = _unread_overrides(found, run.sweep_overrides, _sweep_place(run.sweep, sweep_file)) if run.sweep else []
    if (dropped or swept) and run.init_from:  # what the run it starts from reads stays: its id names that run (from
        # a review: a grid over reward.alpha beside an arm without a length penalty that starts from one with it made
        # the follower start from a third run at the default alpha, once for every value)
        start = resolve_init_from(run)
        dropped = [text for text in dropped if text not in start.user_overrides]
        swept = [text for text in swept if text not in start.sweep_overrides]
    if not dropped and not swept:
        return run
    kept = [text for text in run.user_overrides if text not in dropped]
    resolve = arms.run if arms is not None else resolve_arm  # a launch's: each arm composed once
    resolved = resolve(experiment, run.arm, run.seed, scale, kept,
                       [text for text in run.sweep_overrides if text not in swept], sweep=run.sweep,
                       sweep_file=sweep_file, unread=[])  # what it does write was checked with the launch
    return dataclasses.replace(resolved, sweep_not_read=swept) if swept else resolved


def unread_notes(runs: list[ResolvedRun], overrides: list[str] | None) -> list[str]:
    """One note per set of the command line's ``overrides`` that some of ``runs`` were resolved without, as
    none of their keys is read there (:func:`_as_read`): the overrides, and those runs as ``EXPERIMENT/ARM``."""
    left: dict[tuple[str, ...], list[str]] = {}
    for run in runs:
        dropped = tuple(text for text in overrides or [] if text not in run.user_overrides)
        name = f"{run.experiment}/{run.arm}"
        if dropped and name not in left.setdefault(dropped, []):
            left[dropped].append(name)
    notes = []
    for dropped, arms in left.items():
        one, alone = len(dropped) == 1, len(arms) == 1
        notes.append(f"{' '.join(dropped)} {'is' if one else 'are'} not read by {names_shown(arms)}: "
                     f"{'it is' if alone else 'they are'} left as {'it was' if alone else 'they were'}, as if "
                     f"{'it' if one else 'they'} had not been typed (the same config and run id)")
    return notes


def sweep_unread_notes(runs: list[ResolvedRun]) -> list[str]:
    """One note per set of a sweep's overrides that every run of an arm in ``runs`` was resolved without, as it
    reads none of them (:func:`_as_read`): those overrides, and the arms as ``EXPERIMENT/ARM``. A grid point's
    overrides, which differ from cell to cell, are said where the cells they made one run are
    (:func:`arctl.launch.cells.same_run_notes`)."""
    by_arm: dict[str, list[ResolvedRun]] = {}
    for run in runs:
        by_arm.setdefault(f"{run.experiment}/{run.arm}", []).append(run)
    left: dict[tuple[str, ...], list[str]] = {}
    for name, cells in by_arm.items():
        every = [text for text in cells[0].sweep_not_read if all(text in c.sweep_not_read for c in cells[1:])]
        if every:
            left.setdefault(tuple(every), []).append(name)
    notes = []
    for texts, arms in left.items():
        one, alone = len(texts) == 1, len(arms) == 1
        notes.append(f"the sweep's {' '.join(texts)} {'is' if one else 'are'} not read by {names_shown(arms)}: "
                     f"{'it is' if alone else 'they are'} left as {'it was' if alone else 'they were'}, as if "
                     f"{'it' if one else 'they'} had not been written (the config and run id of a launch without "
                     f"{'it' if one else 'them'})")
    return notes


def names_shown(names: list[str], most: int = 3) -> str:
    """``names`` for a note: the first ``most``, then how many more."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _sweep_place(sweep: str | None, sweep_file: str | None) -> str:
    """Where a sweep's overrides and grid were written: its file (from a review: "sweep NAME" or "overrides"
    did not say which file to fix, e.g. a user's sweep that overlays a shipped one)."""
    if sweep_file:
        return sweep_file
    if not sweep:
        return "sweep"
    found = spec_files("sweeps").get(sweep)
    return str(found.path) if found else f"sweep {sweep}"


def _placed(err: SpecError, parts, run: str, composed: bool = False) -> SpecError:
    """``err`` of composing a run's overrides, said where the key it is about was written (the spec's
    ``overrides``/``scales``/``arms``, the sweep, the command line): the first part, in the order Hydra applies
    them, that writes the key with the value the error quotes, else the first that writes the key, else one
    that writes a key above or below it, as Hydra stops at the first override that fails. From a review: every
    such error said "overrides", so a sweep over seven experiments did not say which file to fix, and a spec's
    mistake read like the command line's.

    ``composed``: ``err`` is about the composed config (a range, a rule across keys), whose value is the last
    part's that writes the key: that part; where none writes it, the part that wrote a ``key=value`` the error
    quotes (``data.train_batch_size=6 is not a multiple of ...``), else the key is said to be no override's (a
    default, a config group's, or derived from others): from a hunt, such errors named no file at all. The
    command line's is said ``EXPERIMENT/ARM: KEY``, as a setting of it that the run never reads is (resolve_arm)."""
    key = named_key = err.where if err.where not in (None, "overrides") else None
    named = re.search(r"(?:unknown config key|Could not override) '([^']+)'", err.what)
    key = named.group(1) if named else key
    if key:
        written = []  # (key, value, place) of every key override, in the order Hydra applies them
        for part, place in parts:
            for text in part.keys:
                written_key, _, value = text.partition("=")
                written.append((written_key.strip().lstrip("+~"), value.strip(), place))
            for group, option in part.groups.items():  # prior=custom: thinking.prior and thinking.probs
                written += [(k, option, place) for k in GROUP_KEYS.get(group, ())]
        base = key.split("[", 1)[0]  # eval.grid[0]: an item of the list eval.grid=[...] writes
        exact = [w for w in written if w[0] in (key, base)]
        quoted = [w for w in exact if f"={w[1]} is" in err.what]
        near = [w for w in written if key.startswith(w[0] + ".") or w[0].startswith(key + ".")]
        found = quoted or exact or near
        if composed and not found:  # the key no override writes: one the error quotes another key's value of
            found = [w for w in written if re.search(rf"(?<![\w.]){re.escape(f'{w[0]}={w[1]}')}(?![\w.])", err.what)]
            named_key = found[-1][0] if found else named_key
        if found:
            place = found[-1 if composed else 0][2]
            if composed and place == COMMAND_LINE:
                return SpecError(err.what, f"{run}: {err.where}" if err.where else run, err.hint)
            return SpecError(err.what, f"{place} ({run})" + (f": {named_key}" if named_key else ""), err.hint)
        if composed:
            return SpecError(err.what, f"{run}: {key} (no override writes it: a default, a config group's or derived)",
                             err.hint)
    return SpecError(err.what, f"{run}: {err.where}" if err.where else run, err.hint)


_OTHER_SCALES_CHECKED: set = set()


def _check_other_scale(place: str, scale: str, texts: tuple[str, ...], name: str) -> None:
    """The ``scales.<scale>`` section of a spec that a run at another scale does not apply: its overrides parse,
    name config-group options that exist (:func:`arctl.compose.overrides.split_overrides`) and keys that the
    config of ``scale``'s groups has, so a typo there is found at the scale a user tries first (from a hunt:
    ``scales: {paper: [thinking.lamm=0.3]}`` ran at tiny without a word). The config-group compose is cached
    (:func:`_compose_groups`), not a whole run's: its values are that scale's run's to check."""
    from omegaconf import OmegaConf

    from arctl.algo.methods.registry import generation

    ident = (generation(), place, scale, texts)
    if ident in _OTHER_SCALES_CHECKED:
        return
    part = split_overrides(list(texts), place)
    if "scale" in part.groups:
        raise SpecError(f"scale={part.groups['scale']} in a spec", place, "the scale is chosen with --scale")
    cfg = _compose_groups((f"scale={scale}",))
    known = set(_dotted_keys(OmegaConf.to_container(cfg, resolve=False)))
    for text in part.keys:
        key = override_key(text)
        plus = len(text) - len(text.lstrip("+"))
        if key in known and plus == 1:
            raise SpecError(f"+{key}= adds a key the config already has", place, f"drop the +: {key}=...")
        if key in known:
            continue
        backend, section = str(OmegaConf.select(cfg, "backend")), key.split(".", 1)[0]
        if key in part.added or (f"{section}." in plugins.open_sections() and section != backend):
            problem = plugins.added_key_problem(key, backend)  # a key its backend reads, added (_check_added_keys)
            if problem:
                raise SpecError(f"override {text.split('=', 1)[0]}: {problem}", place,
                                f"leave it out (a run at --scale {scale} is a {backend} run: `arctl show {name} "
                                f"--scale {scale}` prints its keys)")
            continue
        near = closest(key, known)
        raise SpecError(f"unknown config key {key!r}", place, ("did you mean " + " or ".join(repr(k) for k in near)
                        + "?" if near else "no such key") + f" (`arctl show {name} --scale {scale}` prints every key)")
    _OTHER_SCALES_CHECKED.add(ident)


def _check_added_keys(parts, cfg: dict, group_overrides: tuple[str, ...]) -> None:
    """A key added with ``+key=`` that the config of the run's groups lacks must be one its backend
    reads (:func:`arctl.compose.plugins.added_key_problem`): else the value would be carried to the
    job and change nothing, silently (``+verl.gpu_memory_utilisation=0.8``: a typo that Hydra's own
    message, "use +key=", invites)."""
    from omegaconf import OmegaConf

    base, known = _compose_groups(group_overrides), None
    for part, place in parts:
        for key in part.added:
            if OmegaConf.select(base, key, default=_ABSENT) is not _ABSENT:
                continue  # ++key= on a key the config has: an override like any other
            problem = plugins.added_key_problem(key, str(cfg.get("backend")))
            if problem:
                section = key.split(".", 1)[0]
                if section != cfg.get("backend"):
                    raise SpecError(f"override +{key}: {problem}", place,
                                    f"leave it out: only a run of a scale of the {section} backend reads it")
                known = known or _dotted_keys(OmegaConf.to_container(base, resolve=False))
                near = closest(key, [k for k in known if k.startswith(f"{section}.")])
                raise SpecError(f"override +{key}: {problem}", place,
                                "did you mean " + " or ".join(repr(k) for k in near) + "? (set it without +)" if near
                                else "`arctl show EXP` lists the keys a run has")


def resolve_init_from(run: ResolvedRun) -> ResolvedRun:
    """The run whose final weights ``run`` starts from (``trainer.init_from``: ``ARM`` of the same
    experiment or ``EXPERIMENT/ARM``), resolved as ``run`` was: the same seed, scale, sweep and
    overrides beside the spec. SpecError (one line) for a name that is not an arm, or an arm that
    starts from itself."""
    value = run.init_from
    where = f"{run.experiment}/{run.arm}: trainer.init_from"
    if value is None:
        raise SpecError("no trainer.init_from to resolve", where)
    experiment_name, _, arm = value.rpartition("/")
    experiment_name = experiment_name or run.experiment
    try:
        experiment = load_experiment(experiment_name)
    except SpecError as err:
        raise SpecError(f"trainer.init_from={value!r}: {err.what}", where, err.hint) from None
    if arm not in experiment.arms:
        raise SpecError(f"trainer.init_from={value!r}: experiment {experiment_name!r} has no arm {arm!r}", where,
                        did_you_mean(arm, experiment.arms) + " (write ARM or EXPERIMENT/ARM)")
    if (experiment_name, arm) == (run.experiment, run.arm):
        raise SpecError(f"trainer.init_from={value!r} is the run itself", where,
                        "name the arm whose final weights this arm starts from")
    # the overrides beside the spec carry over, but not what names this run's start: the run it starts
    # from is that run (an override naming it would make it start from itself)
    # the launched run was checked: what this one does not read, it is resolved without
    return resolve_as_launched(experiment, arm, run.seed, run.scale, _not_init(run.user_overrides),
                               _not_init(run.sweep_overrides), sweep=run.sweep)  # the run a launch of that arm makes


def resolve_as_launched(experiment: Experiment, arm: str, seed: int, scale: str | None,
                        user_overrides: list[str] | None = None, sweep_overrides: list[str] | None = None,
                        sweep: str | None = None, sweep_file: str | None = None) -> ResolvedRun:
    """One cell resolved as a launch that read it makes its run: without the overrides it reads nothing of
    (:func:`_as_read`), which that launch judged (a report composing a cell, the run an arm starts from)."""
    found: list[Unread] = []
    run = resolve_arm(experiment, arm, seed, scale, user_overrides, sweep_overrides, sweep=sweep,
                      sweep_file=sweep_file, unread=found)
    return _as_read(run, found[0], experiment, scale, sweep_file=sweep_file)


INIT_KEYS = ("trainer.init_from", "trainer.init_run")


def _not_init(overrides: list[str]) -> list[str]:
    return [o for o in overrides if override_key(o) not in INIT_KEYS]


def resolve_experiment(
    name: str,
    overrides: list[str] | None = None,
    scale: str | None = None,
    arms: list[str] | None = None,
    seeds: list[int] | None = None,
) -> list[ResolvedRun]:
    """Every (arm, seed) run of experiment ``name``, resolved and validated."""
    experiment = load_experiment(name)
    chosen = _choose_arms(experiment, arms)
    seeds = list(seeds) if seeds else experiment.seeds
    unread: list[Unread] = []
    planned = _Arms()
    runs = [planned.run(experiment, arm, seed, scale, overrides, unread=unread) for arm in chosen for seed in seeds]

    def others() -> list[Unread]:  # the arms --arm left out, one seed each (the keys they read)
        more: list[Unread] = []
        for arm in (a for a in experiment.arms if a not in chosen):
            try:
                resolve_arm(experiment, arm, seeds[0], scale, overrides, unread=more)
            except SpecError:
                continue  # an arm these overrides do not compose for: no run of it, nothing it reads
        return more

    _refuse_unread(unread, others if len(chosen) < len(experiment.arms) else None)
    return [_as_read(run, found, experiment, scale, arms=planned) for run, found in zip(runs, unread)]


def _choose_arms(experiment: Experiment, arms: list[str] | None) -> list[str]:
    if not arms:
        return list(experiment.arms)
    for arm in arms:
        if arm not in experiment.arms:
            raise SpecError(f"experiment {experiment.name!r} has no arm {arm!r}", "--arm", did_you_mean(arm, experiment.arms))
    return list(arms)


def resolve_sweep(
    name: str,
    overrides: list[str] | None = None,
    scale: str | None = None,
    seeds: list[int] | None = None,
    on_cell=None,
) -> list[ResolvedRun]:
    """Every cell of sweep ``name``: its experiments' arms x seeds x grid points. ``on_cell(done, total)``
    after each cell is composed (a sweep of hundreds of cells takes seconds: the CLI shows it)."""
    sweep = load_sweep(name)
    experiments = []
    for exp_name in sweep.experiments:
        try:
            experiments.append(load_experiment(exp_name))
        except SpecError as err:  # a name the sweep lists that is no experiment: the sweep's mistake; an
            # experiment's own (``arms: {}``) is said in its file, which the error names (from a hunt)
            raise (err if err.where else SpecError(err.what, f"{sweep.path}: experiments", err.hint)) from None
    points = sweep.grid_points()
    cells = [(experiment, point, arm, seed) for experiment in experiments for point in points
             for arm in experiment.arms for seed in (list(seeds) if seeds else (sweep.seeds or experiment.seeds))]
    runs = []
    unread: list[Unread] = []
    planned = _Arms()
    for experiment, point, arm, seed in cells:
        try:
            runs.append(planned.run(experiment, arm, seed, scale, overrides, sweep.overrides + point, sweep=name,
                                    sweep_file=str(sweep.path), unread=unread))
        except SpecError as err:
            raise _grid_problem(err, sweep, point, experiment, arm, seed, scale, overrides) from None
        if on_cell is not None:
            on_cell(len(runs), len(cells))
    _refuse_unread(unread)
    by_name = {experiment.name: experiment for experiment in experiments}
    return [_as_read(run, found, by_name[run.experiment], scale, sweep_file=str(sweep.path), arms=planned)
            for run, found in zip(runs, unread)]


def _grid_problem(err: SpecError, sweep, point: list[str], experiment: Experiment, arm: str, seed: int,
                  scale: str | None, overrides: list[str] | None) -> SpecError:
    """``err`` of a sweep's cell, said at the grid point that caused it where the cell composes without that point
    (or without one of its values) and ``err`` does not already name the sweep's file. From a hunt: ``grid: {algo:
    [grpo, anytime]}`` over an arm with a custom prior of four budgets was "experiments/my-lam.yaml: arms.ar-quad:
    thinking.probs has 4 probabilities but there are 1 budgets", naming neither the sweep nor ``algo=grpo``."""
    if not point or str(sweep.path) in (err.where or ""):
        return err

    def composes(texts: list[str]) -> bool:
        try:
            resolve_arm(experiment, arm, seed, scale, overrides, sweep.overrides + texts, sweep=sweep.name,
                        sweep_file=str(sweep.path), unread=[])
        except SpecError:
            return False
        return True

    if not composes([]):
        return err  # the cell fails without its grid point too: the error's own place
    culprits = [text for text in point if composes([t for t in point if t != text])] if len(point) > 1 else point
    shown = ", ".join(culprits or point)
    return SpecError(err.what, f"{sweep.path}: grid {shown} ({experiment.name}/{arm})",
                     (f"{err.hint}; " if err.hint else "") + f"{experiment.name}/{arm} composes without this grid "
                     "value: drop it from the grid, or the arm from the sweep")

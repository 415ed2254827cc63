"""An experiment spec (``experiments/<name>.yaml``): config-group choices, overrides and named arms.

Format::

    description: GRPO vs GRPO+BRPO ...        # one line, shown by `arctl ls`
    paper: Sec. 4.2.3, Figure 6               # where the paper reports it
    figure: ablation_vr                        # the report figure built from its runs
    groups: {model: r1-distill-qwen-1.5b}      # config-group choices for every arm
    overrides: [optim.clip_ratio_high=0.28]    # Hydra overrides for every arm
    scales: {paper: [...], tiny: [...]}        # overrides at one scale only
    seeds: [0]
    arms:                                      # arm name -> its Hydra overrides
      grpo: [algo=grpo, prior=base]
      grpo-vr: [algo=grpo-vr, prior=base]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from arctl.compose.errors import SpecError, did_you_mean
from arctl.compose.paths import find_spec, spec_files, spec_path_hint
from arctl.config import safe_yaml
from arctl.config.ranges import MAX_SEEDS, SEED_MAX

# a file name on every filesystem, with room; \Z, not $: with .match, $ also matched before a trailing "\n" (from a
# hunt: `arctl cp ablation-vr $'exp\n.yaml'` wrote that file, and `arctl run $'exp\n'` ran an experiment of that name)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}\Z")
EXPERIMENT_KEYS = {"description", "paper", "figure", "groups", "overrides", "scales", "seeds", "arms"}


@dataclass(frozen=True)
class Experiment:
    name: str
    path: Path
    arms: dict[str, list[str]]
    description: str = ""
    paper: str = ""
    figure: str | None = None
    groups: dict[str, str] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    scales: dict[str, list[str]] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0])


def read_yaml_file(path: Path, hint: str | Callable[[str], str] = "fix the file") -> object:
    """The document in a YAML file of the user's, read by the one bounded YAML reader (:mod:`arctl.config.safe_yaml`):
    a file that cannot be read, is not UTF-8 or is not YAML is one :class:`SpecError` naming it (``hint``: what to do
    about a YAML mistake, or how to find it from YAML's message)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"not UTF-8 text (byte {err.start})", str(path), "save the file as UTF-8") from None
    except OSError as err:
        raise SpecError(f"cannot read it ({err.strerror or type(err).__name__})", str(path)) from None
    try:
        return safe_yaml.load(text)
    except safe_yaml.YamlError as err:
        raise SpecError(str(err), str(path), hint if isinstance(hint, str) else hint(str(err))) from None


def read_yaml_mapping(path: Path, confined: bool = False) -> dict:
    """The mapping in a spec file, read by the one bounded YAML reader (:mod:`arctl.config.safe_yaml`).
    ``confined``: a spec file that is a link to a file outside its folder is refused (an error line
    would show part of a file that was never a spec; a linked folder is fine)."""
    path = Path(path)
    if confined and not path.resolve().is_relative_to(path.parent.resolve()):
        raise SpecError(f"links to {path.resolve()}, outside its folder {path.parent}", str(path),
                        "copy the file into the folder instead of linking it")
    data = read_yaml_file(path)
    if not isinstance(data, dict):
        raise SpecError("expected a mapping at the top level", str(path))
    return data


def _str_list(value, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float, bool)) for v in value):
        raise SpecError("expected a list of Hydra overrides like [key=value, group=option]", where)
    return [str(v) for v in value]


def parse_seeds(value, where: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= SEED_MAX for s in value)
    ):
        raise SpecError(f"seeds must be a non-empty list of non-negative integers (at most {SEED_MAX})", where)
    if len(value) > MAX_SEEDS:
        raise SpecError(f"{len(value)} seeds: at most {MAX_SEEDS} per launch", where)
    if len(set(value)) != len(value):
        raise SpecError(f"seeds repeat: {value}", where)
    return list(value)


def read_spec_file(kind: str, name: str, folder: str, allowed_keys: set[str]) -> tuple[Path, dict]:
    """Read ``<folder>/<name>.yaml`` (an experiment or sweep spec) from the spec search path
    (:mod:`arctl.compose.paths`): an unknown name gets the closest names, an unknown top-level key the
    closest allowed key. Names are names, never paths: ``[a-z0-9][a-z0-9._-]*``, looked up inside
    the spec folders only."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        if isinstance(name, str) and "/" not in name and (file := find_spec(folder, name)) is not None:
            raise SpecError(f"its file name {name!r} is not a valid {kind} name", str(file.path),
                            "rename it: lowercase letters, digits, '.', '_' and '-'")
        raise SpecError(
            f"{kind} name {name!r} is not a name",
            None,
            f"names are lowercase letters, digits, '.', '_' and '-', no paths (`arctl ls {kind}s` lists them)",
        )
    found = find_spec(folder, name)
    if found is None:
        raise SpecError(
            f"unknown {kind} {name!r}",
            None,
            did_you_mean(name, list(spec_files(folder))) + f" (`arctl ls {kind}s` lists them)" + spec_path_hint(),
        )
    path = found.path
    data = read_yaml_mapping(path, confined=True)
    unknown = set(data) - allowed_keys
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(f"unknown key {key!r}", str(path), did_you_mean(key, allowed_keys))
    return path, data


def yaml_kind(value) -> str:
    """What YAML read a name written without quotes as: "a boolean", "an integer", "a number"."""
    return {bool: "a boolean", int: "an integer", float: "a number", type(None): "null (no name)"}.get(
        type(value), f"a {type(value).__name__}")


def load_experiment(name: str) -> Experiment:
    """Read and check ``experiments/<name>.yaml``; unknown names get the closest suggestions."""
    path, data = read_spec_file("experiment", name, "experiments", EXPERIMENT_KEYS)
    arms_raw = data.get("arms")
    if not isinstance(arms_raw, dict) or not arms_raw:
        raise SpecError("an experiment needs a non-empty mapping 'arms: {name: [overrides...]}'", str(path))
    arms = {}
    for arm, overrides in arms_raw.items():
        if not isinstance(arm, str):  # true:, 1000:, 1e-3: YAML reads a key like that as a value
            raise SpecError(f"arm name {arm!r} is read by YAML as {yaml_kind(arm)}", f"{path}: arms",
                            "write the name in quotes, e.g. \"true\": [...]")
        if not NAME_RE.match(arm):
            raise SpecError(f"bad arm name {arm!r} (lowercase letters, digits, '-', '_', '.')", str(path))
        arms[arm] = _str_list(overrides, f"{path}: arms.{arm}")
    groups = data.get("groups") or {}
    if not isinstance(groups, dict):
        raise SpecError("'groups' must map a config group to an option, e.g. {model: tiny}", str(path))
    scales = data.get("scales") or {}
    if not isinstance(scales, dict):
        raise SpecError("'scales' must map a scale name to a list of overrides", str(path))
    figure = data.get("figure")
    if figure is not None and not (isinstance(figure, str) and NAME_RE.match(figure)):
        raise SpecError(f"figure {figure!r} is not a figure name", f"{path}: figure",
                        "name a figure spec of reports/ (`arctl ls figures`), or leave it out")
    for key in ("description", "paper"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise SpecError(f"{key} must be text", f"{path}: {key}")
    return Experiment(
        name=name,
        path=path,
        arms=arms,
        description=str(data.get("description") or ""),
        paper=str(data.get("paper") or ""),
        figure=figure,
        groups={str(k): str(v) for k, v in groups.items()},
        overrides=_str_list(data.get("overrides"), f"{path}: overrides"),
        scales={str(k): _str_list(v, f"{path}: scales.{k}") for k, v in scales.items()},
        seeds=parse_seeds(data.get("seeds", [0]), f"{path}: seeds"),
    )


def list_experiments() -> list[str]:
    return list(spec_files("experiments"))

"""The run config's schema (arctl/config/schema.py): one home for every key's type, default, range and
choices, registered in Hydra's ConfigStore and enforced while a config is composed."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path

import pytest
import yaml

from arctl.algo import settings as algo
from arctl.compose import SpecError, plugins, resolve_experiment
from arctl.compose.limits import list_ranges
from arctl.compose.paths import CONF_DIR, config_dirs
from arctl.compose.resolve import compose_config
from arctl.compose.validate import validate_config
from arctl.config import schema as schema_mod
from arctl.config.schema import field_choices, field_default, field_ranges
from arctl.launch.run_id import make_run_id

OPEN = {"scale", "tiny"}


RunConfig = plugins.run_config()  # the core sections and every backend's


def _typed_keys(cls: type = RunConfig, prefix: str = "") -> dict[str, dataclasses.Field]:
    return dict(schema_mod._walk(cls, prefix))


def _leaves(node, prefix=""):
    for k, v in node.items():
        if isinstance(v, dict) and prefix + k not in OPEN:
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield prefix + k


def _base() -> dict:
    return compose_config(["experiment=x", "arm=y"])


def test_the_composed_config_has_exactly_the_schemas_keys():
    """No YAML adds a typed key the schema lacks, and the schema has no key the config drops."""
    composed = set(_leaves(_base()))
    typed = {k for k in composed if k.split(".")[0] not in OPEN}
    assert typed == set(_typed_keys()) - OPEN
    assert OPEN <= composed


def test_the_algorithm_sections_are_the_algo_settings():
    """Every algorithm key is a field of its arctl/algo/settings.py class, with its default, range and
    choices there and nowhere else: the schema's field is built from it (lists for tuples), and a
    changed default, range or choice list reaches the composed config."""
    fields = _typed_keys()
    checked = 0
    for section, klass in [*algo.SECTIONS.values(), ("budget_control", algo.BudgetControl)]:
        for f in dataclasses.fields(klass):
            if f.metadata.get("section") is False:
                assert f"{section}.{f.name}" not in fields, f.name  # held by the object, not a config key
                continue
            declared = fields[f"{section}.{f.name}"]
            assert dict(declared.metadata) == dict(f.metadata), f.name
            if isinstance(declared.default, str) and declared.default.startswith("${"):
                continue  # the scale's value (thinking.budgets, summary.max_tokens)
            expected = list(f.default) if isinstance(f.default, tuple) else f.default
            assert field_default(declared) == expected, f.name
            checked += 1
    assert checked >= 20


def test_an_algorithm_default_is_written_once(monkeypatch):
    """Changing λ's default in arctl/algo/settings.py alone changes the composed config."""
    from arctl.config import schema

    lam = next(f for f in dataclasses.fields(algo.Thinking) if f.name == "lam")
    monkeypatch.setattr(lam, "default", 0.7)
    rebuilt = schema.from_settings("ThinkingConfig", algo.Thinking, defaults={"budgets": [1]})
    assert rebuilt().lam == 0.7


def test_every_numeric_key_has_a_range_and_every_list_of_numbers_an_item_range():
    hints = {}
    for klass in [RunConfig, *(f.default_factory for f in dataclasses.fields(RunConfig)
                               if dataclasses.is_dataclass(f.default_factory))]:
        hints[klass] = typing.get_type_hints(klass)
    for key, f in _typed_keys().items():
        owner = next(k for k in hints if f in dataclasses.fields(k))
        hint = hints[owner][f.name]
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
        kind = next(a for a in typing.get_args(hint) if a is not type(None)) if optional else hint
        if typing.get_origin(kind) is list and typing.get_args(kind)[0] in (int, float):
            assert key in list_ranges() or key.endswith(".probs"), key  # priors' probs: validate.check_prior
        elif kind in (int, float):
            assert key in field_ranges(RunConfig), key


@pytest.mark.parametrize("key", sorted(field_choices(RunConfig)))
def test_every_choice_list_is_enforced(key):
    cfg = resolve_experiment("main-ar-uniform", scale="tiny", seeds=[0])[0].config
    section, name = key.split(".")
    cfg[section][name] = "no-such-choice"
    with pytest.raises(SpecError, match=key):
        validate_config(cfg)


@pytest.mark.parametrize("override, key, expected", [
    ("cluster.mem_gb=abc", "cluster.mem_gb", "a number"),
    ("trainer.total_steps=1.5", "trainer.total_steps", "an integer"),
    ("thinking.budgets=[16,32.5]", "thinking.budgets[1]", "an integer"),
    ("summary.decoupled=maybe", "summary.decoupled", "true or false"),
    ("cluster.setup=abc", "cluster.setup", "a list"),
    ("optim.betas=[0.9,x]", "optim.betas[1]", "a number"),
])
def test_a_value_of_the_wrong_type_is_one_line_naming_the_key(override, key, expected):
    with pytest.raises(SpecError) as err:
        resolve_experiment("main-grpo", [override], scale="tiny", seeds=[0])
    text = str(err.value)
    assert key in text and expected in text and "\n" not in text


def test_an_integer_for_a_number_key_is_the_same_run_as_the_float():
    """Hydra types the value on the way in: thinking.lam=1 and thinking.lam=1.0 are one run."""
    as_int, as_float = (resolve_experiment("main-ar-uniform", [f"thinking.lam={v}"], scale="tiny", seeds=[0])[0]
                        for v in ("1", "1.0"))
    assert as_int.config["thinking"]["lam"] == 1.0 and isinstance(as_int.config["thinking"]["lam"], float)
    assert make_run_id(as_int.config) == make_run_id(as_float.config)


DEFAULT_ONLY_GROUPS = ("cluster", "eval", "model", "scale")


@pytest.mark.parametrize("path", sorted(p for d in config_dirs() for g in DEFAULT_ONLY_GROUPS for p in (d / g).glob("*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_group_options_set_only_what_differs_from_the_schema(path: Path):
    """A cluster profile, a model, a scale or an eval option that restated a default would be a second
    home for it (the algo and prior options state their defining values on purpose)."""
    data = yaml.safe_load(path.read_text()) or {}
    fields = _typed_keys()
    for key in _leaves(data):
        if key.split(".")[0] in OPEN or key not in fields:
            continue
        f = fields[key]
        default = field_default(f)
        value = _lookup(data, key)
        assert value != default or key == "cluster.executor", f"{path.name}: {key}={value!r} is the schema's default"


def _lookup(node, dotted):
    for part in dotted.split("."):
        node = node[part]
    return node


def test_the_verl_section_is_typed_and_open_only_to_additions():
    """verl's knobs: a typo is an unknown key, a bad layout is refused before any GPU job, and so is a
    key added with ``+verl.<key>`` (nothing reads it: a typo Hydra's "use +key=" invites, found only
    when the GPU run ignores it)."""
    with pytest.raises(SpecError, match="unknown config key 'verl.tree_attenton'.*verl.tree_attention"):
        resolve_experiment("main-grpo", ["verl.tree_attenton=dense"], scale="paper", seeds=[0])
    with pytest.raises(SpecError, match="verl.tree_attention='sparse' is not allowed"):
        resolve_experiment("main-grpo", ["verl.tree_attention=sparse"], scale="paper", seeds=[0])
    with pytest.raises(SpecError, match="verl.ray_start_args holds '1', which is not a `ray start` flag"):
        resolve_experiment("main-grpo", ["verl.ray_start_args=[1,2]"], scale="paper", seeds=[0])  # typed: '1', '2'
    with pytest.raises(SpecError, match="verl.gpu_memory_utilisation is no key of the verl section.*"
                                        "did you mean 'verl.gpu_memory_utilization'"):
        resolve_experiment("main-grpo", ["+verl.gpu_memory_utilisation=0.8"], scale="paper", seeds=[0])
    with pytest.raises(SpecError, match=r"tiny.threads is read by the tiny backend only.*backend is verl"):
        resolve_experiment("main-grpo", ["+tiny.threads=2"], scale="paper", seeds=[0])
    (run,) = resolve_experiment("main-grpo", ["++verl.tree_attention=dense"], scale="paper", seeds=[0])
    assert run.config["verl"]["tree_attention"] == "dense"
    # from a review: two values verl reads only on the cluster, once its workers start (GPU hours)
    with pytest.raises(SpecError, match="verl.resume_mode='autoo' is not allowed"):
        resolve_experiment("main-grpo", ["verl.resume_mode=autoo"], scale="paper", seeds=[0])
    # a second review: `disable` restarted verl at step 0 while arctl rewound W&B and pruned to the newest
    # checkpoint (the fresh attempt's checkpoints pruned as older), and each requeue restarted: refused
    with pytest.raises(SpecError, match="verl.resume_mode='disable' is not allowed"):
        resolve_experiment("main-grpo", ["verl.resume_mode=disable"], scale="paper", seeds=[0])
    with pytest.raises(SpecError, match="verl.rollout_name='vlm' is not allowed"):
        resolve_experiment("main-grpo", ["verl.rollout_name=vlm"], scale="paper", seeds=[0])


def test_think_end_in_a_packed_row_is_refused_past_one_branch():
    """E1's layout inserts nothing after a finished thinking; a packed verl row reads a token at the
    one before it, so only a tree's first branch may go without inserted tokens: Elastic's arm (one
    budget, one answer) packs, an AnytimeReasoner arm with think_end only as duplicated rows."""
    (elastic,) = resolve_experiment("baselines-elastic", scale="paper", seeds=[0])
    assert elastic.config["summary"]["inserted"] == "think_end" and elastic.config["verl"]["tree_attention"] == "flex"
    with pytest.raises(SpecError, match=r"summary.inserted=think_end with \d+ summary branches per thinking and "
                                        r"verl.tree_attention=flex"):
        resolve_experiment("main-ar-uniform", ["summary.inserted=think_end"], scale="paper", seeds=[0])
    (run,) = resolve_experiment("main-ar-uniform", ["summary.inserted=think_end", "verl.tree_attention=duplicate"],
                                scale="paper", seeds=[0])
    assert run.config["summary"]["inserted"] == "think_end"


@pytest.fixture
def site_profile(tmp_path, monkeypatch):
    """A copy of arctl/conf with a site cluster profile of the test's text (as a user writes one)."""
    import shutil

    from arctl.compose import resolve

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    monkeypatch.setattr(resolve, "CONF_DIR", conf)
    monkeypatch.setattr(resolve, "_BASE_CONFIGS", {})

    def write(text: str) -> None:
        (conf / "cluster" / "site.yaml").write_text("# @package _global_\ncluster:\n" + text)
        resolve._BASE_CONFIGS.clear()  # composed group choices are cached per choice set

    return write


def test_a_site_profile_is_checked_against_the_schema(site_profile):
    site_profile("  executor: slurm\n  partition: gpu\n")
    assert compose_config(["experiment=x", "arm=y", "cluster=site"])["cluster"]["partition"] == "gpu"
    site_profile("  executor: slurm\n  mem_gb: lots\n")
    with pytest.raises(SpecError, match="cluster.mem_gb=lots is invalid: expected a number"):
        compose_config(["experiment=x", "arm=y", "cluster=site"])
    site_profile("  executor: slurm\n  memory: 5\n")
    with pytest.raises(SpecError) as err:
        compose_config(["experiment=x", "arm=y", "cluster=site"])
    assert "unknown config key 'cluster.memory'" in str(err.value) and "cluster/site.yaml" in str(err.value)
    assert "cluster.mem_gb" in str(err.value)  # the closest key

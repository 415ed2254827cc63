"""A compared method from outside ``arctl/`` (``tests/plugins/fake_method``: ``halve``) registers
itself, is chosen by name, validated by its own rule and trained by both backends without a line of
``arctl/`` naming it: through the ``arctl.methods`` entry point of an installed package (the CLI, a
tiny micro run) and through :func:`register_method` in-process (both backends' objective, in
``tests/verl/test_objective_equivalence.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from method_registry import isolate_methods  # tests/support/method_registry.py
from micro import MICRO
from plugin_site import PLUGINS
from plugin_site import run_arctl as arctl
from wandb_reference import synced_history

from arctl.algo.methods import control as bc
from arctl.algo.methods import registry
from arctl.algo.settings import BudgetControl, control_methods


@pytest.fixture
def halve(monkeypatch):
    """The fake method registered in-process (and forgotten after the test)."""
    monkeypatch.syspath_prepend(str(PLUGINS / "fake_method"))
    isolate_methods(monkeypatch)
    import arctl_fake_method

    yield registry.register_method(arctl_fake_method.METHOD)
    sys.modules.pop("arctl_fake_method", None)


def test_the_registry_names_the_builtins_and_what_registers(halve):
    assert control_methods()[:3] == ("none", "thinkprune", "l1") and "halve" in control_methods()
    assert registry.get_method("halve") is halve and registry.get_method("l1").name == "l1"
    with pytest.raises(ValueError, match="already registered"):
        registry.register_method(type(halve)())
    with pytest.raises(ValueError, match="name must match"):
        bad = registry.ControlMethod()
        bad.name = "Bad Name"
        registry.register_method(bad)
    with pytest.raises(ValueError, match="unknown budget_control.method 'halv'; known: none, thinkprune, l1.*halve"):
        registry.get_method("halv")


def test_the_facade_dispatches_to_the_registered_method(halve):
    control = BudgetControl(method="halve")
    rows = ((1.0, 0.0), (1.0, 1.0))
    # budget 1 cut the trace (cut 4 < 6 thinking tokens), budget 2 saw it finished
    assert bc.shape_rewards(control, rows, [4, 6], [[1, 1], [1, 1]], 6, True) == ((0.5, 0.0), (1.0, 1.0))
    assert bc.shapes_rewards(control) and not bc.writes_target(control) and bc.step_limit(control, 1, 10) is None
    assert bc.question_target(control, "q", 64) is None and bc.eval_target_groups(control, [8, 16]) == [(None, [8, 16])]
    assert not bc.shapes_rewards(BudgetControl()) and bc.shape_rewards(BudgetControl(), rows, [4, 6], [[1, 1]] * 2, 6,
                                                                        True) == rows


def test_without_the_package_the_method_is_refused(tmp_path):
    out = arctl(None, "run", "ablation-vr", "--arm", "grpo", "budget_control.method=halve", "--dry-run", cwd=tmp_path)
    assert out.returncode == 2 and "budget_control.method='halve' is not allowed" in out.stderr


def test_an_installed_method_is_chosen_and_validated_by_its_own_rule(site, tmp_path):
    shown = arctl(site, "run", "ablation-vr", "--arm", "grpo", "budget_control.method=halve", "--dry-run", "--json",
                  "--workdir", str(tmp_path / "ws"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["runs"]
    assert run["action"] == "new"
    for override, message in {"budget_control.method=halv": "did you mean 'halve'",
                              "budget_control.forcing_extensions=1": "halve does not combine with budget forcing"}.items():
        out = arctl(site, "run", "ablation-vr", "--arm", "grpo", "budget_control.method=halve", override, "--dry-run",
                    cwd=tmp_path)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and message in lines[0], (override, out.stderr)


@pytest.mark.slow
def test_an_installed_method_trains_on_the_tiny_backend(site, tmp_path):
    ws = tmp_path / "ws"
    out = arctl(site, "run", "ablation-vr", "--arm", "grpo", "budget_control.method=halve",
                "budget_control.halve.factor=0.25", *MICRO,
                "--executor", "local", "--workdir", str(ws), "--json", cwd=tmp_path,
                env={"ARCTL_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)["submitted"]
    assert run["state"] == "COMPLETED", run
    frozen = yaml.safe_load((Path(run["run_dir"]) / "config.yaml").read_text())
    assert frozen["budget_control"]["halve"] == {"factor": 0.25}  # the job trained with the method's own key
    _, rows = synced_history(Path(run["run_dir"]))
    assert sorted({int(r["trainer/global_step"]) for r in rows if "trainer/global_step" in r}) == [0, 1, 2, 3]


def test_a_method_reads_its_own_settings_section(halve):
    """``budget_control.halve.factor``: the method's own key, read typed through ``options``; a config
    round-trips through ``to_config`` (what verl's agent loop receives)."""
    rows, cuts, lens = ((1.0, 1.0),), [4], [[1, 1]]
    default = BudgetControl.from_config({"budget_control": {"method": "halve"}})
    assert halve.options(default).factor == 0.5 and bc.shape_rewards(default, rows, cuts, lens, 6, True) == ((0.5, 0.5),)
    config = {"budget_control": {"method": "halve", "l1_alpha": 0.1, "halve": {"factor": 0.25}}}
    control = BudgetControl.from_config(config)
    assert control.own == (("factor", 0.25),) and halve.options(control).factor == 0.25
    assert bc.shape_rewards(control, rows, cuts, lens, 6, True) == ((0.25, 0.25),)
    assert control.to_config()["halve"] == {"factor": 0.25}
    assert BudgetControl.from_config({"budget_control": control.to_config()}) == control
    other = BudgetControl.from_config({"budget_control": {"method": "l1", "halve": {"factor": 0.25}}})
    assert other.own == () and "halve" not in other.to_config()  # another method's section is not this run's
    with pytest.raises(TypeError, match="declares no settings"):
        registry.get_method("l1").options(other)


def test_only_the_chosen_methods_section_is_part_of_a_runs_identity():
    from arctl.launch.run_id import config_hash

    l1 = {"experiment": "e", "arm": "a", "seed": 0, "budget_control": {"method": "l1", "l1_alpha": 0.0003}}
    with_plugin = {**l1, "budget_control": {**l1["budget_control"], "halve": {"factor": 0.5}}}
    assert config_hash(with_plugin) == config_hash(l1)  # installing a method's package renames no run
    halve = {**l1, "budget_control": {"method": "halve", "halve": {"factor": 0.5}}}
    assert config_hash(halve) != config_hash({**halve, "budget_control": {"method": "halve", "halve": {"factor": 0.25}}})
    # a backend package's section counts only for that backend's runs; the built-ins' always count
    tiny = {**l1, "backend": "tiny", "tiny": {"x": 1}, "verl": {"y": 2}}
    assert config_hash({**tiny, "fake": {"width": 4}}) == config_hash(tiny) != config_hash({**tiny, "verl": {"y": 3}})
    fake = {**tiny, "backend": "fake", "fake": {"width": 4}}
    assert config_hash(fake) != config_hash({**fake, "fake": {"width": 8}})


def _dry_run(site, tmp_path, *args: str):
    out = arctl(site, "run", *args, "--dry-run", "--json", "--workdir", str(tmp_path / "ws"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


def test_an_installed_methods_settings_are_composed_validated_and_named_in_the_run_id(site, tmp_path):
    base = ("ablation-vr", "--arm", "grpo", "budget_control.method=halve")
    (default,) = _dry_run(site, tmp_path, *base)
    (quarter,) = _dry_run(site, tmp_path, *base, "budget_control.halve.factor=0.25")
    assert default["run_id"] != quarter["run_id"]
    for override, message in {"budget_control.halve.factor=1.5": "budget_control.halve.factor",
                              "budget_control.halve.facter=0.3": "facter"}.items():
        out = arctl(site, "run", *base, override, "--dry-run", cwd=tmp_path)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and message in lines[0], (override, out.stderr)
    # the packages add budget_control.halve and the fake backend's section to every config; the runs of
    # other methods and backends keep their ids
    l1 = ("baselines-l1", "--seeds", "0")
    assert [r["run_id"] for r in _dry_run(site, tmp_path, *l1)] == [r["run_id"] for r in _dry_run(None, tmp_path, *l1)]

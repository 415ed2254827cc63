"""Plugins that cannot be used, installed beside the good ones (from a review of the extension points): each
is one line when it is chosen, and nothing when it is not (before, a hyphenated name or a broken plugin made
every command fail with a traceback, one malformed package hid every plugin, and two packages declaring one
name were chosen between by the order of the file system)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from method_registry import isolate_methods  # tests/support/method_registry.py
from plugin_site import make_site
from plugin_site import run_arctl as arctl

DRY = ("run", "ablation-vr", "--arm", "grpo", "--dry-run")


def _package(site: Path, dist: str, entry_points: str, modules: dict[str, str] | None = None) -> None:
    """A package as pip leaves one: ``dist``'s .dist-info with ``entry_points`` and its modules' sources."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for name, source in (modules or {}).items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


SETTINGS_METHOD = """\
    from dataclasses import dataclass
    from arctl.algo.methods.registry import ControlMethod

    @dataclass
    class Settings:
        factor: float = 0.5

    class M(ControlMethod):
        name = "{name}"
        settings = Settings

    METHOD = M()
"""


def _one_error(out, *needles: str) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), out.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def site(tmp_path, monkeypatch):
    for var in ("ARCTL_SPECS", "ARCTL_HOME", "ARCTL_TEST_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    return make_site(tmp_path / "site")  # the good plugins (fake backend, `halve`) are there too


def test_unusable_method_plugins_are_one_line_when_chosen_and_nothing_otherwise(site, tmp_path):
    _package(site, "hyphen-method", """\
        [arctl.methods]
        elastic-v2 = hyphen_method:METHOD
        """, {"hyphen_method": SETTINGS_METHOD.format(name="elastic-v2")})
    _package(site, "broken-method", """\
        [arctl.methods]
        broken = broken_method:METHOD
        """, {"broken_method": "import a_module_nobody_installed\n"})
    _package(site, "keyed-method", """\
        [arctl.methods]
        l1_mode = keyed_method:METHOD
        """, {"keyed_method": SETTINGS_METHOD.format(name="l1_mode")})
    _package(site, "second-halve", """\
        [arctl.methods]
        halve = second_halve:METHOD
        """, {"second_halve": SETTINGS_METHOD.format(name="halve")})
    _package(site, "shadow-l1", """\
        [arctl.methods]
        l1 = shadow_l1:METHOD
        """, {"shadow_l1": SETTINGS_METHOD.format(name="l1")})
    _package(site, "zzz-unrelated", """\
        [console_scripts]
        this line has no equals sign
        """)
    ok = arctl(site, *DRY, cwd=tmp_path)  # none of them chosen: the command works
    assert ok.returncode == 0, ok.stderr[-3000:]
    _one_error(arctl(site, *DRY, "budget_control.method=broken", cwd=tmp_path),
               "cannot load budget_control.method 'broken'", "ModuleNotFoundError", "budget_control.method")
    _one_error(arctl(site, *DRY, "budget_control.method=l1_mode", cwd=tmp_path), "the method needs another name")
    _one_error(arctl(site, *DRY, "budget_control.method=halve", cwd=tmp_path),
               "arctl-test-plugins", "second-halve", "uninstall one")  # which one is meant is not guessed
    _one_error(arctl(site, *DRY, "budget_control.method=l1", cwd=tmp_path), "shadow-l1", "built-in")
    _one_error(arctl(site, *DRY, "budget_control.method=elastic-v2", cwd=tmp_path), "budget_control.method")


def test_one_malformed_package_hides_no_plugin(site, tmp_path):
    _package(site, "aaa-unrelated", """\
        [console_scripts]
        this line has no equals sign
        """)
    out = arctl(site, *DRY, "budget_control.method=halve", "budget_control.halve.factor=0.25", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]


def test_unusable_backend_plugins_are_one_line_when_chosen(site, tmp_path):
    _package(site, "broken-backend", """\
        [arctl.backends]
        bb = broken_backend:BACKEND
        verl-megatron = broken_backend:BACKEND
        cluster = cluster_backend:BACKEND
        """, {"broken_backend": "import a_module_nobody_installed\n",
              "cluster_backend": "from arctl_fake_backend import BACKEND\n"})
    ok = arctl(site, *DRY, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-3000:]
    _one_error(arctl(site, *DRY, "backend=bb", cwd=tmp_path), "cannot load backend", "ModuleNotFoundError", "backend")
    _one_error(arctl(site, *DRY, "backend=cluster", cwd=tmp_path), "the run config's own section cluster")
    # a scale the broken backend would have brought: unknown, and why
    _one_error(arctl(site, "run", "ablation-vr", "--scale", "bbscale", "--dry-run", cwd=tmp_path),
               "unknown scale 'bbscale'", "cannot load backend 'broken_backend:BACKEND'")
    fake = arctl(site, "run", "ablation-vr", "--scale", "fake", "--dry-run", cwd=tmp_path)  # the good one still works
    assert fake.returncode == 0, fake.stderr[-3000:]


def test_a_backend_whose_hooks_fail_or_whose_scale_is_taken_is_unusable_and_leaves_other_runs_alone(site, tmp_path):
    """From a hunt of plugin paths: a settings_type that raised (or was no dataclass type) was a traceback in every
    command; a scale profile named `tiny` silently replaced the default scale, renaming every run."""
    _package(site, "hook-backends", """\
        [arctl.backends]
        raising = hook_backends:RAISING
        notype = hook_backends:NOTYPE
        aaa = hook_backends:SHADOW
        norange = hook_backends:NORANGE
        fine = hook_backends:FINE
        missing = hook_backends:MISSING
        """, {"hook_backends": """\
        from dataclasses import dataclass
        from pathlib import Path
        from arctl.backends.base import BackendDefaults
        from arctl.config.ranges import I
        from arctl.config.schema import setting

        class Trains(BackendDefaults):
            def train(self, config, run_dir, stop_event):
                return None

        class Raising(Trains):
            name = "raising"
            def settings_type(self):
                raise RuntimeError("settings_type exploded")

        class NoType(Trains):
            name = "notype"
            def settings_type(self):
                return {"width": 1}

        class Shadow(Trains):
            name = "aaa"
            def conf_dir(self):
                return Path(__file__).parent / "aaa_conf"

        @dataclass
        class Unranged:
            width: int = 4

        class NoRange(Trains):
            name = "norange"
            def settings_type(self):
                return Unranged

        @dataclass
        class Unset:  # a review: an interpolated number is fine (it was refused as "no int")
            width: int = setting(4, range=I(1, 9))
            n: int = setting("${rollout.n}", range=I(1, 1024))

        @dataclass
        class NoDefault:  # its section is in every config: without a default every run would miss its value
            width: int = setting(range=I(1, 9))

        class Missing(Trains):
            name = "missing"
            def settings_type(self):
                return NoDefault

        class Fine(Trains):
            name = "fine"
            def settings_type(self):
                return Unset

        RAISING, NOTYPE, SHADOW, NORANGE, FINE, MISSING = Raising(), NoType(), Shadow(), NoRange(), Fine(), Missing()
        """})
    (site / "aaa_conf" / "scale").mkdir(parents=True)
    (site / "aaa_conf" / "scale" / "tiny.yaml").write_text("# @package _global_\nbackend: aaa\n")
    plain = arctl(site, *DRY, "--json", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert {r["config"]["backend"] for r in json.loads(plain.stdout)["runs"]} == {"tiny"}
    _one_error(arctl(site, *DRY, "backend=raising", cwd=tmp_path), "RuntimeError: settings_type exploded")
    _one_error(arctl(site, *DRY, "backend=notype", cwd=tmp_path), "not a dataclass type or None")
    _one_error(arctl(site, *DRY, "backend=aaa", cwd=tmp_path), "its scale 'tiny' is the tiny backend's")
    # a number without a range took any value (norange.width=-1000000)
    _one_error(arctl(site, *DRY, "backend=norange", cwd=tmp_path), "norange.width declares no range")
    fine = arctl(site, "show", "ablation-vr", "--arm", "grpo", "backend=fine", "fine.width=5", "--json", cwd=tmp_path)
    assert fine.returncode == 0 and '"width": 5' in fine.stdout, fine.stderr[-3000:]
    _one_error(arctl(site, *DRY, "backend=missing", cwd=tmp_path), "missing.width has no default")


def test_a_registered_method_cannot_take_a_builtins_name_and_reaches_the_schema_after_it(monkeypatch):
    import sys

    from arctl.algo.methods import registry
    from arctl.compose import plugins
    from arctl.config.schema import field_ranges

    isolate_methods(monkeypatch)
    monkeypatch.setattr(registry, "_LOADED", {k: v for k, v in registry._LOADED.items() if k != "l1"})
    impostor = type("L1", (registry.ControlMethod,), {"name": "l1"})()
    with pytest.raises(ValueError, match="named 'l1' exists"):  # before the built-in was ever loaded
        registry.register_method(impostor)
    assert type(registry.get_method("l1")).__module__ == "arctl.algo.methods.l1"
    # an installed package that declares the built-in's name too: still a ValueError naming it (a KeyError before)
    monkeypatch.setattr(registry, "_LOADED", {k: v for k, v in registry._LOADED.items() if k != "l1"})
    monkeypatch.setattr(registry, "_scan", lambda group: ({"l1": ("shadow:METHOD", "shadow-l1")}, {}, ()))
    with pytest.raises(ValueError, match=r"named 'l1' exists \(arctl\.algo\.methods\.l1:METHOD\)"):
        registry.register_method(impostor)
    monkeypatch.undo()
    isolate_methods(monkeypatch)

    plugins.run_config()  # a composition before the method registers
    sys.path.insert(0, str(Path(__file__).parent / "fake_method"))
    try:
        import arctl_fake_method
    finally:
        sys.path.pop(0)
    registry.register_method(arctl_fake_method.METHOD)
    assert "budget_control.halve.factor" in field_ranges(plugins.run_config())


def test_a_method_registered_after_a_composition_is_composed_with_its_own_keys(monkeypatch):
    """A review of the test above: the schema was rebuilt, but Hydra's base configs cached per group choice
    were not, so `budget_control.halve.factor=` was refused ("unknown config key") after a first composition."""
    import sys

    from arctl.algo.methods import registry
    from arctl.compose import resolve_experiment

    resolve_experiment("main-grpo", seeds=[0])  # a composition before the method registers
    sys.path.insert(0, str(Path(__file__).parent / "fake_method"))
    try:
        import arctl_fake_method
    finally:
        sys.path.pop(0)
    isolate_methods(monkeypatch)
    registry.register_method(arctl_fake_method.METHOD)
    (run,) = resolve_experiment("main-grpo", ["budget_control.method=halve", "budget_control.halve.factor=0.25"],
                                seeds=[0])
    assert run.config["budget_control"]["halve"] == {"factor": 0.25}


def test_a_plugin_number_without_a_range_says_so(site, tmp_path):
    _package(site, "norange-method", """\
        [arctl.methods]
        norange = norange_method:METHOD
        """, {"norange_method": SETTINGS_METHOD.format(name="norange")})  # factor: float, no range declared
    _one_error(arctl(site, *DRY, "budget_control.method=norange", cwd=tmp_path),
               "budget_control.method 'norange' (norange_method:METHOD) cannot be used: budget_control.norange.factor "
               "declares no range")
    assert arctl(site, *DRY, cwd=tmp_path).returncode == 0  # a run of another method: untouched (a hunt: refused)


@pytest.mark.parametrize("field, says", [
    ("factor: float = field(metadata=checks(range=PROB))", "factor has no default"),
    ("factor: float = field(default=2.0, metadata=checks(range=PROB))", "factor's default 2.0 is outside its range"),
    ("factor: float = field(default='half', metadata=checks(range=PROB))", "factor's default 'half' is no float"),
    # a review: a text without a default, and a default outside its choices, still refused every run
    ("label: str = setting()", "label has no default"),
    ("mode: str = setting('zzz', choices=('a', 'b'))", "mode's default 'zzz' is not one of its choices: a, b"),
])
def test_a_method_whose_settings_cannot_be_keys_is_unusable_and_leaves_other_runs_alone(site, tmp_path, field, says):
    """From a hunt of plugin paths: each of these made every run of every method one error line."""
    _package(site, "bad-settings", """\
        [arctl.methods]
        bad = bad_settings:METHOD
        """, {"bad_settings": f"""\
        from dataclasses import dataclass, field
        from arctl.algo.methods.registry import ControlMethod
        from arctl.algo.ranges import PROB, checks
        from arctl.config.schema import setting

        @dataclass
        class Settings:
            {field}

        class M(ControlMethod):
            name = "bad"
            settings = Settings

        METHOD = M()
        """})
    assert arctl(site, *DRY, cwd=tmp_path).returncode == 0
    _one_error(arctl(site, *DRY, "budget_control.method=bad", cwd=tmp_path), f"budget_control.bad.{says}")


def test_a_plugin_list_setting_with_a_default_factory_keeps_its_default(site, tmp_path):
    """From a hunt: ``field(default_factory=lambda: [24, 48])``, the usual way to write a list default, lost its
    default in the schema: every run, of any method, was one "missing value" line."""
    _package(site, "listfac-method", """\
        [arctl.methods]
        listfac = listfac_method:METHOD
        """, {"listfac_method": """\
        from dataclasses import dataclass, field
        from arctl.algo.methods.registry import ControlMethod
        from arctl.algo.ranges import I

        @dataclass
        class Settings:
            targets: list[int] = field(default_factory=lambda: [24, 48], metadata={"items": I(1, 10**6)})

        class M(ControlMethod):
            name = "listfac"
            settings = Settings

        METHOD = M()
        """})
    plain = arctl(site, *DRY, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    chosen = arctl(site, "show", "ablation-vr", "--arm", "grpo", "budget_control.method=listfac", "--json", cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert '"targets": [\n' in chosen.stdout and "24" in chosen.stdout


def test_a_plugin_rule_that_raises_or_answers_nonsense_is_one_line(site, tmp_path):
    """From a hunt of plugin paths: a method's config_problem that raised (or returned a text) was a traceback."""
    _package(site, "rule-methods", """\
        [arctl.methods]
        cpraise = rule_methods:RAISES
        cpstr = rule_methods:TEXT
        """, {"rule_methods": """\
        from arctl.algo.methods.registry import ControlMethod

        class Raises(ControlMethod):
            name = "cpraise"
            def config_problem(self, control, max_budget, total_steps):
                raise KeyError("budgets")

        class Text(ControlMethod):
            name = "cpstr"
            def config_problem(self, control, max_budget, total_steps):
                return "a text, not a tuple"

        RAISES, TEXT = Raises(), Text()
        """})
    _one_error(arctl(site, *DRY, "budget_control.method=cpraise", cwd=tmp_path),
               "budget_control.method 'cpraise''s config_problem raised KeyError")
    _one_error(arctl(site, *DRY, "budget_control.method=cpstr", cwd=tmp_path),
               "budget_control.method 'cpstr''s config_problem answered 'a text, not a tuple'")

"""provenance.json records the plugins a run uses (its ``budget_control.method`` and its backend, from an
installed package), and a job that starts with another plugin code says so as it does for arctl's own code
(from a hunt: a run of the plugin method ``shortbonus`` recorded only arctl's code; after the plugin's v0.2.0
changed its shaping formula, the run was reused unnoticed, an edit of the plugin while its job was queued was
not caught by ``started_other_code``, and the claims report named one code for both versions)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from plugin_site import make_site

from arctl.algo.methods import registry
from arctl.backends import base
from arctl.launch import job, provenance
from arctl.launch.provenance import (
    code_hash,
    read_provenance,
    record_attempt,
    record_resume,
    same_code,
    started_other_code,
    write_provenance,
)
from arctl.launch.rundir import prepare_run_dir

RUN_ID = "e_a_s0_0123456789"
ARCTL = {"arctl_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False, "code_sha256": "1" * 64}


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """The fake plugins (tests/support/plugin_site.py: ``halve`` under arctl.methods, ``fake`` under
    arctl.backends, package arctl-test-plugins 0.1) installed on this process's path."""
    monkeypatch.delenv("ARCTL_TEST_BACKEND", raising=False)
    root = make_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    _forget(monkeypatch)
    yield root
    _forget(monkeypatch)


def _forget(monkeypatch) -> None:
    """The entry points as installed now (read once per process otherwise), and no plugin module imported."""
    registry._scan.cache_clear()
    provenance._distribution.cache_clear()
    monkeypatch.setattr(registry, "_LOADED", {})
    for name in ("arctl_fake_method", "arctl_fake_backend"):
        sys.modules.pop(name, None)


def _run_dir(root: Path, method: str = "halve", backend: str = "tiny") -> Path:
    config = {"experiment": "e", "arm": "a", "seed": 0, "backend": backend, "run_id": RUN_ID,
              "budget_control": {"method": method}, "trainer": {"total_steps": 2},
              "wandb": {"mode": "disabled", "id": RUN_ID}}
    return prepare_run_dir(root / "runs" / RUN_ID, config)


def test_a_run_records_the_package_version_and_code_of_its_plugin_method_and_backend(site, tmp_path):
    run_dir = _run_dir(tmp_path, backend="fake")
    info = write_provenance(run_dir, ARCTL)
    assert read_provenance(run_dir) == info and info["code_sha256"] == ARCTL["code_sha256"]
    assert info["plugins"] == [
        {"group": registry.ENTRY_POINT_GROUP, "name": "halve", "package": "arctl-test-plugins", "version": "0.1",
         "code_sha256": code_hash(site / "arctl_fake_method")},
        {"group": base.ENTRY_POINT_GROUP, "name": "fake", "package": "arctl-test-plugins", "version": "0.1",
         "code_sha256": code_hash(site / "arctl_fake_backend")}]
    assert len(info["plugins"][0]["code_sha256"]) == 64 != info["plugins"][1]["code_sha256"]
    # arctl's own method and backend are in arctl's code_sha256: no plugin
    assert write_provenance(_run_dir(tmp_path / "b", method="l1"), ARCTL)["plugins"] == []


def test_an_upgraded_plugin_is_recorded_with_its_version_and_told_apart_as_other_code(site, tmp_path, monkeypatch):
    run_dir = _run_dir(tmp_path)
    launched = write_provenance(run_dir, ARCTL)
    # v0.2 of the plugin changes its formula (arctl's own code unchanged)
    (site / "arctl_test_plugins-0.1.dist-info").rename(site / "arctl_test_plugins-0.2.dist-info")
    metadata = site / "arctl_test_plugins-0.2.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 0.1", "Version: 0.2"))
    module = site / "arctl_fake_method" / "__init__.py"
    module.write_text(module.read_text().replace("factor: float = field(default=0.5,", "factor: float = field(default=0.25,"))
    _forget(monkeypatch)
    resumed = record_resume(run_dir, ARCTL)["resumed"][-1]
    [plugin] = resumed["plugins"]
    assert plugin["version"] == "0.2" and plugin["code_sha256"] == code_hash(site / "arctl_fake_method")
    assert plugin["code_sha256"] != launched["plugins"][0]["code_sha256"]
    assert not same_code(launched, resumed) and same_code(launched, {**resumed, "plugins": launched["plugins"]})
    # a version that changed none of its code changes no code; a record from before plugins were recorded is
    # not judged on them
    assert same_code(resumed, {**resumed, "plugins": [{**plugin, "version": "0.3"}]})
    assert same_code(ARCTL, resumed) and not same_code({**launched, "plugins": []}, launched)


def test_a_job_that_starts_after_an_edit_of_its_plugin_says_it_ran_other_code(site, tmp_path, monkeypatch):
    """As for an edit of arctl (tests/launch/test_provenance_attempts.py): the launch records the plugin on disk
    at submission, the job the plugin it imports when it starts."""
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")
    monkeypatch.setattr(provenance, "git_state", lambda *a, **k: ("c" * 40, False))
    run_dir = _run_dir(tmp_path)
    launched = write_provenance(run_dir)
    assert [p["name"] for p in launched["plugins"]] == ["halve"]  # the count backend is arctl's
    module = site / "arctl_fake_method" / "__init__.py"
    module.write_text(module.read_text() + "\n# edited while the job waited\n")
    assert job.RunJob()(str(run_dir)) == "completed"
    prov = read_provenance(run_dir)
    [attempt] = prov["attempts"]
    assert attempt["code_sha256"] == launched["code_sha256"]  # arctl's own code did not change
    assert attempt["plugins"][0]["code_sha256"] == code_hash(site / "arctl_fake_method")
    assert attempt["plugins"][0]["code_sha256"] != launched["plugins"][0]["code_sha256"]
    assert started_other_code(prov) == [(prov, attempt)]
    # no edit: the next attempt of a resume is the resume's code
    record_resume(run_dir)
    record_attempt(run_dir, 2)
    assert [started["attempt"] for _, started in started_other_code(read_provenance(run_dir))] == [1]


def test_the_claims_report_names_the_plugin_code_each_run_ran():
    from arctl.report.claims_render import _run_version, other_code_warning

    plugin = {"group": "arctl.methods", "name": "halve", "package": "arctl-test-plugins", "version": "0.1",
              "code_sha256": "5" * 64}
    launched = {**ARCTL, "plugins": [plugin], "created_at": 1.0}
    assert _run_version(launched) == f"arctl 0.1.0 ({'a' * 12}) with halve arctl-test-plugins 0.1"
    edited = {**ARCTL, "plugins": [{**plugin, "code_sha256": "6" * 64}], "attempt": 1, "submission": 0, "at": 2.0}
    prov = {**launched, "attempts": [edited]}
    assert _run_version(prov).endswith(f", attempt 1 ran arctl 0.1.0 ({'a' * 12}) with halve arctl-test-plugins 0.1 "
                                       f"(code {'6' * 12})")
    upgraded = {**launched, "resumed": [{**ARCTL, "plugins": [{**plugin, "version": "0.2", "code_sha256": "7" * 64}],
                                         "at": 2.0}]}
    assert _run_version(upgraded).endswith(", resumed by arctl 0.1.0 (aaaaaaaaaaaa) with halve arctl-test-plugins 0.2")
    assert "with halve arctl-test-plugins 0.1 (code 666666666666)" in other_code_warning({"r": prov})


def test_a_completed_run_whose_plugin_was_upgraded_is_skipped_with_a_word_of_it(specs, site, tmp_path, monkeypatch):
    """From a hunt: a plugin's version is not part of a run id, so after an upgrade that changed a method's formula
    the plan said "skip ... completed" and nothing suggested `--force`. The skip now names what changed: the
    package's version, or its code under the same version; a run whose plugins are as they were says nothing."""
    from arctl.compose import resolve_sweep
    from arctl.launch.launcher import items_from_resolved, launch, plan
    from arctl.launch.provenance import plugins_changed
    from arctl.launch.workspace import Workspace

    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")  # (the site fixture leaves the counting job out)

    def items():
        return items_from_resolved(resolve_sweep("lt3", ["budget_control.method=halve"]))

    ws = Workspace(tmp_path / "ws")
    result = launch(items(), ws, executor="debug", members=["lt3"])
    assert len(result.submitted) == 3 and not result.failed
    reasons = {i.run_id: (i.action, i.reason) for i in plan(items(), ws)}
    assert set(reasons.values()) == {("skip", "completed")}
    module = site / "arctl_fake_method" / "__init__.py"
    module.write_text(module.read_text() + "\n# a fix of the formula, same version\n")
    _forget(monkeypatch)
    for action, reason in (reasons := {i.run_id: (i.action, i.reason) for i in plan(items(), ws)}).values():
        assert action == "skip" and reason == ("completed; the code of its method 'halve' (arctl-test-plugins 0.1) "
                                               "changed since it ran: --force retrains it with the code installed now")
    (site / "arctl_test_plugins-0.1.dist-info").rename(site / "arctl_test_plugins-0.2.dist-info")
    metadata = site / "arctl_test_plugins-0.2.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 0.1", "Version: 0.2"))
    _forget(monkeypatch)
    run_id, (action, reason) = next(iter({i.run_id: (i.action, i.reason) for i in plan(items(), ws)}.items()))
    assert action == "skip" and "its method 'halve' ran arctl-test-plugins 0.1 and is arctl-test-plugins 0.2 now" in reason
    # a run from before plugins were recorded, and a config with no plugin: nothing to say
    assert plugins_changed({**ARCTL}, {"budget_control": {"method": "halve"}}) is None
    assert plugins_changed({**ARCTL, "plugins": []}, {"budget_control": {"method": "l1"}, "backend": "tiny"}) is None


def test_a_skip_line_names_only_the_plugin_whose_code_changed(site, tmp_path, monkeypatch):
    """A completed run of the plugin method ``halve`` on the plugin backend ``fake`` (one package, one version),
    whose backend alone was edited since: the skip line names the backend, not the method (from a hunt: it said
    "the code of its method 'halve' ... changed since it ran" too, of a method exactly as it ran, which sends the
    user looking for a change never made)."""
    from arctl.launch.provenance import plugins_changed
    from arctl.launch.rundir import read_run_config

    run_dir = _run_dir(tmp_path, backend="fake")
    write_provenance(run_dir, ARCTL)
    assert plugins_changed(read_provenance(run_dir), read_run_config(run_dir)) is None  # nothing changed yet
    module = site / "arctl_fake_backend" / "__init__.py"
    module.write_text(module.read_text() + "\n# a fix of the backend only, same version\n")
    _forget(monkeypatch)
    said = plugins_changed(read_provenance(run_dir), read_run_config(run_dir))
    assert said == "the code of its backend 'fake' (arctl-test-plugins 0.1) changed since it ran", said


def test_a_skip_line_names_a_plugin_no_longer_installed(site, tmp_path, monkeypatch):
    """A completed run whose plugin method is no longer installed (its entry point gone; the backend, of the same
    package, as it ran): the skip line names the method as not installed, and no change of the backend (before:
    "the code of its backend 'fake' ... changed since it ran", of the plugin that had not changed, and not a word of
    the one gone)."""
    from arctl.launch.provenance import plugins_changed
    from arctl.launch.rundir import read_run_config

    run_dir = _run_dir(tmp_path, backend="fake")
    write_provenance(run_dir, ARCTL)
    points = next(site.glob("*.dist-info")) / "entry_points.txt"
    points.write_text(points.read_text().replace("halve = arctl_fake_method:METHOD\n", ""))
    _forget(monkeypatch)
    said = plugins_changed(read_provenance(run_dir), read_run_config(run_dir))
    assert said == "its method 'halve' (arctl-test-plugins 0.1) is not installed now", said

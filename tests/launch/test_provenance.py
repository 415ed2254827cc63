"""provenance.json across resumes, and how the claims report names a run's code."""

from __future__ import annotations

from arctl.launch.provenance import read_provenance, record_resume, write_provenance
from arctl.report.claims_render import _run_version

A = {"arctl_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False}
B = {"arctl_version": "0.1.0", "git_commit": "b" * 40, "git_dirty": True}
INSTALLED = {"arctl_version": "0.1.0", "git_commit": None, "git_dirty": None}  # no checkout


def test_a_resume_under_other_code_is_recorded_and_shown_beside_the_launch(tmp_path):
    """Found by resuming a workspace of an older arctl: its provenance named only the launching commit."""
    write_provenance(tmp_path, A)
    record_resume(tmp_path, A)
    assert _run_version(read_provenance(tmp_path)) == "arctl 0.1.0 (aaaaaaaaaaaa)"  # same code: said once
    record_resume(tmp_path, B)
    prov = read_provenance(tmp_path)
    assert [r["git_commit"] for r in prov["resumed"]] == ["a" * 40, "b" * 40] and prov["git_commit"] == "a" * 40
    assert prov["resumed"][1]["at"] >= prov["resumed"][0]["at"] >= prov["created_at"]
    assert _run_version(prov) == "arctl 0.1.0 (aaaaaaaaaaaa), resumed by arctl 0.1.0 (bbbbbbbbbbbb-dirty)"


def test_every_change_of_code_is_named_in_order_even_back_and_to_an_installed_copy(tmp_path):
    write_provenance(tmp_path, A)
    for version in (B, A, INSTALLED):
        record_resume(tmp_path, version)
    assert _run_version(read_provenance(tmp_path)) == (
        "arctl 0.1.0 (aaaaaaaaaaaa), resumed by arctl 0.1.0 (bbbbbbbbbbbb-dirty), "
        "resumed by arctl 0.1.0 (aaaaaaaaaaaa), resumed by arctl 0.1.0")


def test_a_run_from_before_provenance_then_resumed(tmp_path):
    record_resume(tmp_path, B)
    assert _run_version(read_provenance(tmp_path)) == "unknown, resumed by arctl 0.1.0 (bbbbbbbbbbbb-dirty)"
    assert _run_version({}) == "unknown"

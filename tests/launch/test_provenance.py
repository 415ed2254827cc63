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


def test_the_code_hash_tells_apart_runs_of_one_commit_whose_code_differed(tmp_path):
    """From a hunt: an uncommitted edit (lr x 1.01) gave other numbers under the same run id, and provenance.json
    was identical but for created_at (same commit, git_dirty: true). The hash of arctl's code tells them apart;
    bytecode caches and other files do not move it."""
    import shutil

    import arctl
    from arctl.launch.provenance import code_hash, code_version

    src = tmp_path / "a" / "arctl"
    shutil.copytree(next(iter(arctl.__path__)), src, ignore=shutil.ignore_patterns("__pycache__", "shipped"))
    before = code_hash(src)
    assert code_hash(src) == before and len(before) == 64
    (src / "__pycache__").mkdir(exist_ok=True)
    (src / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    (src / "notes.txt").write_text("not code")
    assert code_hash(src) == before
    trainer = src / "backends" / "tiny" / "trainer.py"
    trainer.write_text(trainer.read_text().replace("set_lr(optimizer, run.lr,", "set_lr(optimizer, run.lr * 1.01,", 1))
    assert "run.lr * 1.01" in trainer.read_text()
    assert code_hash(src) != before
    (tmp_path / "run").mkdir()
    info = write_provenance(tmp_path / "run", code_version())
    assert info["code_sha256"] == code_hash() == read_provenance(tmp_path / "run")["code_sha256"]
    dirty = {"arctl_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": True, "code_sha256": "c" * 64}
    assert _run_version(dirty) == f"arctl 0.1.0 ({'a' * 12}-dirty, code {'c' * 12})"
    assert _run_version({**dirty, "git_dirty": False}) == f"arctl 0.1.0 ({'a' * 12})"  # the commit says the code
    other = {**dirty, "code_sha256": "d" * 64}
    assert _run_version({**dirty, "resumed": [{**other, "at": 1.0}]}).endswith(f"code {'d' * 12})")


def test_a_run_names_the_spec_files_it_was_composed_from(specs, tmp_path, cli):
    """From a hunt: with ARCTL_SPECS pointing at the wrong folder, the shipped spec of a name trained in place of the
    user's copy, and nothing the run kept told which file it was composed from. provenance.json names each: kind,
    name, where on the search path (origin), path and the sha256 of the bytes read."""
    import hashlib
    import json

    from arctl.compose.paths import ORIGIN_ENV

    ws = tmp_path / "ws"
    cli("sweep", "lt3", "--executor", "debug", "--workdir", str(ws), check=True)
    files = {"experiment": specs / "experiments" / "lt.yaml", "sweep": specs / "sweeps" / "lt3.yaml"}
    provs = [json.loads(p.read_text()) for p in sorted((ws / "runs").glob("*/provenance.json"))]
    assert provs
    for prov in provs:
        assert prov["specs"] == [{"kind": kind, "name": path.stem, "origin": ORIGIN_ENV, "path": str(path.resolve()),
                                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
                                 for kind, path in files.items()], prov["specs"]

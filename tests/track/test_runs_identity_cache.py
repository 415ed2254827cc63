"""The cache of runs' config.yaml (``<cache>/configs/``): a read of one experiment looks at every run of the
workspace (which are its runs, or serve one of its cells), and parsed every other run's config.yaml again at each
read (from a hunt: a report of 100 runs in a workspace of 5,000 took 70 s, 27 of 33 s in the YAML parser). Now a
config.yaml is parsed once while it stays as it was; a rewritten one (the same size, another mtime), or one of a
copy of the workspace, is read again. Real offline W&B runs written by arctl.track.writer.open_run."""

from __future__ import annotations

import os
import shutil

import pytest
from wandb_workspace import _write_run, run_id

from arctl.config import safe_yaml
from arctl.track.runs import cache as runs_cache
from arctl.track.runs import load_runs

STEPS = [0, 1, 2]
MINE = [("main-grpo", "grpo", 0), ("main-grpo", "grpo", 1)]
OTHER = ("ablation-vr", "grpo-vr", 0)  # "ablation-vr" and "'main-grpo'": the same length


@pytest.fixture
def ws(tmp_path):
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    for cell in [*MINE, OTHER]:
        _write_run(tmp_path / "ws", *cell, STEPS)
    return tmp_path / "ws"


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The texts the YAML parser is given, in order."""
    texts: list[str] = []
    real = safe_yaml.load

    def counted(text, *args, **kwargs):
        texts.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(safe_yaml, "load", counted)
    return texts


def _parsed(texts: list[str], cell) -> int:
    return sum(f"run_id: {run_id(*cell)}\n" in t for t in texts)


def _read(ws, cache, **kw):
    return load_runs(ws, cache_dir=cache, progress=False, processes=1, experiments=["main-grpo"], **kw)


def _rewrite_as_mine(ws, keep_mtime: bool = False) -> None:
    """OTHER's config.yaml made a run of main-grpo, in place, at the same size: a new mtime, or (``keep_mtime``)
    the old one, as a copy that keeps times has."""
    cfg = ws / "runs" / run_id(*OTHER) / "config.yaml"
    before = cfg.stat()
    text = cfg.read_text()
    new = text.replace("experiment: ablation-vr\n", "experiment: 'main-grpo'\n")
    assert new != text and len(new) == len(text)
    cfg.write_text(new)
    mtime = before.st_mtime_ns if keep_mtime else before.st_mtime_ns + 1_000_000_000
    os.utime(cfg, ns=(before.st_atime_ns, mtime))
    assert cfg.stat().st_size == before.st_size


def test_a_run_of_another_experiment_is_parsed_once_and_read_again_when_its_config_changes(ws, tmp_path, parses,
                                                                                         monkeypatch):
    monkeypatch.setattr(runs_cache, "RECENT_NS", 0)  # the files were written just now (the test below: kept out)
    cache = tmp_path / "cache"
    for _ in range(3):
        out = _read(ws, cache)
        assert set(out.runs["run_id"]) == {run_id(*c) for c in MINE}
    assert _parsed(parses, OTHER) <= 1, "the other experiment's config.yaml parsed at every read"
    _rewrite_as_mine(ws)  # the same size: only its mtime (and ctime) tell
    out = _read(ws, cache)
    assert dict(zip(out.runs["run_id"], out.runs["experiment"]))[run_id(*OTHER)] == "main-grpo"
    # with a serves() too (a report's read): the config it is asked about is the file's as it is now
    asked: list[str] = []
    out = _read(ws, cache, serves=lambda config: asked.append(config["experiment"]) or [])
    assert set(asked) == {"main-grpo"} and len(out.runs) == 3


def test_a_copy_of_the_workspace_is_not_read_from_the_cache_of_the_original(ws, tmp_path, parses, monkeypatch):
    monkeypatch.setattr(runs_cache, "RECENT_NS", 0)
    cache = tmp_path / "cache"  # one cache for both (a --cache-dir, a user cache)
    assert run_id(*OTHER) not in set(_read(ws, cache).runs["run_id"])
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)  # sizes and mtimes kept
    _rewrite_as_mine(copy, keep_mtime=True)
    assert run_id(*OTHER) in set(_read(copy, cache).runs["run_id"])


def test_a_config_yaml_changed_just_now_is_not_cached(ws, tmp_path, parses, monkeypatch):
    """Rewritten in place within one tick of the kernel's coarse clock, a file keeps its size, mtime and ctime:
    a key taken then cannot tell the next content from this one. "Just now" is RECENT_NS, here an hour: the
    fixture's W&B runs took over RECENT_NS's 2 s under load (the -n 2 suite beside busy loops), and the
    config.yaml written first was cached."""
    monkeypatch.setattr(runs_cache, "RECENT_NS", 3600 * 10**9)
    cache = tmp_path / "cache"
    _read(ws, cache)
    _read(ws, cache)
    assert _parsed(parses, OTHER) == 2
    assert not (cache / runs_cache.CONFIGS).is_dir() or not any((cache / runs_cache.CONFIGS).iterdir())


def test_an_export_of_one_experiment_reads_the_others_from_the_workspace_cache_and_writes_none(ws, tmp_path, parses,
                                                                                               monkeypatch):
    from arctl.report.export import export_runs

    monkeypatch.setattr(runs_cache, "RECENT_NS", 0)
    load_runs(ws, progress=False, processes=1, experiments=["main-grpo"])  # a report: caches into the workspace
    cached = sorted(p.name for p in (ws / ".arctl-cache" / "runs" / runs_cache.CONFIGS).iterdir())
    parses.clear()
    res = export_runs(ws, tmp_path / "out", ["main-grpo"], unfinished=True)
    assert {r.run_id for r in res.runs} == {run_id(*c) for c in MINE}
    assert _parsed(parses, OTHER) == 0 and all(_parsed(parses, c) == 0 for c in MINE)
    assert sorted(p.name for p in (ws / ".arctl-cache" / "runs" / runs_cache.CONFIGS).iterdir()) == cached

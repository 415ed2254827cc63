"""How many worker processes read the runs (arctl.track.runs.pool): the CPUs this process may run on, not
the host's, and no more than the available memory holds (from a hunt of large workspaces: a cold `arctl report`
took ~1.8 GB a worker on runs of 10,000 steps, one worker per host core, under `taskset -c 0` too)."""

from __future__ import annotations

import concurrent.futures
import os

import pytest

from arctl.track.runs import pool


class _Recorded(concurrent.futures.ThreadPoolExecutor):
    """A ProcessPoolExecutor stand-in (threads: nothing forked) that records the workers asked for."""

    asked: list[int] = []
    methods: list[str] = []

    def __init__(self, max_workers=None, mp_context=None):
        type(self).asked.append(max_workers)
        type(self).methods.append(mp_context.get_start_method())
        super().__init__(max_workers=max_workers)


@pytest.fixture
def machine(monkeypatch):
    """An 8-core host; the CPUs this process may use and the memory available set by the test."""
    _Recorded.asked, _Recorded.methods = [], []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _Recorded)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    state = {"cpus": set(range(8)), "gb": 64.0}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: state["cpus"], raising=False)
    monkeypatch.setattr(pool, "available_memory_gb", lambda: state["gb"], raising=False)
    return state


def _files(tmp_path, mib: int, n: int = 6) -> list:
    """``n`` files of ``mib`` MiB each (sparse: nothing written)."""
    out = []
    for i in range(n):
        p = tmp_path / f"run-{i}.wandb"
        with open(p, "wb") as f:
            f.truncate(mib * 2**20)
        out.append(p)
    return out


def _run(files, processes=None):
    return pool._run_parallel(os.path.basename, [(str(p),) for p in files], processes, False, "reading runs",
                              prefetch=files)


def test_the_workers_are_as_many_as_the_cpus_this_process_may_run_on(machine, tmp_path):
    files = _files(tmp_path, 1)
    machine["cpus"] = {0, 1, 2}  # taskset -c 0-2 on an 8-core host
    assert _run(files) == [p.name for p in files]
    assert _Recorded.asked == [3]
    machine["cpus"] = {0}  # taskset -c 0: read in this process, no worker at all
    assert _run(files) == [p.name for p in files]
    assert _Recorded.asked == [3]


def test_where_the_os_has_no_affinity_mask_the_host_cores_count(machine, monkeypatch):
    machine["cpus"] = set()  # never below one
    assert pool.usable_cpus() == 1
    monkeypatch.delattr(os, "sched_getaffinity")  # macOS
    assert pool.usable_cpus() == 8


def test_the_available_memory_caps_the_workers_and_a_note_says_so(machine, tmp_path, capsys):
    """100 MiB files take ~1 GiB a worker (10x): 2.5 GiB available holds two of them, not the 6 the cores
    would start (one a job); asked for explicitly, the same (the memory is not there either way)."""
    files = _files(tmp_path, 100)
    machine["gb"] = 2.5
    assert _run(files) == [p.name for p in files]
    assert _Recorded.asked == [2]
    note = capsys.readouterr().err
    assert "note" in note and "2 process(es), not 6" in note and "2.5 GB of memory is available" in note, note
    assert "10 x the largest file to read, 100 MB" in note and len(note.strip().splitlines()) == 1, note
    _run(files, processes=4)
    assert _Recorded.asked == [2, 2] and "not 4" in capsys.readouterr().err
    machine["gb"] = 0.5  # less than one worker's: still one (this process), and said
    assert _run(files) == [p.name for p in files] and _Recorded.asked == [2, 2]
    assert "1 process(es), not 6" in capsys.readouterr().err


def test_without_a_cap_nothing_is_said(machine, tmp_path, capsys):
    files = _files(tmp_path, 100)
    _run(files)  # 64 GiB holds the six
    machine["gb"] = 0.0  # unknown: the cores decide
    _run(files)
    _run(files, processes=1)  # one asked: this process reads
    assert _Recorded.asked == [6, 6] and capsys.readouterr().err == ""
    assert pool.pool_size(None, 6, [tmp_path / "gone.wandb"]) == (6, None)  # nothing readable to size by


@pytest.mark.parametrize("platform, method", [("linux", "fork"), ("darwin", "spawn")])
def test_workers_are_forked_on_linux_only(machine, tmp_path, monkeypatch, platform, method):
    """macOS offers fork, but its system libraries are not fork-safe (Python's default there is spawn, from a
    hunt of a Mac laptop): the readers are spawned there."""
    import sys

    monkeypatch.setattr(sys, "platform", platform)
    assert _run(_files(tmp_path, 1)) == [f"run-{i}.wandb" for i in range(6)]
    assert _Recorded.methods == [method]

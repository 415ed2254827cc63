"""Reading the runs when worker processes cannot be made (arctl.track.runs.pool): a full or read-only /dev/shm
(where multiprocessing's locks live: ENOSPC, EROFS) or too few file descriptors (EMFILE at a fork) made the first
`arctl report` after runs end die with a 70-line traceback (from a hunt: an 8 KB /dev/shm, `ulimit -n 12`). This
process reads them instead, the same runs, and one note says why."""

from __future__ import annotations

import errno
import multiprocessing.context
import os
import sys

import numpy as np
import pytest

from arctl.track.runs import RunReadWarning, load_runs, pool

EXPERIMENTS = ["main-ar-uniform", "ablation-vr"]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _name_and_fds(path: str) -> tuple[str, int]:
    """A job: the file's name, and how many file descriptors this process holds while it runs."""
    return os.path.basename(path), _open_fds()


def _history(runs):
    key = ["run_id", "metric", "step"]
    return runs.history.astype({"run_id": str, "metric": str}).sort_values(key).reset_index(drop=True)


def test_a_full_dev_shm_reads_the_same_runs_in_this_process_with_a_note(workspace, tmp_path, monkeypatch, capsys):
    with pytest.warns(RunReadWarning) as told_serial:  # a run of ablation-vr has no exit record
        serial = load_runs(workspace, cache_dir=tmp_path / "serial", progress=False, processes=1,
                           experiments=EXPERIMENTS)
    capsys.readouterr()

    def no_room(self, *a, **kw):  # what SemLock raises on a full /dev/shm when the pool makes its queues' locks
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(multiprocessing.context.BaseContext, "Lock", no_room)
    with pytest.warns(RunReadWarning) as told:
        read = load_runs(workspace, cache_dir=tmp_path / "full-shm", progress=False, processes=2,
                         experiments=EXPERIMENTS)
    assert [str(w.message) for w in told] == [str(w.message) for w in told_serial]
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "note: reading with 1 process: cannot make worker processes ([Errno 28] No space left on device; the "
        "pool's locks live in /dev/shm)"], err
    assert "Traceback" not in err
    a, b = _history(serial), _history(read)
    assert len(a) > 0 and a[["run_id", "metric", "step"]].equals(b[["run_id", "metric", "step"]])
    np.testing.assert_array_equal(a["value"], b["value"])
    assert sorted(serial.runs["run_id"].astype(str)) == sorted(read.runs["run_id"].astype(str))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the workers are forked on Linux only")
def test_a_fork_that_fails_midway_ends_the_workers_started_and_reads_here(tmp_path, monkeypatch, capsys):
    """``ulimit -n 12``: the first worker forks, the second finds no file descriptor for its pipe. The first is
    ended (it would wait on the pool's queue for ever, and the interpreter waits for it at exit), the half-made
    pool's pipes are closed before the jobs run (they need the descriptors: `ulimit -n 12` still failed with them
    held), and this process runs every job, once each."""
    real = multiprocessing.context.ForkProcess._Popen
    started = []

    def popen(process_obj):
        if started:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        started.append(process_obj)
        return real(process_obj)

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "_Popen", staticmethod(popen))
    files = [str(tmp_path / f"run-{i}.wandb") for i in range(4)]
    before = _open_fds()
    done = pool._run_parallel(_name_and_fds, [(f,) for f in files], 3, False, "reading runs")
    assert [name for name, _ in done] == [f"run-{i}.wandb" for i in range(4)]
    assert max(fds for _, fds in done) <= before, (before, done)
    assert len(started) == 1 and started[0]._closed  # ended, joined and closed
    assert capsys.readouterr().err.strip() == ("note: reading with 1 process: cannot make worker processes "
                                               "([Errno 24] Too many open files)")


def test_an_error_of_a_job_itself_is_not_taken_for_one_of_the_pool(tmp_path, monkeypatch):
    """Only the making of the workers falls back: a job's own OSError (a run's file unreadable) still reaches the
    caller, as before, and is not read a second time here."""
    with pytest.raises(FileNotFoundError):
        pool._run_parallel(os.stat, [(str(tmp_path / "gone-1"),), (str(tmp_path / "gone-2"),)], 2, False, "reading runs")

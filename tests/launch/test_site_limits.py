"""The site's limit on a job array's size, read from ``scontrol show config``: MaxArraySize bounds the task index
(0 to MaxArraySize-1) and ``SchedulerParameters=max_array_tasks=N`` the number of tasks, which slurm.conf(5)
lets be lower. From a hunt: with MaxArraySize=1001 and max_array_tasks=4, a sweep of 6 runs went out as one
array of 6, which sbatch refused ("Invalid job array specification"), instead of being split."""

from __future__ import annotations

import re

import pytest
import slurm_shims  # tests/support/slurm_shims.py

from arctl.launch import launcher
from arctl.launch.executors import array_chunk_size, render_sbatch, site_max_array_size
from arctl.launch.workspace import Workspace


def _config(max_array_size: str | None = "1001", scheduler: str | None = None) -> str:
    """`scontrol show config` as SLURM prints it (its key column padded to 24), around the lines that matter."""
    lines = ["Configuration data as of 2026-12-05T10:00:00", "AccountingStorageBackupHost = (null)",
             "MaxArraySize            = " + max_array_size if max_array_size is not None else None,
             "MaxJobCount             = 10000", "MaxStepCount            = 40000",
             "SchedulerParameters     = " + scheduler if scheduler is not None else None,
             "SchedulerTimeSlice      = 30 sec", "SchedulerType           = sched/backfill"]
    return "\n".join(line for line in lines if line is not None) + "\n"


def _site_says(text: str, tmp_path, monkeypatch) -> None:
    """A shim scontrol that prints ``text`` for `scontrol show config` (the conftest forgets the cached answer)."""
    (tmp_path / "config").write_text(text)
    slurm_shims.use(tmp_path / "bin", monkeypatch, scontrol=f"[ \"$*\" = 'show config' ] && cat {tmp_path / 'config'}\n")


@pytest.mark.parametrize("text, limit", [
    (_config("1001"), 1001),  # indices 0-1000: 1001 tasks
    (_config("1001", "bf_continue,max_array_tasks=4,default_queue_depth=200"), 4),
    (_config("1001", "max_array_tasks=4,bf_continue"), 4),  # the first option
    (_config("1001", "bf_continue,bf_max_job_test=500,max_array_tasks=4"), 4),  # the last option
    (_config("3", "bf_continue,max_array_tasks=100"), 3),  # the index bound is the lower: indices 0-2
    (_config("1001", "bf_continue,default_queue_depth=200"), 1001),  # no max_array_tasks: MaxArraySize alone
    (_config("1001", "(null)"), 1001),
    (_config(None, "bf_continue,max_array_tasks=4"), 4),
    (_config("1001", "bf_continue,bf_max_array_tasks=2"), 1001),  # another option's name ending the same
    (_config(None), None),
    ("", None),
], ids=["index", "tasks-middle", "tasks-first", "tasks-last", "index-lower", "no-tasks", "null-params",
        "tasks-only", "other-option", "neither", "empty"])
def test_the_site_array_limit_is_the_smaller_of_max_array_size_and_max_array_tasks(text, limit, tmp_path,
                                                                                     monkeypatch):
    _site_says(text, tmp_path, monkeypatch)
    assert site_max_array_size() == limit


def test_an_array_is_chunked_by_the_sites_max_array_tasks(tmp_path, monkeypatch):
    """The controller is asked (a shim scontrol printing its configuration), and arrays hold at most 4 tasks."""
    _site_says(_config("1001", "bf_continue,max_array_tasks=4,default_queue_depth=200"), tmp_path, monkeypatch)
    assert site_max_array_size() == 4
    assert array_chunk_size({"max_array_size": 1000}) == 4
    assert array_chunk_size({"max_array_size": 3}) == 3  # the cluster's own setting, lower still
    assert array_chunk_size({"max_array_size": 1000}, ask_site=False) == 1000  # a preview does not ask


def test_a_sweep_of_six_runs_goes_out_as_arrays_the_site_accepts(specs, tmp_path, monkeypatch):
    """6 runs of one sbatch setting (lt3's 3 arms x 2 seeds) where max_array_tasks=4: arrays of 4 and 2, as
    submitted (sbatch stubbed: ``_submit_chunk``), every array's indices within 0-3."""
    from arctl.compose import resolve_sweep

    _site_says(_config("1001", "bf_continue,max_array_tasks=4,default_queue_depth=200"), tmp_path, monkeypatch)
    items = launcher.items_from_resolved(resolve_sweep("lt3", [], seeds=[0, 1]))
    assert len(items) == 6
    sizes = []

    def fake(params, chunk, workspace, job_ids):
        sizes.append(len(chunk))
        for i, item in enumerate(chunk):
            job_ids[item.run_id] = f"{100 + len(sizes)}_{i}"

    monkeypatch.setattr(launcher, "_submit_chunk", fake)
    launcher._submit_slurm(items, Workspace(tmp_path / "ws"), None, {})
    assert sizes == [4, 2]
    assert not (tmp_path / "bin" / "unexpected.log").exists()  # scontrol alone was asked
    arrays, _ = launcher.slurm_arrays(items, None)
    scripts = [render_sbatch(params, tmp_path, len(chunk)) for params, chunk in arrays]
    assert [re.search(r"^#SBATCH --array=(\S+)$", s, re.M).group(1).split("%")[0] for s in scripts] == ["0-3", "0-1"]

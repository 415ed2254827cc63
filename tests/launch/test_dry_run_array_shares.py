"""The --dry-run preview of a SLURM launch split over several arrays shows what the launch submits: each
array's share of cluster.array_parallelism (``%p``) and, with more arrays than that bound, the slot each
waits for. From a hunt: a sweep of 1,040 runs previewed ``--array=0-999%64`` and ``--array=0-39%40``
(104 at once) where ``%61`` and ``%3`` were submitted. No sbatch is run: ``_submit_chunk`` is stubbed."""

from __future__ import annotations

import re

import pytest

from arctl.launch import launcher
from arctl.launch.workspace import Workspace


def _items(max_array_size: int):
    from arctl.compose import resolve_sweep

    # lt3: experiment lt's 3 arms; 4 seeds -> 12 runs of one sbatch setting, chunked by max_array_size
    return launcher.items_from_resolved(resolve_sweep("lt3", [f"cluster.max_array_size={max_array_size}"],
                                                      seeds=[0, 1, 2, 3]))


def _submitted(items, ws, parallelism, monkeypatch) -> list[tuple[int, int, str | None]]:
    """(tasks, %p, dependency) of each array ``_submit_slurm`` submits, with sbatch stubbed: array k's job id
    is 100+k."""
    seen = []

    def fake(params, chunk, workspace, job_ids):
        seen.append((len(chunk), int(params["array_parallelism"]),
                     params.get("additional_parameters", {}).get("dependency")))
        for i, item in enumerate(chunk):
            job_ids[item.run_id] = f"{100 + len(seen) - 1}_{i}"

    monkeypatch.setattr(launcher, "_submit_chunk", fake)
    launcher._submit_slurm(items, ws, parallelism, {})
    return seen


def _previewed(items, ws, parallelism) -> list[tuple[int, int, str | None]]:
    """(tasks, %p, dependency) of each array script the dry run shows."""
    out = []
    for _title, script in launcher.dry_run_scripts(items, ws, "slurm", parallelism):
        array = re.search(r"^#SBATCH --array=0-(\d+)%(\d+)$", script, re.M)
        dep = re.search(r"^#SBATCH --dependency=(\S+)$", script, re.M)
        out.append((int(array.group(1)) + 1, int(array.group(2)), dep.group(1) if dep else None))
    return out


@pytest.mark.parametrize("max_array_size, parallelism", [(5, 4), (2, 4)])
def test_the_dry_run_shows_each_array_with_the_share_and_slot_it_is_submitted_with(specs, tmp_path, monkeypatch,
                                                                                    max_array_size, parallelism):
    from arctl.launch import executors

    monkeypatch.setattr(executors, "site_max_array_size", lambda: None)  # the controller is not asked
    ws = Workspace(tmp_path / "ws")
    items = _items(max_array_size)
    preview = _previewed(items, ws, parallelism)
    submitted = _submitted(items, ws, parallelism, monkeypatch)
    assert [(n, p) for n, p, _ in preview] == [(n, p) for n, p, _ in submitted]
    # never more tasks at once in all than the bound
    assert sum(p for n, p, dep in preview if dep is None) <= parallelism
    # the slot each array waits for: the same array in both (the preview names it by a placeholder)
    assert [dep and "afterany:" for _, _, dep in preview] == [dep and "afterany:" for _, _, dep in submitted]
    for k, (_, _, dep) in enumerate(submitted):
        if dep is not None:
            assert dep == f"afterany:{100 + k - parallelism}"
    if max_array_size == 2:  # 6 arrays, 4 at once: the last two wait for the first two
        assert [dep for _, _, dep in preview] == [None] * 4 + ["afterany:SLOT_JOB"] * 2
        titles = [t for t, _ in launcher.dry_run_scripts(items, ws, "slurm", parallelism)]
        assert "starts once array 1 has ended" in titles[4] and "starts once array 2 has ended" in titles[5]
    else:  # 5 + 5 + 2 runs share 4: 2 + 1 + 1
        assert [p for _, p, _ in preview] == [2, 1, 1]


def test_one_array_keeps_the_whole_bound(specs, tmp_path):
    ws = Workspace(tmp_path / "ws")
    scripts = launcher.dry_run_scripts(_items(1000), ws, "slurm", 4)
    assert len(scripts) == 1 and "#SBATCH --array=0-11%4" in scripts[0][1] and "array 1 of" not in scripts[0][0]

"""The local executor counts the cores this process may run on (its affinity mask: ``taskset``, a SLURM step's
cpuset), not the host's: under `taskset -c 0` on a 2-core host it ran two runs side by side on one core (from a
hunt of large workspaces)."""

from __future__ import annotations

import os

from arctl.launch.executors import local_cores, local_parallelism


def test_the_local_executor_counts_the_cores_of_its_affinity_mask(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)  # taskset -c 0
    monkeypatch.setattr("arctl.launch.executors.available_memory_gb", lambda: 0.0)  # unknown: the cores decide
    assert local_cores() == 1
    one = {"cpus_per_task": 1, "array_parallelism": 64}
    assert local_parallelism(one, 3) == 1
    assert local_parallelism({**one, "cpus_per_task": 2}, 3) == 1
    assert local_parallelism(one, 3, requested=2) == 2  # --array-parallelism is what the user asked
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert local_cores() == 2 and local_parallelism(one, 3) == 2


def test_without_an_affinity_mask_the_host_cores_count(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS
    assert local_cores() == 4
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # undeterminable: one
    assert local_cores() == 1

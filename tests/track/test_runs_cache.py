"""The parquet cache of parsed runs (arctl.track.runs.cache): one version of a run read whole while
another process rewrites it, and the old versions' files removed once no reader can hold them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from arctl.track.runs import cache as runs_cache
from arctl.track.runs.tidy import _assemble


def _wide(values: dict[str, list[float]], steps: list[int]):
    wide = pd.DataFrame(values, index=pd.Index(steps, name="trainer/global_step"))
    return wide, ~np.isnan(wide.to_numpy(dtype=float))


def _meta(run_id="exp_arm_s0_abc"):
    return {"version": runs_cache.CACHE_VERSION, "run_id": run_id, "experiment": "exp", "arm": "arm", "seed": 0,
            "state": "finished", "n_steps": 0, "last_step": None, "n_fragments": 1, "wandb_ids": ["w"],
            "signature": [["f", 1]], "warnings": []}


def _read(meta, cache):
    h = _assemble([meta], cache, None).history
    return {(str(m), int(s)): v for m, s, v in zip(h["metric"], h["step"], h["value"])}


def test_a_report_holding_the_old_sidecar_reads_the_old_version_whole(tmp_path):
    """From a review: a rewrite replaced the group files one by one under the same names, so a report
    that had read the old sidecar (another process) read the new files with the old group index: other
    values, or a column the index names missing. Now a rewrite writes a new generation beside the old."""
    old = runs_cache._write_cache(*_wide({"loss": [1.0, 2.0], "acc": [0.1, np.nan]}, [0, 1]), _meta(), tmp_path)
    before = _read(old, tmp_path)
    assert before == {("loss", 0): 1.0, ("loss", 1): 2.0, ("acc", 0): 0.1}
    new = runs_cache._write_cache(*_wide({"loss": [5.0, 6.0, 7.0], "acc": [0.5, 0.6, 0.7]}, [0, 1, 2]), _meta(),
                                  tmp_path)
    assert _read(old, tmp_path) == before  # the old version, whole
    assert new["generation"] != old["generation"]
    assert _read(new, tmp_path)[("loss", 2)] == 7.0
    assert runs_cache._cached_meta(tmp_path, "exp_arm_s0_abc", [["f", 1]])["generation"] == new["generation"]


def test_other_generations_are_removed_once_stale(tmp_path, monkeypatch):
    first = runs_cache._write_cache(*_wide({"loss": [1.0]}, [0]), _meta(), tmp_path)
    (tmp_path / "exp_arm_s0_abc.g0.parquet").write_bytes(b"x")  # the layout before generations
    (tmp_path / "exp_arm_s0_abc_2.0123456789ab.g0.parquet").write_bytes(b"x")  # another run's
    runs_cache._write_cache(*_wide({"loss": [2.0]}, [0]), _meta(), tmp_path)
    assert len(list(tmp_path.glob("exp_arm_s0_abc.*.parquet"))) == 3  # not stale yet: a reader may hold them
    monkeypatch.setattr(runs_cache, "STALE_GENERATION_S", 0.0)
    last = runs_cache._write_cache(*_wide({"loss": [3.0]}, [0]), _meta(), tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == sorted(
        [f"exp_arm_s0_abc.{last['generation']}.g0.parquet", "exp_arm_s0_abc_2.0123456789ab.g0.parquet"])
    assert first["generation"] not in str(sorted(tmp_path.iterdir()))
    with pytest.raises(FileNotFoundError):
        _read(first, tmp_path)

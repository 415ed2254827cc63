"""load_runs on a workspace of real offline runs: identity, values, stitching, damage, cache."""

import os

import numpy as np
import pytest
from wandb_workspace import (
    COV,
    LAST_STEP,
    NO_CONFIG_YAML,
    RESUMED,
    RUNS,
    TRUNCATED,
    acc,
    final_acc,
    run_id,
)

from arctl.track.runs import RunReadWarning, discover_runs, load_runs
from arctl.track.runs import load as runs_load
from arctl.track.runs import pool as runs_pool
from arctl.track.wandbfile.reader import NO_EXIT_RECORD, TAIL_CUT


@pytest.fixture(scope="module")
def all_runs(workspace, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with pytest.warns(RunReadWarning) as seen:
        runs = load_runs(workspace, cache_dir=cache, progress=True, processes=2)  # + the progress bar
    said = [str(w.message) for w in seen]
    # the run cut in its second block has no exit record: said as unfinished, its cut last record not as damage
    assert any(s.endswith(NO_EXIT_RECORD) and run_id(*TRUNCATED) in s for s in said), said
    assert not any(s.endswith(TAIL_CUT) for s in said), said
    return runs, cache


def test_discovers_every_run_once(workspace):
    sources = discover_runs(workspace)
    assert len(sources) == len(RUNS) + 2  # + truncated + variance diagnostics
    resumed = next(s for s in sources if s.run_id == run_id(*RESUMED))
    assert len(resumed.files) == 2  # two fragments, latest-run symlinks not counted twice


def test_runs_table_identity_and_config(all_runs):
    runs, _ = all_runs
    table = runs.runs.set_index("run_id")
    for exp, arm, seed in [*RUNS, TRUNCATED, COV]:
        row = table.loc[run_id(exp, arm, seed)]
        assert (row["experiment"], row["arm"], row["seed"]) == (exp, arm, seed)
    # no config.yaml: identity from the config stored in the .wandb file
    assert table.loc[run_id(*NO_CONFIG_YAML), "config.thinking.lam"] == 0.5
    assert table.loc[run_id(*RESUMED), "n_fragments"] == 2
    assert table.loc[run_id(*TRUNCATED), "state"] == "incomplete"
    assert table.loc[run_id("main-grpo", "grpo", 0), "state"] == "finished"


def test_history_is_tidy_and_exact(all_runs):
    h = all_runs[0].history
    assert list(h.columns) == ["run_id", "arm", "experiment", "seed", "step", "metric", "value"]
    sel = h[(h["run_id"] == run_id("main-ar-linear", "ar-linear", 0)) & (h["metric"] == "eval/math500/acc@3000")]
    assert sel["step"].tolist() == [LAST_STEP]
    assert sel["value"].iloc[0] == pytest.approx(acc("ar-linear", 0, "math500", 3000, LAST_STEP))
    assert not h["metric"].astype(str).str.startswith("_").any()
    assert not (h["metric"] == "trainer/global_step").any()


def test_resumed_fragments_are_stitched_later_fragment_wins(all_runs):
    h = all_runs[0].history
    exp, arm, seed = RESUMED
    sel = h[(h["run_id"] == run_id(*RESUMED)) & (h["metric"] == "train/score@2000")]
    assert sel["step"].tolist() == list(range(LAST_STEP + 1))
    np.testing.assert_allclose(sel["value"], [acc(arm, seed, "aime24", 2000, s) for s in range(LAST_STEP + 1)])
    ev = h[(h["run_id"] == run_id(*RESUMED)) & (h["metric"] == "eval/aime24/final_acc")]
    assert ev["step"].tolist() == [0, 10, 20]
    np.testing.assert_allclose(ev["value"], [final_acc(arm, seed, "aime24", s) for s in (0, 10, 20)])


def test_metric_globs_and_experiment_filter(workspace, all_runs):
    _, cache = all_runs
    runs = load_runs(workspace, cache_dir=cache, experiments=["main-grpo"], metrics=["eval/*/final_acc"],
                     progress=False)
    assert set(runs.history["experiment"]) == {"main-grpo"}
    assert set(runs.history["metric"]) == {f"eval/{d}/final_acc" for d in ("aime24", "amc22", "math500")}
    assert sorted(runs.runs["seed"]) == [0, 1]


def test_cache_is_reused_and_refreshed_on_change(workspace, all_runs, monkeypatch, tmp_path):
    _, cache = all_runs
    calls = []
    real = runs_load.ingest_offline
    monkeypatch.setattr(runs_load, "ingest_offline", lambda *a: calls.append(a[0].run_id) or real(*a))
    load_runs(workspace, cache_dir=cache, progress=False, processes=1, experiments=["ablation-dense"])
    assert calls == []  # everything came from the parquet cache
    target = discover_runs(workspace)[0]
    st = target.files[0].stat()
    os.utime(target.files[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    try:
        load_runs(workspace, cache_dir=cache, progress=False, processes=1)
    finally:
        os.utime(target.files[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    assert calls == [target.run_id]


def test_parallel_and_serial_reads_agree(workspace, all_runs, tmp_path):
    serial = load_runs(workspace, cache_dir=tmp_path, progress=False, processes=1,
                       experiments=["main-ar-uniform", "ablation-vr"])
    par = all_runs[0].history
    par = par[par["experiment"].isin(["main-ar-uniform", "ablation-vr"])]
    key = ["run_id", "metric", "step"]
    a = serial.history.astype({"run_id": str, "metric": str}).sort_values(key).reset_index(drop=True)
    b = par.astype({"run_id": str, "metric": str}).sort_values(key).reset_index(drop=True)
    np.testing.assert_array_equal(a["value"], b["value"])
    assert a[key].equals(b[key])


def test_workspace_without_runs_dir_is_searched_for_wandb_files(workspace, tmp_path):
    loose = discover_runs(workspace / "runs" / run_id("ctx-16k", "grpo", 0))
    assert len(loose) == 1 and loose[0].config_path is None
    runs = load_runs(workspace / "runs" / run_id("ctx-16k", "grpo", 0), cache_dir=tmp_path, progress=False)
    assert runs.runs["experiment"].tolist() == ["ctx-16k"] and runs.runs["arm"].tolist() == ["grpo"]


@pytest.mark.parametrize("metrics", [None, ["eval/*/acc@*"], ["eval/*/final_acc", "train/loss"]])
def test_last_only_is_the_last_row_of_every_run_and_metric(all_runs, workspace, metrics):
    import pandas as pd

    _, cache = all_runs
    with pytest.warns(RunReadWarning):
        full = load_runs(workspace, cache_dir=cache, progress=False, metrics=metrics).history
    with pytest.warns(RunReadWarning):
        last = load_runs(workspace, cache_dir=cache, progress=False, metrics=metrics, last_only=True).history
    expected = full.drop_duplicates(subset=["run_id", "metric"], keep="last").reset_index(drop=True)
    assert len(last) < len(full)
    pd.testing.assert_frame_equal(last, expected)
    # the resumed run's final values come from its later fragment
    sel = last[(last["run_id"] == run_id(*RESUMED)) & (last["metric"] == "eval/aime24/final_acc")]
    if metrics != ["eval/*/acc@*"]:
        assert sel["step"].tolist() == [LAST_STEP]
        assert sel["value"].iloc[0] == pytest.approx(final_acc(RESUMED[1], RESUMED[2], "aime24", LAST_STEP))


@pytest.mark.skipif(not hasattr(os, "POSIX_FADV_WILLNEED"), reason="no posix_fadvise here")
def test_prefetch_advises_every_file_in_order(tmp_path, monkeypatch):
    import threading

    paths = []
    for i in range(3):
        p = tmp_path / f"run-{i}.wandb"
        p.write_bytes(b"x" * (i + 1))
        paths.append(p)
    seen = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: seen.append((os.fstat(fd).st_size, advice)),
                        raising=False)
    runs_pool._prefetch([*paths, tmp_path / "missing.wandb"])
    for t in threading.enumerate():
        if t.name == "arctl-prefetch":
            t.join(10)
    assert seen == [(1, os.POSIX_FADV_WILLNEED), (2, os.POSIX_FADV_WILLNEED), (3, os.POSIX_FADV_WILLNEED)]


def _one_run_workspace(workspace, tmp_path):
    import shutil

    source = next(s for s in discover_runs(workspace) if s.config_path is not None)
    run_dir = source.config_path.parent
    copy = tmp_path / "ws" / run_dir.relative_to(workspace)
    shutil.copytree(run_dir, copy, symlinks=True)
    return tmp_path / "ws", source.run_id


def test_a_run_that_changes_while_it_is_read_is_read_again(workspace, tmp_path, monkeypatch):
    """Found by a review: the cache was stamped with the files' state taken after parsing them, so a
    live run's file completed between the read and the stamp kept its half-read cache for good."""
    from arctl.track import wandbfile

    ws, rid = _one_run_workspace(workspace, tmp_path)
    calls = []
    real_ingest, real_read = runs_load.ingest_offline, wandbfile.read_wandb_file
    monkeypatch.setattr(runs_load, "ingest_offline", lambda *a: calls.append(a[0].run_id) or real_ingest(*a))

    def read_then_the_run_writes(path, **kw):
        data = real_read(path, **kw)
        st = os.stat(path)  # the job appends after the reader has parsed the file
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        return data

    monkeypatch.setattr(wandbfile, "read_wandb_file", read_then_the_run_writes)
    load_runs(ws, cache_dir=tmp_path / "c", progress=False, processes=1)
    monkeypatch.setattr(wandbfile, "read_wandb_file", real_read)
    load_runs(ws, cache_dir=tmp_path / "c", progress=False, processes=1)
    assert calls == [rid, rid]  # the second read saw the change (was: the stale cache, once and for all)
    load_runs(ws, cache_dir=tmp_path / "c", progress=False, processes=1)
    assert calls == [rid, rid]  # and then the cache serves


def test_a_config_replaced_with_the_same_size_and_time_is_read_again(workspace, tmp_path):
    """Found by a review: the cache's signature (path, size, mtime) served the old config of a config.yaml
    replaced by rename with its size and mtime kept (cp -p, tar, a filesystem with 1-s timestamps)."""
    ws, rid = _one_run_workspace(workspace, tmp_path)
    first = load_runs(ws, cache_dir=tmp_path / "c", progress=False, processes=1)
    seed = int(first.runs["seed"].iloc[0])
    config = next(ws.rglob("config.yaml"))
    text = config.read_text()
    assert f"seed: {seed}\n" in text
    other = (seed + 7) % 10
    new = config.with_name("config.yaml.new")
    new.write_text(text.replace(f"seed: {seed}\n", f"seed: {other}\n", 1))
    st = config.stat()
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, config)
    assert config.stat().st_size == st.st_size and config.stat().st_mtime_ns == st.st_mtime_ns
    again = load_runs(ws, cache_dir=tmp_path / "c", progress=False, processes=1)
    assert int(again.runs["seed"].iloc[0]) == other


def test_a_run_that_logged_nan_reads_nan_there_with_a_warning(tmp_path):
    """Found by a review: the reader took a logged NaN for "not logged", so a run whose loss diverged
    showed its last finite loss (reports, ``last_only``) and nothing said so. Now the NaN is a value,
    an infinity is kept as before, and a run that logged either in a metric read is one warning line; a NaN of
    the diagnostics (a correlation of a constant column) means "undefined" and is not warned about."""
    import math
    import warnings

    import wandb
    from wandb_workspace import _write_run

    nan, inf = float("nan"), float("inf")
    _write_run(tmp_path / "ws", "main-grpo", "grpo", 0, [0, 1, 2], final=False, extra_rows=[
        {"trainer/global_step": 3, "train/loss": nan, "eval/aime24/corr_v1@2000": nan, "train/grad_norm": inf},
        {"trainer/global_step": 4, "train/loss": nan, "train/grad_norm": 2.0}])
    wandb.teardown()
    rid = run_id("main-grpo", "grpo", 0)
    for attempt in ("parsed", "cached"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            runs = load_runs(tmp_path / "ws", cache_dir=tmp_path / "c", progress=False, processes=1)
            last = load_runs(tmp_path / "ws", cache_dir=tmp_path / "c", progress=False, last_only=True)
        said = sorted({str(w.message) for w in seen if issubclass(w.category, RunReadWarning)})
        # one line a run, of the metrics read: last_only reads grad_norm's finite last value, not its +inf
        assert said == [f"run {rid} logged +inf/NaN from step 3 in train/grad_norm and 1 other metric(s) read "
                        "(a mean over runs leaves those values out)",
                        f"run {rid} logged NaN from step 3 in train/loss (a mean over runs leaves those values out)"
                        ], attempt
        h = runs.history
        loss = h[h["metric"] == "train/loss"]
        assert loss["step"].tolist() == [0, 1, 2, 3, 4]
        assert loss["value"].tolist()[:3] == [1.0, 0.5, 1.0 / 3] and all(map(math.isnan, loss["value"].tolist()[3:]))
        corr = h[h["metric"] == "eval/aime24/corr_v1@2000"]
        assert corr["step"].tolist() == [3] and math.isnan(corr["value"].iloc[0])
        final = last.history.set_index("metric")
        assert final.loc["train/loss", "step"] == 4 and math.isnan(final.loc["train/loss", "value"])
        assert final.loc["train/grad_norm", "value"] == 2.0
        assert final.loc["train/entropy", "step"] == 2  # what stopped being logged keeps its last value

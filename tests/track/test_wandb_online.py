"""The online path with a fake wandb.Api at the boundary."""

import numpy as np
import pytest

from arctl.track import wandb_online
from arctl.track.runs import load_runs


class FakeRun:
    def __init__(self, rid, experiment, arm, seed, n=5, state="finished"):
        self.id, self.entity, self.project = rid, "team", "proj"
        self.name, self.group, self.state = f"{arm}-s{seed}", experiment, state
        self.config = {"experiment": experiment, "arm": {"value": arm, "desc": None}, "seed": seed}
        self.summary = {"eval/aime24/final_acc": 0.5}
        self._attrs = {"heartbeatAt": "2026-01-01T00:00:00"}
        self.n = n
        self.scans = 0

    def scan_history(self, page_size=1000):
        self.scans += 1
        for s in range(self.n):
            row = {"_step": s, "trainer/global_step": 10 * s, "train/loss": 1.0 / (s + 1)}
            if s % 2 == 0:
                row["eval/aime24/final_acc"] = 0.1 * s
            yield row


class FakeApi:
    def __init__(self, runs):
        self._runs = runs
        self.calls = []

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        return list(self._runs)


def test_online_runs_become_the_same_tidy_data(tmp_path):
    api = FakeApi([FakeRun("a1", "main-grpo", "grpo", 0), FakeRun("b2", "main-grpo", "grpo", 1, n=3)])
    runs = load_runs(wandb_project="team/proj", experiments=["main-grpo"], cache_dir=tmp_path, api=api,
                     progress=False)
    path, filters = api.calls[0]
    assert path == "team/proj" and "main-grpo" in str(filters)
    h = runs.history
    sel = h[(h["run_id"] == "a1") & (h["metric"] == "eval/aime24/final_acc")]
    assert sel["step"].tolist() == [0, 20, 40]
    np.testing.assert_allclose(sel["value"], [0.0, 0.2, 0.4])
    assert sorted(runs.runs["arm"]) == ["grpo", "grpo"]  # {"value": ...} configs unwrapped
    assert set(runs.runs["state"]) == {"finished"}


def test_online_cache_skips_unchanged_runs(tmp_path):
    run = FakeRun("a1", "main-grpo", "grpo", 0)
    api = FakeApi([run])
    load_runs(wandb_project="team/proj", cache_dir=tmp_path, api=api, progress=False)
    load_runs(wandb_project="team/proj", cache_dir=tmp_path, api=api, progress=False)
    assert run.scans == 1
    run._attrs["heartbeatAt"] = "2026-01-01T01:00:00"  # the run moved on
    load_runs(wandb_project="team/proj", cache_dir=tmp_path, api=api, progress=False)
    assert run.scans == 2


def test_bad_project_path_is_a_value_error():
    with pytest.raises(ValueError, match="ENTITY/PROJECT"):
        wandb_online.list_runs("just-a-project", api=FakeApi([]))


def test_base_url_is_honoured(monkeypatch):
    import wandb

    seen = {}

    class Api:
        def __init__(self, overrides=None, timeout=None):
            seen.update(overrides or {})

    monkeypatch.setattr(wandb, "Api", Api)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org/")
    wandb_online.make_api()
    assert seen == {"base_url": "https://wandb.example.org"}
    seen.clear()
    monkeypatch.delenv("WANDB_BASE_URL")
    wandb_online.make_api()
    assert seen == {}


def test_server_errors_become_one_clear_line():
    class Refusing:
        def runs(self, path, filters=None):
            raise RuntimeError("No API key configured. Use `wandb login` to log in.\nmore detail")

    with pytest.raises(wandb_online.WandbAccessError, match="team/proj.*No API key configured.*wandb login"):
        wandb_online.list_runs("team/proj", api=Refusing())


def test_a_forced_rerun_and_its_original_are_one_run_read_from_the_newest(tmp_path):
    """Found by a review: a ``--force`` rerun is a new W&B run (``<run id>-g1``) with the original's
    ``config.run_id``, the cache key: both were read into one cache entry and the tidy data failed
    (ValueError/IndexError). Now the newest is read, as the workspace keeps only the rerun, and a warning
    names both."""
    import warnings

    from arctl.track.runs import RunReadWarning

    old, new = FakeRun("r0", "main-grpo", "grpo", 0, n=5), FakeRun("r0-g1", "main-grpo", "grpo", 0, n=3)
    for run, created in ((old, "2026-01-01T00:00:00"), (new, "2026-01-02T00:00:00")):
        run.config["run_id"] = "main-grpo_grpo_s0_abc"
        run._attrs["createdAt"] = created
    for i, order in enumerate(([new, old], [old, new])):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            runs = load_runs(wandb_project="team/proj", cache_dir=tmp_path / str(i), api=FakeApi(order), progress=False)
        assert runs.runs["run_id"].tolist() == ["main-grpo_grpo_s0_abc"] and runs.runs["wandb_ids"].tolist() == ["r0-g1"]
        assert runs.history["step"].max() == 20  # the rerun's 3 rows, not the original's 5
        said = [str(w.message) for w in seen if issubclass(w.category, RunReadWarning)]
        assert said == ["run main-grpo_grpo_s0_abc: W&B runs r0, r0-g1 have its run id (a --force rerun and what it "
                        "replaced): read the newest, r0-g1"]
    # without a creation time (or the same one) the rerun's generation decides: g10 after g9
    ninth, tenth = FakeRun("r0-g9", "main-grpo", "grpo", 0, n=2), FakeRun("r0-g10", "main-grpo", "grpo", 0, n=4)
    for run in (ninth, tenth):
        run.config["run_id"] = "main-grpo_grpo_s0_abc"
    runs = load_runs(wandb_project="team/proj", cache_dir=tmp_path / "g", api=FakeApi([tenth, ninth]), progress=False)
    assert runs.runs["wandb_ids"].tolist() == ["r0-g10"]


def test_a_nan_the_run_logged_is_a_value_online_too(tmp_path):
    """The W&B API gives a logged NaN as ``nan`` or, from some servers, ``"NaN"``: a value (and a warning),
    unlike ``None`` or a string, which are not logged numbers."""
    import math

    run = FakeRun("a1", "main-grpo", "grpo", 0, n=0)
    rows = [{"trainer/global_step": 0, "train/loss": 0.5, "note": "x"},
            {"trainer/global_step": 1, "train/loss": float("nan"), "note": None},
            {"trainer/global_step": 2, "train/loss": "NaN", "note": "NaN?"}]
    run.scan_history = lambda page_size=1000: iter(rows)
    with pytest.warns(Warning, match=r"^run a1 logged NaN from step 1 in train/loss \("):  # one line per run
        runs = load_runs(wandb_project="team/proj", cache_dir=tmp_path, api=FakeApi([run]), progress=False)
    h = runs.history
    loss = h[h["metric"] == "train/loss"]["value"].tolist()
    assert loss[0] == 0.5 and math.isnan(loss[1]) and math.isnan(loss[2]) and len(loss) == 3
    assert not (h["metric"] == "note").any()

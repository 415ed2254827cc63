"""The tiny warm-up's rounds are decided by its own evaluation, and each run records its warm-up's accuracy measured
under its own evaluation settings.

From a review of 2026-12-07 (the "known gaps" of the cache key): with ``tiny.warmup.max_rounds`` > 1 the first
round's accuracy, measured under the settings of the run that filled an empty cache (``eval.temperature``,
``tiny.eval_seed``, ``tiny.max_rows``, ``eval.budgets``: none in the key), decided whether a second round was
trained, so two runs of one key got other weights depending on which came first; and a run reusing a cache recorded
as its warm-up's accuracy (run_dir/warmup.json, W&B, claims.md) the one its maker measured, under the maker's
settings. Micro warm-ups (a second each), the trainer's own measure (``budget_accuracy``) or a stub where that makes
the case exact."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from arctl.backends.tiny import warmup
from arctl.backends.tiny.evaluate import budget_accuracy
from arctl.compose import resolve_experiment

MICRO = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1",
         "model.intermediate_size=64", "tiny.task.search.min_items=4", "tiny.task.search.max_items=8",
         "tiny.warmup.batch_size=8", "tiny.warmup.eval_problems=32", "tiny.warmup.seed=2468",
         "scale.budgets=[8,16,24,32]"]  # (tests/support/micro.py's budgets: a micro evaluation in a fraction of a second)
MADE = ["tiny.warmup.steps=20", "tiny.warmup.max_rounds=2", "tiny.warmup.min_acc=0"]  # the module's entry: one round
# every setting a run's measure reads beyond the key, other than the default's
OTHER_SETTINGS = ["eval.temperature=0.3", "tiny.eval_seed=5", "tiny.max_rows=16", "eval.budgets=[16,32]"]


def _config(*overrides: str) -> dict:
    return resolve_experiment("main-grpo", overrides=[*MICRO, *overrides], seeds=[0])[0].config


def _measure(config: dict):
    """The trainer's measure of the warm-up's accuracy (arctl/backends/tiny/trainer.py), for run ``config``."""
    return lambda model, tok: budget_accuracy(model, tok, config, int(config["tiny"]["warmup"]["eval_problems"]))


def _default_config() -> dict:
    """The config the shipped warm-start was trained and measured as (benchmarks/ship_warmstart.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import ship_warmstart  # benchmarks/ship_warmstart.py

    return ship_warmstart.default_config()


def _run(tmp_path: Path, name: str = "r") -> Path:
    run = tmp_path / "ws" / "runs" / name
    run.mkdir(parents=True, exist_ok=True)
    return run


@pytest.fixture
def train(monkeypatch):
    """``ARCTL_TINY_WARMUP`` unset; a list that grows by one per warm-up trained."""
    monkeypatch.delenv("ARCTL_TINY_WARMUP", raising=False)
    trained = []
    real = warmup._train_into
    monkeypatch.setattr(warmup, "_train_into", lambda *a, **k: (trained.append(1), real(*a, **k))[1])
    return trained


def test_the_warm_ups_own_evaluation_reads_only_what_the_key_hashes(entry):
    """``rounds_accuracy`` is the trainer's measure at the largest budget alone, on ``tiny.warmup.eval_problems``
    problems drawn and sampled from ``tiny.warmup.seed``, at the tiny scale's temperature and row batch (its profile,
    conf/scale/tiny.yaml: 1.0 and 1024): the same number for a run under every other evaluation setting."""
    config, _cache, made = entry
    info, tok, model = warmup._load_entry(made)
    assert warmup.rounds_settings(config) == {"seed": 2468, "problems": 32, "budget": 32, "temperature": 1.0,
                                              "max_rows": 1024}
    by_hand = copy.deepcopy(config)
    by_hand["eval"].update(temperature=1.0, budgets=[32])
    by_hand["tiny"].update(eval_seed=2468, max_rows=1024)
    want = budget_accuracy(model, tok, by_hand, 32)[32]
    assert warmup.rounds_accuracy(model, tok, config) == want == info["rounds_eval"]["accuracy"][-1]
    others = [_config(*MADE, o) for o in OTHER_SETTINGS]
    assert {warmup.warmup_key(o) for o in others} == {warmup.warmup_key(config)}
    assert [warmup.rounds_accuracy(model, tok, o) for o in others] == [want] * len(others)
    # ... while the run's own measure reads them (the premise of recording it per run)
    measured = {json.dumps(budget_accuracy(model, tok, o, 32), sort_keys=True) for o in (config, *others)}
    assert len(measured) > 1, measured


def test_two_runs_of_a_key_get_the_same_weights_whichever_fills_the_cache_first(tmp_path, monkeypatch, train):
    """Run A (the defaults) and run B (every evaluation setting other), one key, max_rounds=2, min_acc 0.45, their
    measures of the warm-up (stubbed: exact) 0.25 and 0.75: each order of filling an empty cache gives the same
    weights and rounds. Before: A first trained the second round A's accuracy asked for, B first did not."""
    a = _config("tiny.warmup.steps=4", "tiny.warmup.max_rounds=2", "tiny.warmup.min_acc=0.45")
    b = _config("tiny.warmup.steps=4", "tiny.warmup.max_rounds=2", "tiny.warmup.min_acc=0.45", *OTHER_SETTINGS)
    assert warmup.warmup_key(a) == warmup.warmup_key(b)
    measure = {id(a): 0.25, id(b): 0.75}
    made = {}
    for order in ((a, b), (b, a)):
        monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / f"cache-{len(made)}"))
        runs = [(c, lambda m, t, c=c: {int(x): measure[id(c)] for x in c["eval"]["budgets"]}) for c in order]
        _m, _t, info = warmup.warmup_model(runs[0][0], _run(tmp_path), runs[0][1])
        warmup.warmup_model(runs[1][0], _run(tmp_path), runs[1][1])  # loads it
        made[len(made)] = (info["weights_sha256"], info["rounds"], info.get("rounds_eval"))
    assert train == [1, 1]
    assert made[0][:2] == made[1][:2], made
    assert made[0][2] == made[1][2] and len(made[0][2]["accuracy"]) == made[0][1], made  # the same decision


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    """(config, cache folder, entry) of a micro warm-up of max_rounds 2 (min_acc 0: one round) made by a run of the
    default evaluation settings whose measure reads 0.5 at every budget."""
    config = _config(*MADE)
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARCTL_CACHE", str(cache))
        mp.delenv("ARCTL_TINY_WARMUP", raising=False)
        _m, _t, info = warmup.warmup_model(config, tmp_path_factory.mktemp("run"),
                                           lambda m, t: {int(b): 0.5 for b in config["eval"]["budgets"]})
    return config, cache, Path(info["path"])


def _reuse(monkeypatch, tmp_path, cache: Path, config: dict, measure):
    """Run ``config`` on the warm-up cached in ``cache`` (a copy of it: the module's entry stays as made)."""
    import shutil

    mine = tmp_path / "cache"
    shutil.copytree(cache, mine)
    monkeypatch.setenv("ARCTL_CACHE", str(mine))
    monkeypatch.delenv("ARCTL_TINY_WARMUP", raising=False)
    return warmup.warmup_model(config, _run(tmp_path), measure)


@pytest.mark.parametrize("setting", OTHER_SETTINGS)
def test_a_run_under_other_evaluation_settings_records_its_own_measure(tmp_path, monkeypatch, entry, train, setting):
    config, cache, made = entry
    mine = _config(*MADE, setting)
    assert warmup.warmup_key(mine) == warmup.warmup_key(config)
    calls = []

    def measure(model, tok):
        calls.append(1)
        return {int(b): 0.25 for b in mine["eval"]["budgets"]}

    _m, _t, info = _reuse(monkeypatch, tmp_path, cache, mine, measure)
    assert train == [] and calls == [1]
    assert info["accuracy_per_budget"] == {str(b): 0.25 for b in sorted(mine["eval"]["budgets"])}
    assert info["accuracy"] == 0.25 and info["accuracy_eval"] == warmup.measure_settings(mine)
    cached = json.loads((Path(info["path"]) / "warmup.json").read_text())
    assert cached["accuracy_per_budget"] == {str(b): 0.5 for b in sorted(config["eval"]["budgets"])}  # not rewritten
    assert cached["accuracy_eval"] == warmup.measure_settings(config)


def test_a_run_records_the_trainers_measure_under_its_own_settings(tmp_path, monkeypatch, entry, train):
    """The numbers: those of ``budget_accuracy`` for this run's config, whoever made the cache."""
    config, cache, _made = entry
    mine = _config(*MADE, *OTHER_SETTINGS)
    model, tok, info = _reuse(monkeypatch, tmp_path, cache, mine, _measure(mine))
    assert info["accuracy_per_budget"] == {str(b): a for b, a in budget_accuracy(model, tok, mine, 32).items()}


def test_a_resumed_run_under_other_settings_reads_its_first_attempts_measure(tmp_path, monkeypatch, entry, train):
    """A run under other evaluation settings than the entry's measures its warm-up once: its record (run_dir/
    warmup.json, with the settings, ``accuracy_eval``) is what its later attempts read, not measured again at each
    resume (~15 s at the tiny scale); a record of other weights (the cache refilled) is measured again."""
    from arctl.backends.tiny.trainer import record_warmup

    config, cache, _made = entry
    mine = _config(*MADE, *OTHER_SETTINGS)
    calls = []

    def measure(model, tok):
        calls.append(1)
        return {int(b): 0.375 for b in mine["eval"]["budgets"]}

    _m, _t, info = _reuse(monkeypatch, tmp_path, cache, mine, measure)
    recorded = record_warmup(_run(tmp_path), info)
    assert recorded["accuracy_eval"] == warmup.measure_settings(mine) and calls == [1]
    assert json.loads((_run(tmp_path) / "warmup.json").read_text()) == recorded

    def unmeasured(model, tok):
        raise AssertionError("measured again at a resume")

    _m, _t, again = warmup.warmup_model(mine, _run(tmp_path), unmeasured)
    assert again["accuracy_per_budget"] == recorded["accuracy_per_budget"] and train == []
    (_run(tmp_path) / "warmup.json").write_text(json.dumps({**recorded, "weights_sha256": "0" * 64}))
    _m, _t, other = warmup.warmup_model(mine, _run(tmp_path), measure)
    assert calls == [1, 1] and other["accuracy_per_budget"] == recorded["accuracy_per_budget"]


def test_a_run_under_the_same_settings_measures_nothing(tmp_path, monkeypatch, entry, train):
    """Other settings than the measure's (the run's seed, rollout.n, eval.num_problems): the entry's numbers."""
    config, cache, _made = entry
    mine = resolve_experiment("main-grpo", overrides=[*MICRO, *MADE, "rollout.n=4", "eval.num_problems=64"],
                              seeds=[3])[0].config

    def unmeasured(model, tok):
        raise AssertionError("measured again under the settings the entry records")

    _m, _t, info = _reuse(monkeypatch, tmp_path, cache, mine, unmeasured)
    assert train == [] and info["accuracy_per_budget"] == {str(b): 0.5 for b in sorted(config["eval"]["budgets"])}
    assert info["accuracy"] == 0.5 and info["rounds_eval"]["accuracy"] and info["rounds"] == 1


def test_an_entry_without_its_settings_loads_and_each_run_measures_its_own(tmp_path, monkeypatch, entry, train,
                                                                          capsys):
    """An entry an earlier arctl trained records no settings (nor its rounds' own evaluation): it loads, is not set
    aside, every run measures its own accuracy (unknown settings), and, its key having max_rounds > 1, the job log
    says its rounds followed its maker's settings."""
    config, cache, made = entry
    record = json.loads((made / "warmup.json").read_text())
    old = {k: v for k, v in record.items() if k not in ("accuracy_eval", "rounds_eval")}
    old_cache = tmp_path / "old"
    import shutil

    shutil.copytree(cache, old_cache)
    (old_cache / made.parent.name / made.name / "warmup.json").write_text(json.dumps(old))
    calls = []

    def measure(model, tok):
        calls.append(1)
        return {int(b): 0.125 for b in config["eval"]["budgets"]}

    _m, _t, info = _reuse(monkeypatch, tmp_path, old_cache, config, measure)
    assert train == [] and calls == [1] and info["weights_sha256"] == record["weights_sha256"]
    assert info["accuracy_per_budget"] == {str(b): 0.125 for b in sorted(config["eval"]["budgets"])}
    assert "made by an arctl that decided its rounds (1) on its maker's evaluation settings" in capsys.readouterr().out
    assert not list((tmp_path / "cache" / made.parent.name).glob("*.damaged-*"))


def test_the_shipped_warm_up_is_measured_again_only_under_other_settings(tmp_path, monkeypatch, train):
    """Its record (written before the settings were) was measured as the tiny scale's default run
    (benchmarks/ship_warmstart.py): a default run measures nothing, a run at another temperature its own."""
    default = _default_config()
    shipped = warmup.shipped_dir(warmup.warmup_key(default))
    record = json.loads((shipped / "warmup.json").read_text())
    assert "accuracy_eval" not in record  # (a warm-start shipped later records them)
    assert warmup.recorded_settings(record) == warmup.measure_settings(default)
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ARCTL_TINY_WARMUP", raising=False)

    def unmeasured(model, tok):
        raise AssertionError("the shipped record's settings are the default run's: nothing is measured")

    _m, _t, info = warmup.warmup_model(default, _run(tmp_path), unmeasured)
    assert info["source"] == "shipped" and info["accuracy_per_budget"] == record["accuracy_per_budget"]
    other = copy.deepcopy(default)
    other["eval"]["temperature"] = 0.5
    _m, _t, info = warmup.warmup_model(other, _run(tmp_path), lambda m, t: {b: 0.375 for b in (48, 96, 144, 192)})
    assert info["accuracy_per_budget"] == {"48": 0.375, "96": 0.375, "144": 0.375, "192": 0.375}
    assert train == []


def test_the_shipped_warm_ups_single_round_stands_under_its_own_evaluation(tmp_path, monkeypatch):
    """The default key (max_rounds 2) shipped one round, decided on its maker's accuracy (0.730 >= min_acc 0.45): the
    warm-up's own evaluation decides the same, so the shipped weights are those every run of the key now trains."""
    from transformers import Qwen2ForCausalLM

    from arctl.backends.tiny.tokenizer import load_tokenizer

    default = _default_config()
    folder = warmup.shipped_dir(warmup.warmup_key(default))
    assert json.loads((folder / "warmup.json").read_text())["rounds"] == 1
    assert int(default["tiny"]["warmup"]["max_rounds"]) == 2
    model = Qwen2ForCausalLM.from_pretrained(str(folder / "model"), attn_implementation="sdpa").eval()
    acc = warmup.rounds_accuracy(model, load_tokenizer(folder / "tokenizer"), default)
    print(f"the shipped warm-up's own evaluation: {acc:.4f}")
    assert acc >= float(default["tiny"]["warmup"]["min_acc"]) + 0.1, acc

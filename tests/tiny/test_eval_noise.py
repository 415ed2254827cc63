"""benchmarks/eval_noise.py (how much of a claim's paired spread is evaluation noise, #31): its
re-evaluation is the trainer's own final evaluation (the original sampling stream gives the logged
numbers to the bit, another stream other numbers on the same problems), and its split of the
variance is the hand-worked one."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import wandb
import yaml
from micro import MICRO  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.backends.tiny.evaluate import evaluate
from arctl.backends.tiny.trainer import train
from arctl.report.claims import seeds_needed

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "eval_noise.py"


def _script():
    if str(SCRIPT.parent) not in sys.path:  # benchmarks/_args.py, found as when the script runs
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("eval_noise", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_split_of_the_variance_is_the_hand_worked_one():
    # two seeds, the logged stream and two others; d = a - b per stream
    by = {
        ("x", 0): {"logged": {"anytime": 0.50}, "1": {"anytime": 0.52}, "2": {"anytime": 0.48}},
        ("y", 0): {"logged": {"anytime": 0.40}, "1": {"anytime": 0.40}, "2": {"anytime": 0.40}},
        ("x", 1): {"logged": {"anytime": 0.70}, "1": {"anytime": 0.66}, "2": {"anytime": 0.70}},
        ("y", 1): {"logged": {"anytime": 0.50}, "1": {"anytime": 0.50}, "2": {"anytime": 0.48}},
    }
    mod = _script()
    mod.STATS = ("anytime",)
    (row,) = mod.analyse(by, [("x", "y")])
    # seed 0: d = .10, .12, .08: squares about the mean .0000 + .0004 + .0004 = .0008 (2 df);
    # seed 1: d = .20, .16, .22, mean .58/3: (.02/3)^2 + (.10/3)^2 + (.08/3)^2 = .0168/9 (2 df)
    ev = (0.0008 + 0.0168 / 9) / 4
    logged = np.array([0.10, 0.20])  # the logged d_i: mean .15, var .005
    assert row["seeds"] == 2 and row["eval_df"] == 4
    assert row["mean"] == pytest.approx(0.15) and row["sd"] == pytest.approx(math.sqrt(0.005))
    assert row["eval_sd"] == pytest.approx(math.sqrt(ev))
    assert row["eval_share"] == pytest.approx(ev / logged.var(ddof=1))
    train = 0.005 - ev
    assert row["seeds_needed"]["now"] == seeds_needed(0.15, math.sqrt(0.005))
    assert row["seeds_needed"]["n_samples=4"] == seeds_needed(0.15, math.sqrt(train + ev / 4))
    assert row["seeds_needed"]["no eval noise"] == seeds_needed(0.15, math.sqrt(train))
    assert row["seeds_needed"]["no eval noise"] <= row["seeds_needed"]["n_samples=4"] <= row["seeds_needed"]["now"]


def test_the_runs_measured_are_one_per_cell_as_the_sweep_composes_them(tmp_path):
    """A workspace with main-grpo seed 0 of `arctl sweep paper` and of `arctl sweep baselines` (budget
    forcing on): the paper's is measured, once; the baselines' with --sweep baselines."""
    from arctl.launch.run_id import make_run_id

    def write(config: dict) -> str:
        rid = make_run_id(config)
        (tmp_path / "runs" / rid).mkdir(parents=True)
        (tmp_path / "runs" / rid / "config.yaml").write_text(yaml.safe_dump(config))
        (tmp_path / "runs" / rid / "status.json").write_text(json.dumps({"state": "completed"}))
        return rid

    plain = write(arm_config("main-grpo", "grpo", "tiny"))
    forced = write(arm_config("main-grpo", "grpo", "tiny", ["budget_control.forcing_extensions=2"]))
    other = write(arm_config("main-ar-uniform", "ar-uniform", "tiny"))
    mod = _script()
    assert [d.name for d in mod._runs(tmp_path, {"grpo", "ar-uniform"})] == [other, plain]
    assert [d.name for d in mod._runs(tmp_path, {"grpo"}, "baselines")] == [forced]


def test_a_mistyped_arm_is_refused_in_one_line_naming_it(tmp_path, capsys):
    """--pair grpo-dnse:grpo used to drop the pair silently (no rows, exit 0)."""
    from arctl.launch.run_id import make_run_id

    config = arm_config("main-grpo", "grpo", "tiny")
    run = tmp_path / "runs" / make_run_id(config)
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "status.json").write_text(json.dumps({"state": "completed"}))
    out = tmp_path / "noise.json"
    with pytest.raises(SystemExit) as exc:
        _script().main(["--workdir", str(tmp_path), "--pair", "grpo-dnse:grpo", "--json", str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "grpo-dnse" in err and "Traceback" not in err
    assert "arm(s) grpo-dnse in" in err and not out.exists()


@pytest.mark.parametrize("argv", [["--pair", "nocolon"], ["--pair", "a:"], ["--pair", "a:b", "--shard", "3"],
                                  ["--pair", "a:b", "--shard", "2/2"], ["--pair", "a:b", "--streams", "0"],
                                  ["--pair", "a:b", "--workdir", "/nonexistent"]])
def test_bad_arguments_are_refused_in_one_line(tmp_path, capsys, argv):
    """`--pair nocolon` and `--shard 3` were ValueError tracebacks, a missing --workdir a FileNotFoundError."""
    (tmp_path / "runs").mkdir()
    with pytest.raises(SystemExit) as exc:
        _script().main(["--workdir", str(tmp_path), "--json", str(tmp_path / "n.json"), *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and argv[-2] in err and "Traceback" not in err
    assert not (tmp_path / "n.json").exists()


def test_another_sampling_stream_keeps_the_problems_and_changes_the_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    from arctl.algo.prompts import InsertedTokens
    from arctl.algo.settings import Objective
    from arctl.backends.tiny import evaluate as ev
    from arctl.backends.tiny.warmup import warmup_model

    config = arm_config("main-grpo", "grpo", overrides=[*MICRO, "eval.num_problems=16", "tiny.diag_problems=0"])
    model, tok, _ = warmup_model(config, tmp_path / "run", lambda m, t: ev.budget_accuracy(m, t, config, 4))
    inserted = InsertedTokens.from_tokenizer(tok, Objective.from_config(config).summary.inserted)
    budgets = config["eval"]["budgets"]
    seed = config["tiny"]["eval_seed"]
    seen = []
    real = ev.rollout

    def rollout(model, tok, inserted, task, problems, *args, **kw):
        seen.append(problems)
        return real(model, tok, inserted, task, problems, *args, **kw)

    monkeypatch.setattr(ev, "rollout", rollout)
    default = evaluate(model, tok, inserted, config, budgets)
    assert evaluate(model, tok, inserted, config, budgets, sample_seed=seed) == default
    others = [evaluate(model, tok, inserted, config, budgets, sample_seed=seed + k) for k in (1, 2, 3)]
    assert any(o != default for o in others)  # 16 problems x 4 budgets: three streams cannot all agree
    assert len(seen) == 5 and all(p == seen[0] for p in seen)  # the same problems in every stream


@pytest.mark.parametrize("streams", [2])
def test_the_reevaluation_reproduces_each_runs_final_evaluation(tmp_path, monkeypatch, capsys, streams):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    runs = tmp_path / "ws" / "runs"
    for experiment, arm in (("main-grpo", "grpo"), ("ablation-dense", "grpo-dense")):
        for seed in (0, 1):
            config = arm_config(experiment, arm, overrides=MICRO)
            config["seed"] = seed  # the spec's first seed, and the next
            run_dir = runs / f"{experiment}-{arm}-s{seed}"
            assert train(config, run_dir, threading.Event()) == "completed"
            wandb.teardown()
            (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
            (run_dir / "status.json").write_text(json.dumps({"state": "completed"}))
    out = tmp_path / "noise.json"
    mod = _script()
    assert mod.main(["--workdir", str(tmp_path / "ws"), "--pair", "grpo-dense:grpo", "--streams", str(streams),
                     "--json", str(out)]) == 0
    done = json.loads(out.read_text())
    assert len(done) == 4
    (checked,) = [r for r in done.values() if "check" in r]
    assert checked["check"]["same_as_logged"], checked  # the trainer's own evaluation, bit for bit
    for rec in done.values():
        streams_done = [k for k in rec if k not in ("logged", "check", "seconds")]
        assert len(streams_done) == streams
        assert all(0 <= rec[k]["final"] <= 1 and 0 <= rec[k]["anytime"] <= 1 for k in ["logged", *streams_done])
    assert "grpo-dense - grpo" in capsys.readouterr().out  # the table
    rows = mod.analyse({mod._arm_seed(name, tmp_path / "ws"): rec for name, rec in done.items()},
                       [("grpo-dense", "grpo")])
    assert {r["stat"] for r in rows} == {"anytime", "final", "think_len"}
    assert all(r["seeds"] == 2 and r["eval_df"] == 2 * streams for r in rows)
    # a second call measures nothing again: it reads what the first wrote
    before = out.read_text()
    assert mod.main(["--workdir", str(tmp_path / "ws"), "--pair", "grpo-dense:grpo", "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(before)


def test_a_group_of_one_logs_no_variance_diagnostics(tmp_path, monkeypatch):
    """With rollout.n=1 V2 is the sample itself (corr 1, variance 0: numbers that say nothing), so the
    tiny backend logs no diagnostics there, as the verl backend does not (found by a review)."""
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    from arctl.algo.prompts import InsertedTokens
    from arctl.algo.settings import Objective
    from arctl.backends.tiny import evaluate as ev
    from arctl.backends.tiny.warmup import warmup_model

    def keys(n: int) -> set[str]:
        config = arm_config("main-grpo", "grpo", overrides=[*MICRO, "eval.num_problems=8", "tiny.diag_problems=4",
                                                            f"rollout.n={n}", "thinking.baseline=none",
                                                            "summary.group_size=2"])  # (one of one: refused)
        model, tok, _ = warmup_model(config, tmp_path / "run", lambda m, t: ev.budget_accuracy(m, t, config, 4))
        inserted = InsertedTokens.from_tokenizer(tok, Objective.from_config(config).summary.inserted)
        return set(evaluate(model, tok, inserted, config, config["eval"]["budgets"]))

    assert any("/nvar/" in k for k in keys(2))
    assert not any("/nvar/" in k or "/corr_v" in k for k in keys(1))


def test_the_committed_table_is_rebuilt_from_the_committed_export_as_its_readme_says(tmp_path, capsys):
    """docs/evidence/README.md's command on the export it names (no status.json, no metrics.jsonl, no checkpoints):
    it found no completed run (exit 2), then wanted metrics.jsonl. Now the export's index says which completed,
    the measurements say what each logged, and the row of the README's table comes out, measuring nothing."""
    root = SCRIPT.parents[1] / "docs" / "evidence"
    measured = tmp_path / "measurements.json"
    measured.write_bytes((root / "eval-noise" / "measurements.json").read_bytes())
    assert _script().main(["--workdir", str(root / "tiny-8seeds"), "--json", str(measured), "--streams", "1",
                           "--pair", "ar-uniform:grpo"]) == 0
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith("ar-uniform - grpo") and " anytime " in line)
    assert row.split()[4:8] == ["8", "+0.0247", "0.0196", "0.0072"], row  # the README's .0196 / .0072 / 8 seeds
    assert measured.read_bytes() == (root / "eval-noise" / "measurements.json").read_bytes()  # nothing measured
    assert "exported run(s) that" in out.err

"""The warm-up: packed examples train exactly like padded ones; a stop during it caches nothing."""

import copy
import json
from pathlib import Path

import numpy as np
import torch

from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny import task
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.tasks import RunningSumTask
from arctl.backends.tiny.tokenizer import build_tokenizer
from arctl.backends.tiny.warmup import pack_examples, training_example

MICRO_MODEL = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                   tie_embeddings=True, max_position_embeddings=256)
KNOBS = dict(min_terms=2, max_terms=6, filler_prob=0.3, summary_finish_steps=2, summary_continue_prob=0.5)


def _examples(tok, n, seed):
    rng = np.random.default_rng(seed)
    inserted = InsertedTokens.from_tokenizer(tok)
    wk = dict(truncate_prob=0.5)
    toy = RunningSumTask(KNOBS)
    return [training_example(p, rng, tok, inserted, toy, wk) for p in task.make_problems(rng, n, 2, 6)]


def test_packing_puts_several_examples_per_row_and_keeps_them_apart():
    tok = build_tokenizer(task.vocabulary(6))
    examples = _examples(tok, 12, 0)
    batch = pack_examples(examples, tok.pad_token_id)
    width = max(len(ids) for ids, _ in examples)
    assert batch["input_ids"].shape[1] == width and batch["input_ids"].shape[0] < len(examples)
    # every example's tokens appear once, in order, with positions from 0
    found = []
    for r in range(batch["input_ids"].shape[0]):
        starts = (batch["position_ids"][r] == 0).nonzero()[:, 0].tolist()
        for a, b in zip(starts, starts[1:] + [width]):
            seg = batch["input_ids"][r, a:b].tolist()
            found.append(seg)
    for ids, _ in examples:
        assert any(f[: len(ids)] == ids for f in found)


def test_packed_loss_and_logits_equal_one_example_per_row():
    tok = build_tokenizer(task.vocabulary(6))
    model = build_model(model_config(MICRO_MODEL, len(tok), tok.pad_token_id, tok.eos_token_id), 0).eval()
    examples = _examples(tok, 10, 1)
    packed = pack_examples(examples, tok.pad_token_id)
    with torch.no_grad():
        out = model(**packed)
        width = max(len(ids) for ids, _ in examples)
        ids = torch.full((len(examples), width), tok.pad_token_id)
        attn = torch.zeros((len(examples), width), dtype=torch.long)
        labels = torch.full((len(examples), width), -100)
        for i, (seq, trainable) in enumerate(examples):
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            labels[i, : len(seq)] = torch.where(torch.tensor(trainable), torch.tensor(seq), -100)
        ref = model(input_ids=ids, attention_mask=attn, labels=labels)
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=1e-5)
    # the logits of each example inside its packed row equal its own row's
    for r in range(packed["input_ids"].shape[0]):
        starts = (packed["position_ids"][r] == 0).nonzero()[:, 0].tolist()
        for a in starts:
            seq = None
            for i, (s, _) in enumerate(examples):
                if packed["input_ids"][r, a : a + len(s)].tolist() == s:
                    seq, i_ex = s, i
                    break
            if seq is None:  # padding run
                continue
            torch.testing.assert_close(out.logits[r, a : a + len(seq)], ref.logits[i_ex, : len(seq)], atol=1e-5, rtol=1e-5)


def _micro_config(seed: int):
    from arctl.compose import resolve_experiment

    overrides = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1",
                 "model.intermediate_size=64", "tiny.task.search.min_items=4", "tiny.task.search.max_items=8", "tiny.warmup.steps=6",
                 "tiny.warmup.batch_size=4", "tiny.warmup.max_rounds=1", "tiny.warmup.eval_problems=4",
                 f"tiny.warmup.seed={seed}"]
    return resolve_experiment("main-grpo", overrides=overrides)[0].config


def test_the_warmup_reports_its_progress_and_is_shared_by_every_workspace(tmp_path, monkeypatch, capsys):
    """Job log: a line with step, loss and ETA; `arctl status`: "warming up k/N", cleared at the end.
    The cache is user-level ($ARCTL_CACHE): a second workspace loads it instead of training again."""
    from arctl.backends.tiny import warmup
    from arctl.track.phase import read_phase, write_phase

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "user-cache"))
    monkeypatch.setattr(warmup, "PROGRESS_EVERY_S", 0.0)  # a line per step
    config = _micro_config(seed=4321)
    phases, trained = [], []
    real = warmup._train_into
    monkeypatch.setattr(warmup, "_train_into", lambda *a, **k: (trained.append(1), real(*a, **k))[1])
    run_a = tmp_path / "ws-a" / "runs" / "r1"
    run_a.mkdir(parents=True)

    def on_phase(text):
        phases.append(text)
        write_phase(run_a, text)
        if text and text.startswith("warming up 3/"):
            assert read_phase(run_a) == "warming up 3/6"  # what refresh puts in the registry

    def measured(budgets, value=0.9):
        calls = []
        return calls, lambda m, t: (calls.append(list(budgets)), {int(b): value for b in budgets})[1]

    calls_a, acc_a = measured(config["eval"]["budgets"])
    warmup.warmup_model(config, run_a, acc_a, on_phase=on_phase)
    out = capsys.readouterr().out
    assert "tiny warm-up 6/6 loss" in out and "ETA" in out
    assert "warming up 3/6" in phases and phases[-1] is None and read_phase(run_a) is None
    assert warmup.warmup_dir(config).is_relative_to(tmp_path / "user-cache")
    run_b = tmp_path / "ws-b" / "runs" / "r2"  # another workspace
    run_b.mkdir(parents=True)
    calls_b, acc_b = measured(config["eval"]["budgets"])
    model, _tok, info = warmup.warmup_model(config, run_b, acc_b)
    assert trained == [1] and info["path"] == str(warmup.warmup_dir(config))
    assert len(calls_a) == 1 and calls_b == []  # the cache's accuracy covers the run's eval budgets

    # a run with other eval budgets and the same largest one shares the weights (the key) and measures
    # its own accuracy at every budget of its own (the summaries of all budgets share one stream: the cached
    # 0.9 at the largest was measured beside other budgets); the cache keeps its values
    other = copy.deepcopy(config)
    top = max(config["eval"]["budgets"])
    other["eval"]["budgets"] = [top - 1, top]
    assert warmup.warmup_key(other) == warmup.warmup_key(config)
    calls_c, acc_c = measured(other["eval"]["budgets"], value=0.5)
    _m, _t, info_c = warmup.warmup_model(other, run_b, acc_c)
    assert trained == [1] and len(calls_c) == 1
    assert info_c["accuracy_per_budget"] == {str(top - 1): 0.5, str(top): 0.5}
    assert json.loads((warmup.warmup_dir(config) / "warmup.json").read_text())["accuracy_per_budget"] == {
        str(b): 0.9 for b in sorted(config["eval"]["budgets"])}  # the cache is not rewritten


def test_a_think_end_run_warms_up_and_checks_its_accuracy_after_think_end_alone(tmp_path, monkeypatch):
    """Elastic's E1 (summary.inserted=think_end) answers right after `</think>`: its warm-up trains
    that layout and measures its accuracy with it, under a key of its own; the default's key is the
    one without the setting (every other run's warm-up unchanged)."""
    from arctl.backends.tiny import evaluate, warmup

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    config = _micro_config(seed=77)
    assert config["summary"]["inserted"] == "anytime"
    bare = copy.deepcopy(config)
    del bare["summary"]["inserted"]
    e1 = copy.deepcopy(config)
    e1["summary"]["inserted"] = "think_end"
    assert warmup.warmup_key(bare) == warmup.warmup_key(config) != warmup.warmup_key(e1)

    seen = {"train": set(), "eval": set()}
    real_example, real_rollout = warmup.training_example, evaluate.rollout

    def spy_example(problem, rng, tok, inserted, *rest):
        seen["train"].add((inserted.truncated, inserted.finished))
        return real_example(problem, rng, tok, inserted, *rest)

    def spy_rollout(model, tok, inserted, *rest, **kw):
        seen["eval"].add((inserted.truncated, inserted.finished))
        return real_rollout(model, tok, inserted, *rest, **kw)

    monkeypatch.setattr(warmup, "training_example", spy_example)
    monkeypatch.setattr(evaluate, "rollout", spy_rollout)
    run = tmp_path / "ws" / "runs" / "r"
    run.mkdir(parents=True)
    _m, tok, info = warmup.warmup_model(e1, run, lambda m, t: evaluate.budget_accuracy(m, t, e1, 4))
    end = tok.convert_tokens_to_ids("</think>")
    assert seen["train"] == seen["eval"] == {((end,), ())}
    assert info["key"] == warmup.warmup_key(e1) and set(info["accuracy_per_budget"]) == {
        str(b) for b in e1["eval"]["budgets"]}


def test_a_think_end_example_puts_the_summary_right_after_the_cut_and_its_end_of_thinking():
    tok = build_tokenizer(task.vocabulary(6))
    e1, authors = InsertedTokens.from_tokenizer(tok, "think_end"), InsertedTokens.from_tokenizer(tok)
    toy = RunningSumTask(KNOBS)
    problems = task.make_problems(np.random.default_rng(3), 40, 2, 6)
    end, cut_seen, finished_seen = e1.think_end, 0, 0
    for i, p in enumerate(problems):
        ids, trainable = training_example(p, np.random.default_rng(i), tok, e1, toy, dict(truncate_prob=0.5))
        ref, _ = training_example(p, np.random.default_rng(i), tok, authors, toy, dict(truncate_prob=0.5))
        at = ids.index(end)  # the first </think>: the inserted one after a cut, else the trace's own
        assert all(trainable[at + 1:])  # the summary, trained, follows at once
        if trainable[at]:  # the trace's own </think>, a trained thinking token: nothing inserted after it
            finished_seen += 1
            assert ref[: at + 1] == ids[: at + 1] and ref[at + 1 + len(authors.finished):] == ids[at + 1:]
        else:  # a cut: </think> alone, never trained
            cut_seen += 1
            assert ref[:at] == ids[:at] and ref[at + len(authors.truncated):] == ids[at + 1:]
    assert cut_seen and finished_seen


def _counted_warm_ups(monkeypatch, tmp_path, seed: int):
    """A micro config (``seed``), its warm-up key, a list that grows by one per warm-up trained, an accuracy
    function of 0.5 at every eval budget, and a run folder."""
    from arctl.backends.tiny import warmup

    config = _micro_config(seed=seed)
    trained = []
    real = warmup._train_into
    monkeypatch.setattr(warmup, "_train_into", lambda *a, **k: (trained.append(1), real(*a, **k))[1])
    run = tmp_path / "ws" / "runs" / "r"
    run.mkdir(parents=True)
    return (config, warmup.warmup_key(config), trained,
            lambda m, t: {int(b): 0.5 for b in config["eval"]["budgets"]}, run)


def test_a_fresh_cache_takes_the_shipped_warm_start_unless_told_to_train_or_it_is_damaged(
        tmp_path, monkeypatch, capsys, caplog):
    """Where arctl ships the warm-start of a key, a cache without it gets that copy (no training), its
    weights' sha256 checked; ARCTL_TINY_WARMUP=train trains instead; a damaged copy is a warning and
    a training, never a model with other weights than recorded."""
    import shutil

    from arctl.backends.tiny import warmup

    config, key, trained, accuracy, run = _counted_warm_ups(monkeypatch, tmp_path, seed=99)
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "machine-a"))
    _m, _t, made = warmup.warmup_model(config, run, accuracy)
    shipped = tmp_path / "shipped"
    shutil.copytree(warmup.warmup_dir(config), shipped / key)
    monkeypatch.setattr(warmup, "SHIPPED", shipped)
    assert trained == [1] and warmup.shipped_dir(key) == shipped / key

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "machine-b"))  # a new machine: empty cache
    capsys.readouterr()
    model, _t, info = warmup.warmup_model(config, run, accuracy)
    assert trained == [1], "the shipped warm-start was trained again"
    assert info["weights_sha256"] == made["weights_sha256"] == warmup.weights_sha256(warmup.warmup_dir(config) / "model")
    assert f"the warm-start shipped with arctl for this config ({key}" in capsys.readouterr().out
    assert model(torch.tensor([[3, 4]])).logits.shape[-1] == _m.config.vocab_size

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "machine-c"))
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "train")
    warmup.warmup_model(config, run, accuracy)
    assert trained == [1, 1]

    monkeypatch.setenv("ARCTL_TINY_WARMUP", "shipped")  # said explicitly: the default
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "machine-c2"))
    warmup.warmup_model(config, run, accuracy)
    assert trained == [1, 1]

    monkeypatch.delenv("ARCTL_TINY_WARMUP")
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "machine-d"))
    weights = next((shipped / key / "model").glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        _m, _t, info = warmup.warmup_model(config, run, accuracy)
    assert trained == [1, 1, 1] and "shipped warm-start" in caplog.text and "damaged" in caplog.text
    assert info["weights_sha256"] == made["weights_sha256"]  # trained here: the recorded weights


def test_each_warm_up_round_says_its_accuracy_in_the_job_log(tmp_path, monkeypatch, capsys):
    """A round short of tiny.warmup.min_acc says so and that another round follows; the last says done. The
    accuracy is the warm-up's own evaluation's (warmup.rounds_accuracy, stubbed), not the run's measure."""
    from arctl.backends.tiny import warmup

    config = _micro_config(seed=98)
    config["tiny"]["warmup"].update(max_rounds=3, min_acc=0.5, steps=2)
    scores = iter([0.25, 0.625, 1.0])
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "train")
    monkeypatch.setattr(warmup, "rounds_accuracy", lambda model, tok, config: next(scores))
    run = tmp_path / "ws" / "runs" / "r"
    run.mkdir(parents=True)
    top = max(config["eval"]["budgets"])

    def accuracy(model, tok):  # the run's own measure: never the rounds'
        return {int(b): 0.0 for b in config["eval"]["budgets"]}

    _m, _t, info = warmup.warmup_model(config, run, accuracy)
    out = capsys.readouterr().out
    assert "round 1/3: loss" in out and f"accuracy 0.250 at the largest budget {top} (tiny.warmup.min_acc 0.50); " \
        "training round 2" in out
    assert "accuracy 0.625" in out and "round 2/3" in out and out.count("; done") == 1 and "round 3/3" not in out
    assert info["rounds"] == 2 and info["rounds_eval"]["accuracy"] == [0.25, 0.625] and info["accuracy"] == 0.0


def test_a_damaged_cached_warm_up_is_set_aside_and_made_again(tmp_path, monkeypatch, capsys):
    """From a review: a cached warm-up was trusted as long as its warmup.json existed; a damaged entry of the
    shared cache was used by every later run (or failed deep in safetensors) with the recorded, unchecked sha."""
    from arctl.backends.tiny import warmup

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    config = _micro_config(seed=987)
    run = tmp_path / "ws" / "runs" / "r1"
    run.mkdir(parents=True)

    def accuracy(m, t):
        return {int(b): 0.9 for b in config["eval"]["budgets"]}

    _m, _t, first = warmup.warmup_model(config, run, accuracy)
    target = warmup.warmup_dir(config)
    (weights,) = (target / "model").glob("*.safetensors")
    data = bytearray(weights.read_bytes())
    data[-100] ^= 0xFF  # a flipped byte in the tensors (still loads: only the checksum tells)
    weights.write_bytes(bytes(data))
    assert warmup.cache_problem(target) is not None
    _m, _t, again = warmup.warmup_model(config, run, accuracy)
    assert "is damaged" in capsys.readouterr().out
    assert warmup.cache_problem(target) is None and again["weights_sha256"] == first["weights_sha256"]
    assert len(list(target.parent.glob(f"{target.name}.damaged-*"))) == 1


def test_train_and_shipped_warm_ups_are_two_cache_entries_and_a_run_says_which_it_had(tmp_path, monkeypatch, capsys):
    """From a hunt: one cache entry per key served both sources, so ARCTL_TINY_WARMUP=train did nothing once the
    shipped copy was cached, and a cache an earlier `train` filled gave every later default run that warm-up,
    under the same run ids, unsaid. Now `train` has its own entry (<key>-trained), the default is the shipped
    copy (an entry trained into <key> by an earlier arctl is moved aside), and the run's record has the source."""
    import shutil

    from arctl.backends.tiny import warmup

    config, key, trained, accuracy, run = _counted_warm_ups(monkeypatch, tmp_path, seed=97)
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "maker"))
    _m, _t, made = warmup.warmup_model(config, run, accuracy)  # what arctl "ships" in this test
    shipped = tmp_path / "shipped"
    shutil.copytree(warmup.warmup_dir(config), shipped / key)
    weights = next((shipped / key / "model").glob("*.safetensors"))  # shipped from another machine kind: other
    data = bytearray(weights.read_bytes())  # weights than this one trains (its record names its own)
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    record = json.loads((shipped / key / "warmup.json").read_text())
    record["weights_sha256"] = warmup.weights_sha256(shipped / key / "model")
    (shipped / key / "warmup.json").write_text(json.dumps(record))
    monkeypatch.setattr(warmup, "SHIPPED", shipped)

    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "user"))
    _m, _t, info = warmup.warmup_model(config, run, accuracy)  # the shipped copy, cached
    assert info["source"] == "shipped" and Path(info["path"]).name == key and trained == [1]
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "train")
    _m, _t, mine = warmup.warmup_model(config, run, accuracy)
    assert trained == [1, 1], "ARCTL_TINY_WARMUP=train trained nothing: the shipped copy was cached"
    assert mine["source"] == "trained" and Path(mine["path"]).name == key + warmup.TRAINED_SUFFIX
    monkeypatch.delenv("ARCTL_TINY_WARMUP")
    _m, _t, again = warmup.warmup_model(config, run, accuracy)
    assert again["source"] == "shipped" and again["weights_sha256"] == record["weights_sha256"] != made["weights_sha256"]

    # an earlier arctl trained into <key>: the default run gets the shipped copy, the trained one is kept aside
    cache = tmp_path / "user" / "tiny-warmup"
    shutil.rmtree(cache / key)
    shutil.rmtree(cache / (key + warmup.TRAINED_SUFFIX))
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "train")
    monkeypatch.setattr(warmup, "SHIPPED", tmp_path / "none")
    warmup.warmup_model(config, run, accuracy)  # as before the fix: trained into <key>
    monkeypatch.setattr(warmup, "SHIPPED", shipped)
    assert (cache / key / "warmup.json").is_file() and trained == [1, 1, 1]
    legacy = json.loads((cache / key / "warmup.json").read_text())["weights_sha256"]
    monkeypatch.delenv("ARCTL_TINY_WARMUP")
    capsys.readouterr()
    _m, _t, info = warmup.warmup_model(config, run, accuracy)
    assert info["source"] == "shipped" and trained == [1, 1, 1]
    assert "was trained here, not the warm-start arctl ships" in capsys.readouterr().out
    assert json.loads((cache / (key + warmup.TRAINED_SUFFIX) / "warmup.json").read_text())["weights_sha256"] == legacy

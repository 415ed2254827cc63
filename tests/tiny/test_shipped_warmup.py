"""The warm-start arctl ships (arctl/backends/tiny/shipped/<key>/) is the tiny scale's default warm-up,
intact, and no older than the warm-up's code: `python benchmarks/ship_warmstart.py` rewrites it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from arctl.backends.tiny import warmup
from arctl.compose import resolve_experiment

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import ship_warmstart  # noqa: E402  benchmarks/ship_warmstart.py

REGENERATE = "run `python benchmarks/ship_warmstart.py` (16 min on two cores) and commit what it writes"


def _shipped() -> list[Path]:
    return sorted(p for p in warmup.SHIPPED.iterdir() if p.is_dir()) if warmup.SHIPPED.is_dir() else []


def test_one_warm_start_is_shipped_and_it_is_the_default_tiny_warm_up():
    shipped = _shipped()
    assert len(shipped) == 1, f"shipped warm-starts: {[p.name for p in shipped]}; {REGENERATE}"
    key = warmup.warmup_key(ship_warmstart.default_config())
    assert shipped[0].name == key, (
        f"the shipped warm-start {shipped[0].name} is not the default tiny config's ({key}): the model, the task, "
        f"the warm-up settings or the budgets changed; {REGENERATE}")
    # every arm of the paper's main and ablation experiments at tiny scale starts from it
    for experiment in ("main-grpo", "main-ar-base", "main-ar-linear", "ablation-vr", "ablation-decouple", "ablation-dense"):
        keys = {warmup.warmup_key(r.config) for r in resolve_experiment(experiment, scale="tiny")}
        assert keys == {key}, experiment


def test_the_shipped_weights_are_the_recorded_ones_and_load():
    from transformers import Qwen2ForCausalLM

    from arctl.backends.tiny.tokenizer import load_tokenizer

    (folder,) = _shipped()
    info = json.loads((folder / "warmup.json").read_text())
    assert warmup.weights_sha256(folder / "model") == info["weights_sha256"]
    config = ship_warmstart.default_config()
    assert info["accuracy"] >= float(config["tiny"]["warmup"]["min_acc"])
    assert set(info["accuracy_per_budget"]) == {str(b) for b in config["eval"]["budgets"]}
    model = Qwen2ForCausalLM.from_pretrained(str(folder / "model"))
    tok = load_tokenizer(folder / "tokenizer")
    assert model.config.vocab_size == len(tok)
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())
    for field in ("machine", "written", "commit", "micro_reference_warmup_sha256"):
        assert info["shipped"].get(field), field


def test_the_shipped_warm_start_is_no_older_than_the_warm_up_code():
    """A change to the warm-up's code changes the micro run's warm-up, whose sha256 the reference of
    the shipping machine's kind holds (tests/tiny/test_reproducible.py makes that reference current):
    the shipped warm-start records the one it was trained beside."""
    (folder,) = _shipped()
    shipped = json.loads((folder / "warmup.json").read_text())["shipped"]
    current = ship_warmstart.micro_reference_sha(shipped["machine"])
    if current is None:
        pytest.fail(f"no micro reference for the shipping machine's kind {shipped['machine']!r}")
    assert shipped["micro_reference_warmup_sha256"] == current, (
        f"the micro warm-up's reference changed since the warm-start was shipped (the warm-up's code did); {REGENERATE}")

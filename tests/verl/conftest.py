"""Fixtures of the verl-backend tests. Every test here is marked ``verl`` and skips if verl is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from extras import NO_VERL, verl_missing  # tests/support/extras.py

VERL_MISSING = verl_missing()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/verl/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.verl)
            if VERL_MISSING:
                item.add_marker(pytest.mark.skip(reason=NO_VERL))


@pytest.fixture(scope="session")
def paper_config():
    from arctl.compose import resolve_experiment

    return resolve_experiment("main-ar-uniform", scale="paper")[0].config


@pytest.fixture(scope="session")
def tokenizer(make_bpe_tokenizer):
    """A tiny byte-level BPE tokenizer with ``<eos>`` and ``</think>`` specials (built locally, no hub)."""
    corpus = [
        "Let me think. 1 + 2 = 3.\n\nSo the answer is 3.",
        "...\n\n...\n\n",
        "\n\n**Final Answer**\n\\boxed{3}",
        "What is 1 + 2? Let's think step by step and output the final answer within \\boxed{}.",
    ] * 20
    return make_bpe_tokenizer(corpus, 300, pad_token="<unk>")


@pytest.fixture(scope="session")
def tiny_model(tokenizer):
    """A tiny random Qwen2 (2 layers, hidden 64) over the tokenizer's vocabulary, float32, eval mode."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        attn_implementation="sdpa",
    )
    return Qwen2ForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def r1_dir(tmp_path_factory):
    """A local DeepSeek-R1-Distill-Qwen stand-in (tests/support/r1_like.py): the tokenizer's shape (no unk,
    DeepSeek specials, no <|im_end|>) and a tiny qwen2 model over it, as a Hugging Face model directory."""
    import r1_like  # tests/support/r1_like.py

    path = tmp_path_factory.mktemp("r1-like")
    r1_like.build(path)
    return path


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """``ARCTL_DATA_DIR`` holding every dataset file the paper scale's runs read (empty files: only their
    existence is checked before a launch). A test module may define its own ``data`` (real files)."""
    from arctl.backends.verl.data import DATASETS

    root = tmp_path / "data"
    for name in ("deepscaler/train.parquet", *(f"{d}/test.parquet" for d in DATASETS if d != "deepscaler")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")
    monkeypatch.setenv("ARCTL_DATA_DIR", str(root))
    return root

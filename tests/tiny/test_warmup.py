"""The warm-up: packed examples train exactly like padded ones; a stop during it caches nothing."""

import numpy as np
import torch

from arctl.algo.prompts import InsertedTokens
from arctl.backends.tiny import task
from arctl.backends.tiny.model import build_model, model_config
from arctl.backends.tiny.tokenizer import build_tokenizer
from arctl.backends.tiny.warmup import pack_examples, training_example

MICRO_MODEL = dict(hidden_size=32, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64,
                   tie_embeddings=True, max_position_embeddings=256)
KNOBS = dict(min_terms=2, max_terms=6, filler_prob=0.3, summary_finish_steps=2, summary_continue_prob=0.5)


def _examples(tok, n, seed):
    rng = np.random.default_rng(seed)
    inserted = InsertedTokens.from_tokenizer(tok)
    wk = dict(truncate_prob=0.5)
    return [training_example(p, rng, tok, inserted, KNOBS, wk) for p in task.make_problems(rng, n, 2, 6)]


def test_packing_puts_several_examples_per_row_and_keeps_them_apart():
    tok = build_tokenizer(6)
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
    tok = build_tokenizer(6)
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

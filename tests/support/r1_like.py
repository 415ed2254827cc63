"""A local stand-in for DeepSeek-R1-Distill-Qwen-1.5B, built without a download: its tokenizer's shape
and a tiny Qwen2 over it.

- tokenizer: byte-level BPE, **no unk token**, 151,643 base tokens (a BPE trained on a small corpus,
  padded with unreachable tokens), then R1-Distill's added tokens at ids 151,643-151,664
  (``<｜end▁of▁sentence｜>`` EOS, ``<｜User｜>``, ``<｜Assistant｜>``, ``<｜begin▁of▁sentence｜>`` BOS,
  ``<think>``, ``</think>``, ...) and no ``<|im_start|>``/``<|im_end|>``; its chat template renders
  ``BOS <｜User｜>question<｜Assistant｜><think>\\n`` like R1-Distill's;
- model: ``Qwen2ForCausalLM`` (``model_type`` qwen2, as R1-Distill's config.json says), hidden 32,
  2 layers, untied embeddings, vocab 151,936, random weights with one deterministic change so that a
  verifier reward *varies* (a random model never writes ``\\boxed{1}``): hidden dimension 0 carries a
  constant from the embeddings, and the lm_head reads it only for a few tokens (``\\boxed{1}``,
  ``\\boxed{2}``, ``</think>``, EOS, a filler word), which therefore take most of the probability
  mass whatever the context. Rewards then come out 0 or 1 by chance, the advantages are almost never all
  zero (:data:`FAVOURITES`), and the update moves the weights: what an end-to-end test of training needs.

``build(directory)`` writes both as a Hugging Face model directory (``config.json``, weights,
``tokenizer.json``, ``tokenizer_config.json``) and returns the tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_BASE = 151_643
VOCAB_SIZE = 151_936  # the config's (padded) vocabulary, as R1-Distill-Qwen-1.5B's
ADDED = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<|EOT|>", "<think>",
         "</think>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
         "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
         "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]  # ids 151,643 ... 151,664
EOS, BOS = ADDED[0], ADDED[3]
ANSWERS = ["\\boxed{1}", "\\boxed{2}"]  # plain added tokens: the model's favourites
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"
)
CORPUS = [
    "What is 1 + 0? Let's think step by step and output the final answer within \\boxed{}.",
    "What is 1 + 1? Let's think step by step and output the final answer within \\boxed{}.",
    "Let me think. The sum is 2, so the answer is \\boxed{2}.",
    "...\n\n...\n\n",
    "\n\n**Final Answer**\n\\boxed{1}",
    "Wait, let me check this again. think think think",
    "<｜tool▁outputs▁end｜>",
] * 20


def build_tokenizer():
    """The R1-Distill-shaped tokenizer (see the module docstring)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    small = Tokenizer(models.BPE())
    small.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    small.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    learned = json.loads(small.to_str())["model"]
    vocab = dict(learned["vocab"])
    for i in range(VOCAB_BASE - len(vocab)):  # unreachable fillers: the ids of the added tokens match R1's
        vocab[f"<unused_{i}>"] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))  # no unk token, as R1's
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(ADDED)
    tok.add_tokens(ANSWERS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=EOS)
    fast.chat_template = CHAT_TEMPLATE
    assert fast.convert_tokens_to_ids(EOS) == VOCAB_BASE and fast.convert_tokens_to_ids("</think>") == VOCAB_BASE + 6
    assert fast.unk_token is None and "<|im_end|>" not in fast.get_vocab()
    return fast


# the favourites' logits whatever the context (hidden dim 0 after the final RMSNorm is 4 / rms = 4 * sqrt(32) / 4):
# about 55% " think", 20% each answer, 0.6% </think>, 0.6% EOS, 4% the rest of the vocabulary. A summary
# scores 1 only if neither its thinking ended at EOS nor it wrote a second </think>: at these odds one in
# three thinkings still ends on its own, the reward is 0.39 and a step of verl's CPU loop (2 questions x 2
# samples x 2 budgets x 2 summaries) has every summary pair tied, hence no advantage, in 1.7% of steps
# (benchmarks/r1_like_odds.py, 3,000 simulated steps). With </think> 12.2 and EOS 12.0 (5% and 4%) the
# reward was 0.13 and 19% of steps had no advantage: a two-step test of "the update moves the weights"
# failed in CI.
FAVOURITES = {" think": 14.5, ANSWERS[0]: 13.5, ANSWERS[1]: 13.5, "</think>": 10.0, EOS: 10.0}
NORMED_DIM0 = 32 ** 0.5


def build_model(tokenizer, seed: int = 0, favourites: dict[str, float] | None = None):
    """The tiny Qwen2 over ``tokenizer`` (see the module docstring); ``favourites``: the logits of
    :data:`FAVOURITES` (None: those)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=64, max_position_embeddings=1024,
                      tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, rms_norm_eps=1e-6)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 4.0  # dimension 0: a constant in the residual stream ...
        for layer in model.model.layers:  # ... that no layer writes to
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        for text, logit in (FAVOURITES if favourites is None else favourites).items():  # ... that only they read
            (token,) = tokenizer.encode(text, add_special_tokens=False)
            model.lm_head.weight[token, 0] = logit / NORMED_DIM0
    return model


def next_token_probs(tokenizer, model, question: str = "What is 1 + 0?", thinking: str = "") -> object:
    """The model's next-token distribution (a float64 tensor over the vocabulary) after ``question``'s
    chat prompt and ``thinking``."""
    import torch

    text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True)
    prompt = tokenizer.encode(text, add_special_tokens=False) + tokenizer.encode(thinking, add_special_tokens=False)
    with torch.no_grad():
        return torch.softmax(model(torch.tensor([prompt])).logits[0, -1].double(), -1)


def build(directory: str | Path, seed: int = 0) -> object:
    """Write the tokenizer and the model to ``directory`` (a local HF model dir); return the tokenizer."""
    directory = Path(directory)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    model.generation_config.save_pretrained(directory)
    # loaded through AutoTokenizer with the class written (as R1's tokenizer_config names its own): with the
    # model's qwen2 type, AutoTokenizer would otherwise pick Qwen2's class and its default unk token
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.update(tokenizer_class="PreTrainedTokenizerFast", unk_token=None)
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    return tokenizer


def verl_inputs(root: str | Path) -> Path:
    """What verl's real loop on a CPU trains on: this model in ``root/model`` and verl parquet files
    written by ``arctl data prepare`` in ``root/data`` (deepscaler: 8 questions "What is 1 + k?";
    aime24: 2 of them). Returns ``root``."""
    import subprocess
    import sys

    root = Path(root)
    build(root / "model")
    questions = [{"problem": f"What is 1 + {i % 2}?", "answer": str(1 + i % 2)} for i in range(8)]
    (root / "train.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    (root / "aime.jsonl").write_text("\n".join(json.dumps(q) for q in questions[:2]))
    subprocess.run([sys.executable, "-m", "arctl.cli.main", "data", "prepare", "--out", str(root / "data"),
                    "--datasets", "deepscaler,aime24", "--no-hub", "--source", f"deepscaler={root / 'train.jsonl'}",
                    "--source", f"aime24={root / 'aime.jsonl'}"], check=True, capture_output=True, timeout=120)
    return root


# verl's real loop on a CPU at the smallest shapes that still train AR's trees (AR-uniform, 2 budgets x
# 2 summaries, 2 questions x 2 samples): what every test of that loop shares
VERL_CPU_LOOP = (
    "verl.device=cpu", "verl.tree_attention=dense", "verl.n_gpus_per_node=1", "thinking.budgets=[16,32]",
    "eval.budgets=[16,32]", "eval.datasets=[aime24]", "eval.final_datasets=[aime24]", "eval.n_samples=2",
    "summary.group_size=2", "summary.max_tokens=32", "rollout.n=2", "data.train_batch_size=2",
    "data.ppo_mini_batch_size=2", "data.max_prompt_length=64", "wandb.mode=offline",
)


def verl_experiment(description: str, *overrides: str) -> str:
    """An experiment file (one seed, arm ``ar-uniform``) of :data:`VERL_CPU_LOOP` then ``overrides``."""
    items = "".join(f"  - {json.dumps(o)}\n" for o in (*VERL_CPU_LOOP, *overrides))
    return (f"description: {json.dumps(description)}\ngroups: {{model: r1-distill-qwen-1.5b}}\nseeds: [0]\n"
            f"overrides:\n{items}arms:\n  ar-uniform: [algo=anytime, prior=uniform]\n")


def update_record(rows: dict) -> str:
    """What a failed "the weights moved" assertion should show: per step of a synced history
    (``{step: row}``) its grad norm, scores and advantage range."""
    keys = ("actor/grad_norm", "actor/pg_loss", "train/adv_var/brpo", "critic/advantages/min",
            "critic/advantages/max", "train/score@16", "train/score@32")
    return "; ".join(f"step {s}: " + ", ".join(f"{k}={row.get(k)}" for k in keys) for s, row in sorted(rows.items()))

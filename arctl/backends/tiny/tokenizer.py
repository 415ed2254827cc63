"""Word-level tokenizer of the toy task, built locally (no hub): ``tokenizers`` WordLevel on
whitespace, wrapped as a ``PreTrainedTokenizerFast`` so it saves and loads like any HF tokenizer."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, UNK = "<pad>", "<unk>"
# Words of the text that arctl.algo.prompts inserts between a thinking and its summary
# ("...\n\n...\n\n</think>" then "\n\n**Final Answer**\n"), split on whitespace.
INSERTED_WORDS = ("...", "**Final", "Answer**")


EOS = "<eos>"  # every toy task's end of summary


def build_tokenizer(vocabulary: list[str]) -> PreTrainedTokenizerFast:
    """The toy tokenizer of a task's ``vocabulary`` (:meth:`arctl.backends.tiny.tasks.ToyTask.vocabulary`):
    ids 0/1/2 are ``<pad>``, ``<unk>``, ``<eos>``, then the inserted words, then the task's words."""
    words = [PAD, UNK, EOS, *INSERTED_WORDS, *vocabulary]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, unk_token=UNK, eos_token=EOS, clean_up_tokenization_spaces=False
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    tokenizer.save_pretrained(str(path))


def load_tokenizer(path: Path) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast.from_pretrained(str(path))


def encode_words(tokenizer: PreTrainedTokenizerFast, words: list[str]) -> list[int]:
    """Token ids of a list of task words (one id per word); unknown words raise ValueError."""
    ids = tokenizer.convert_tokens_to_ids(words)
    if tokenizer.unk_token_id in ids:
        bad = [w for w, i in zip(words, ids) if i == tokenizer.unk_token_id]
        raise ValueError(f"tiny tokenizer: words not in the vocabulary: {bad[:5]}")
    return ids


def decode_words(tokenizer: PreTrainedTokenizerFast, ids: list[int]) -> list[str]:
    return tokenizer.convert_ids_to_tokens(list(ids))

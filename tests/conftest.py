"""Suite-wide test settings and shared fixtures. Area fixtures live in tests/<area>/conftest.py."""

import os
import sys
from pathlib import Path

import pytest

# Shared helpers live in tests/support/ (resolved.py, micro.py, bad_input.py, slurm_shims.py, wandb_reference.py,
# wandb_workspace.py, fresh_machine.py). Only that folder goes on sys.path: with tests/ itself there, a test
# folder would be importable as a package of its name (tests/verl as `verl` where verl is not installed).
sys.path.insert(0, str(Path(__file__).parent / "support"))

# Never talk to a W&B server from tests; never pick up a developer's key.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.pop("WANDB_API_KEY", None)
os.environ.pop("WANDB_SERVICE", None)  # each test process owns its W&B service (another's teardown waits for nothing)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The tiny warm-up cache is user-level (~/.cache/arctl): the suite keeps its own, shared by its tests
# (and by the jobs they start, which inherit the environment), and never touches the developer's.
if "ARCTL_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["ARCTL_CACHE"] = tempfile.mkdtemp(prefix="arctl-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ARCTL_CACHE"], ignore_errors=True)  # the suite's, not left in /tmp


@pytest.fixture(scope="session")
def make_bpe_tokenizer():
    """Build a tiny byte-level BPE tokenizer (HF PreTrainedTokenizerFast) with ``<unk>``, ``<eos>``
    and ``</think>`` specials from ``corpus`` — made locally, no hub."""

    def make(corpus: list[str], vocab_size: int, **special):
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<unk>", "<eos>", "</think>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator(corpus, trainer)
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", **special)

    return make

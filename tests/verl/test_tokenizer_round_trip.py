"""A tokenizer that does not give back the text it encodes makes every reward 0 for the whole run, without an error.
From a hunt of the verl token pipeline: R1-Distill's tokenizer_config.json names ``LlamaTokenizerFast``; where
transformers resolves that class to the slow ``LlamaTokenizer`` (an R1-Distill-Llama model; a release that no longer
maps ``qwen2`` to Qwen's class), every space and newline is dropped, the verifier finds no ``**Final Answer**`` and
scores 0. The smoke run's report warns, and the agent loop fails the first step with the line."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
import r1_like  # tests/support/r1_like.py

from arctl.algo.verify import DEEPSCALER, FINAL_ANSWER, GRADERS, ROUND_TRIP_TEXT, SOLUTION, round_trip_problem
from arctl.backends.verl.smoke import check_model

SAYS = "does not give back the text it encodes"


class Chars:
    """A character-level tokenizer that keeps everything, or (``newlines``) maps a newline to a space on the way in,
    as a SentencePiece normaliser does; ``unk``: gives back its unknown token for every letter."""

    unk_token = "<unk>"

    def __init__(self, newlines: bool = False, unk: bool = False):
        self.newlines, self.unk = newlines, unk

    def encode(self, text, add_special_tokens=False):
        text = text.replace("\n", " ") if self.newlines else text
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.unk_token if self.unk and chr(i).isalpha() else chr(i) for i in ids)


@pytest.mark.parametrize("grader", GRADERS)
def test_the_verifier_reads_the_answer_through_a_tokenizer_that_keeps_the_text(grader):
    assert round_trip_problem(Chars(), grader) is None
    assert round_trip_problem(Chars(unk=True), grader) is None  # a word-level vocabulary without these words: no telling


def test_a_tokenizer_that_turns_newlines_into_spaces_loses_the_final_answer_paragraph():
    """From a review: the first check asked only that the header survive; the graders read its paragraph."""
    said = round_trip_problem(Chars(newlines=True), DEEPSCALER, FINAL_ANSWER)
    assert said is not None and SAYS in said and "the deepscaler grader reads no answer (final_answer)" in said, said
    assert round_trip_problem(Chars(newlines=True), DEEPSCALER, SOLUTION) is None  # the last \\boxed{} is read anywhere


def _garbling(r1_dir):
    from transformers import LlamaTokenizerFast

    return LlamaTokenizerFast.from_pretrained(r1_dir)  # the class R1-Distill's tokenizer_config.json names


def test_the_stand_in_round_trips_and_the_slow_llama_class_does_not(r1_dir):
    from transformers import AutoTokenizer

    assert round_trip_problem(AutoTokenizer.from_pretrained(r1_dir)) is None
    said = round_trip_problem(_garbling(r1_dir))
    assert said is not None and SAYS in said and "reads no answer" in said and "\n" not in said, said
    assert round_trip_problem(_garbling(r1_dir), DEEPSCALER, SOLUTION) is None  # Elastic's answer survives it
    tok = _garbling(r1_dir)
    assert tok.decode(tok.encode(ROUND_TRIP_TEXT, add_special_tokens=False)) != ROUND_TRIP_TEXT  # the premise


def test_the_smoke_report_warns_of_a_tokenizer_that_garbles(tmp_path):
    good, llama = tmp_path / "good", tmp_path / "llama"
    r1_like.build(good)
    facts, warnings = check_model(str(good))
    assert facts["tokenizer_round_trips"] is True and warnings == []
    r1_like.build(llama)  # as an R1-Distill-Llama directory: AutoTokenizer takes the class its config names
    for name, key, value in (("tokenizer_config.json", "tokenizer_class", "LlamaTokenizerFast"),
                             ("config.json", "model_type", "llama")):
        doc = json.loads((llama / name).read_text())
        doc[key] = value
        (llama / name).write_text(json.dumps(doc))
    facts, warnings = check_model(str(llama))
    assert facts["tokenizer_round_trips"] is False
    [said] = [w for w in warnings if SAYS in w]
    assert said.startswith(f"model.path={llama}: the tokenizer (LlamaTokenizer)"), said


def test_the_agent_loop_fails_its_first_tree_with_the_line(r1_dir, paper_config, monkeypatch):
    import hydra
    import transfer_queue
    from transformers import AutoConfig
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry

    from arctl.backends.verl import plugin  # noqa: F401 - registration
    from arctl.backends.verl.overrides import check_overrides, verl_overrides

    recorded = []

    async def put(key, partition_id, fields=None, tag=None):
        recorded.append((key, partition_id, tag))

    monkeypatch.setattr(transfer_queue, "async_kv_put", put)
    cfg = copy.deepcopy(paper_config)
    cfg["model"]["path"] = str(r1_dir)
    composed = check_overrides(verl_overrides(cfg))
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry["arctl_tree"], trainer_config=DictConfigWrap(config=composed),
        server_manager=None, tokenizer=_garbling(r1_dir), processor=None,
        hf_model_type=AutoConfig.from_pretrained(r1_dir).model_type, dataset_cls=None,
        data_config=DictConfigWrap(composed.data), tools=ToolListWrap([]),
    )

    async def run():
        loop.loop = asyncio.get_running_loop()
        return await loop.run({"temperature": 1.0}, raw_prompt=[{"role": "user", "content": "What is 1 + 2?"}],
                              reward_model={"ground_truth": "3"}, uid="q0", session_id=0, extra_info={"split": "train"})

    with pytest.raises(ValueError, match=SAYS):
        asyncio.run(run())
    [(key, partition, tag)] = recorded
    assert (key, partition) == ("q0", "train") and SAYS in tag["arctl_error"]
    assert f"model.path={r1_dir}: the tokenizer" in tag["arctl_error"]  # where

"""A model whose chat template does not open the thinking (R1-Distill's templates before ~2025-02 end the
generation prompt at ``<｜Assistant｜>``, not ``<｜Assistant｜><think>\\n``) often answers without thinking: every
thinking length and every budget's cut changes, on the GPUs, silently. From a review of the verl path: nothing
checked it. The smoke run's report and the job's log (the agent loop's first prompt) now say so."""

from __future__ import annotations

import json

import pytest
import r1_like  # tests/support/r1_like.py

from arctl.algo.prompts import opens_thinking_problem
from arctl.backends.verl import agent_loop
from arctl.backends.verl.smoke import check_model

SAYS = "not with '<think>' and a newline"


def _prompt(tok) -> list[int]:
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 1 + 1?"}], add_generation_prompt=True,
                                  tokenize=True)
    return ids if isinstance(ids, list) else ids["input_ids"]


def _older_template(directory) -> None:
    """The model directory's chat template as R1-Distill's before ~2025-02: no ``<think>\\n`` after the assistant tag."""
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        jinja.write_text(jinja.read_text().replace("<think>\\n", ""))
    config = json.loads((directory / "tokenizer_config.json").read_text())
    if "chat_template" in config:
        config["chat_template"] = config["chat_template"].replace("<think>\\n", "")
        (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))


def test_the_smoke_report_warns_where_the_template_does_not_open_the_thinking(tmp_path):
    good, old = tmp_path / "good", tmp_path / "old"
    r1_like.build(good)
    facts, warnings = check_model(str(good))
    assert warnings == [] and facts["prompt_opens_thinking"] is True
    r1_like.build(old)
    _older_template(old)
    facts, warnings = check_model(str(old))
    assert facts["prompt_opens_thinking"] is False
    (said,) = warnings
    assert SAYS in said and "<｜Assistant｜>" in said and "\n" not in said, said


def test_the_job_log_says_it_once_per_worker(monkeypatch, capsys):
    tok = r1_like.build_tokenizer()
    assert opens_thinking_problem(tok, _prompt(tok)) is None
    tok.chat_template = r1_like.CHAT_TEMPLATE.replace("<think>\\n", "")
    bad = _prompt(tok)
    monkeypatch.setattr(agent_loop, "_PROMPT_CHECKED", [])
    assert SAYS in agent_loop.warn_once_if_thinking_is_not_opened(tok, bad)
    assert agent_loop.warn_once_if_thinking_is_not_opened(tok, bad) is None  # once per process
    out = capsys.readouterr().out
    assert out.count("arctl: WARNING") == 1 and SAYS in out


@pytest.mark.parametrize("text", ["What is 1 + 1?", "Answer: <think>"])
def test_a_tokenizer_without_a_think_token_has_nothing_to_check(make_bpe_tokenizer, text):
    tok = make_bpe_tokenizer(["what is one plus one", "the answer is two"], 300)
    assert "<think>" not in tok.get_vocab()
    assert opens_thinking_problem(tok, tok.encode(text)) is None

"""The documented limit of one override (4096 characters: arctl/compose/overrides.py) holds at its edge, and an unknown
``--scale`` is arctl's one line with its close match, not Hydra's "Could not find 'scale/...'". From a mutation hunt
of composition: ``>`` -> ``>=`` at the limit (the documented maximum refused, by a message that contradicts itself)
and the scale check skipped (Hydra's error, no "did you mean") passed every test. The limit is written here as a
number: a test that read it from the code would follow a wrong one."""

from __future__ import annotations

import pytest

from arctl.compose import SpecError, resolve_experiment


def _notes(length: int) -> str:
    text = "wandb.notes=" + "x" * (length - len("wandb.notes="))
    assert len(text) == length
    return text


def test_an_override_of_exactly_4096_characters_is_read_and_one_more_is_refused_naming_its_length():
    (run,) = resolve_experiment("main-grpo", [_notes(4096)], scale="tiny", seeds=[0])
    assert run.config["wandb"]["notes"] == "x" * (4096 - len("wandb.notes="))
    with pytest.raises(SpecError) as err:
        resolve_experiment("main-grpo", [_notes(4097)], scale="tiny", seeds=[0])
    text = str(err.value)
    assert "\n" not in text and "is 4097 characters long" in text and "at most 4096 characters" in text


def test_an_unknown_scale_is_one_line_with_its_close_match():
    with pytest.raises(SpecError) as err:
        resolve_experiment("main-grpo", [], scale="tinny", seeds=[0])
    text = str(err.value)
    assert "\n" not in text and "unknown scale 'tinny'" in text and "did you mean 'tiny'" in text
    assert "Could not find" not in text

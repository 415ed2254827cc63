"""Hydra's parse of an override, remembered per text (arctl.compose.overrides.parse_overrides): the same Override
objects Hydra's own parser gives, a copy per call (Hydra's applier is handed them), and errors raised every time."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from arctl.compose.experiment import list_experiments, load_experiment
from arctl.compose.overrides import parse_overrides

TEXTS = ["thinking.lam=0.7", "prior=linear", "+verl.overrides=[a,b]", "++tiny.x={a: 1, b: [2, 3]}", "wandb.notes='a,b'",
         "eval.grid='${arctl.grid:${scale.budgets},32}'", "optim={lr:2e-6}", "seed=3", "x=null", "a=1,2", "k=range(1,3)"]


def _shipped() -> list[str]:
    out = []
    for name in list_experiments():
        exp = load_experiment(name)
        out += exp.overrides + [t for ts in exp.scales.values() for t in ts] + [t for ts in exp.arms.values() for t in ts]
    return out


def test_the_parse_is_hydras_and_each_call_gets_its_own_copy():
    texts = TEXTS + _shipped()
    assert len(texts) > 50
    for _ in range(2):  # the second time from what the first remembered
        assert parse_overrides(texts) == OverridesParser.create().parse_overrides(texts)
    first, second = parse_overrides(["optim={lr:2e-6}"]), parse_overrides(["optim={lr:2e-6}"])
    assert first[0] is not second[0] and first[0]._value is not second[0]._value
    first[0]._value["lr"] = 1.0  # what an applier may do to what it is handed
    assert parse_overrides(["optim={lr:2e-6}"])[0].value() == {"lr": 2e-6}


@pytest.mark.parametrize("text", ["a=[1,", "a=${", "a=b=c'", "a b=1"])
def test_a_text_hydra_refuses_is_refused_every_time(text):
    for _ in range(2):
        with pytest.raises(OverrideParseException) as ours:
            parse_overrides([text])
        with pytest.raises(OverrideParseException) as hydras:
            OverridesParser.create().parse_overrides([text])
        assert str(ours.value) == str(hydras.value)

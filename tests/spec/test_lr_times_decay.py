"""``optim.lr`` x ``optim.weight_decay`` >= 1 is refused for a new run: AdamW's decoupled decay multiplies every
weight by 1 - lr x weight_decay at each step, <= 0 there. From a hunt of degenerate training: ``optim.lr=10
optim.weight_decay=10`` (each in its own range) flipped every weight x(-99) a step, the loss NaN by step 3."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("overrides", [("optim.lr=10", "optim.weight_decay=10"), ("optim.lr=0.5", "optim.weight_decay=2")])
def test_a_decay_that_flips_the_weights_is_refused_in_one_line(sandbox, overrides):
    err = sandbox.check_refused("show", "main-grpo", "--scale", "tiny", *overrides).err
    assert "optim.weight_decay" in err and ">= 1" in err and "well below 1" in err, err


def test_a_decay_below_one_is_composed(sandbox):
    res = sandbox.run("show", "main-grpo", "--scale", "tiny", "optim.lr=0.1", "optim.weight_decay=2")
    assert res.code == 0, res.err

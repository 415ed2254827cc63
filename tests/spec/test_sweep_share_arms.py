"""The sweep key ``share_arms``: a boolean, false by default; anything else is one error line and
`arctl sweep` writes and submits nothing (the bad-input contract of tests/support/bad_input.py)."""

from __future__ import annotations

import pytest
from bad_input import launch_args

from arctl.compose import SpecError
from arctl.compose.sweep import load_sweep

SWEEP = "description: x\nexperiments: [main-grpo, ablation-vr]\nseeds: [0]\n"


@pytest.mark.parametrize("value, expected", [(None, False), ("false", False), ("true", True), ("yes", True)])
def test_share_arms_is_a_boolean_false_by_default(sandbox, value, expected):
    text = SWEEP if value is None else SWEEP + f"share_arms: {value}\n"  # YAML 1.1: a bare yes is true
    (sandbox.specs / "sweeps" / "s.yaml").write_text(text)
    assert load_sweep("s").share_arms is expected


@pytest.mark.parametrize("value", ['"yes"', "1", "0", "[true]", "{a: 1}", "null", "''", "'" + "x" * 200 + "'"])
def test_a_share_arms_that_is_not_a_boolean_is_one_error_line_and_writes_nothing(sandbox, value):
    (sandbox.specs / "sweeps" / "s.yaml").write_text(SWEEP + f"share_arms: {value}\n")
    with pytest.raises(SpecError, match="share_arms must be true or false") as info:
        load_sweep("s")
    assert "\n" not in str(info.value) and "s.yaml: share_arms" in str(info.value) and len(str(info.value)) < 300
    for dry in ([], ["--dry-run"], ["--json"]):
        out = sandbox.check_refused("sweep", "s", *dry, *launch_args(sandbox))
        assert "share_arms must be true or false" in out.err


def test_share_arms_with_a_typo_suggests_the_key(sandbox):
    (sandbox.specs / "sweeps" / "s.yaml").write_text(SWEEP + "share_arm: true\n")
    with pytest.raises(SpecError, match="unknown key 'share_arm'.*did you mean 'share_arms'"):
        load_sweep("s")

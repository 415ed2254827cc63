"""`arctl resume RUN KEY=VALUE`: a resume keeps the run's frozen config, so an override is a mistake said in one line
(from a hunt: "no run, sweep or experiment 'optim.lr=1e-3'", which hid why)."""

from __future__ import annotations


def test_an_override_given_to_resume_is_one_line_saying_resume_keeps_the_frozen_config(sandbox):
    refused = sandbox.check_refused("resume", "lt_a_s0_0123456789", "optim.lr=1e-3", "--workdir", str(sandbox.ws))
    line = " ".join(refused.err.split())
    assert "arctl resume takes runs, not overrides: 'optim.lr=1e-3'" in line, refused.err
    assert "`arctl run EXPERIMENT optim.lr=1e-3`" in line

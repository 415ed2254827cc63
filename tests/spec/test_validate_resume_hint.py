"""From the mutation hunt of arctl/compose/validate.py: the error line of ``arctl resume`` for a hand-edited
config.yaml that breaks a rule of :func:`arctl.compose.validate._check` ended with the rule's hint "override it, e.g.
KEY=...", which ``arctl resume`` refuses ("takes runs, not overrides"). Now it says what a resume can do."""

from __future__ import annotations


def test_resuming_an_edited_config_is_not_told_to_override_a_key(sandbox):
    ids = sandbox.add_run_dirs()
    path = sandbox.ws / "runs" / ids[0] / "config.yaml"
    text = path.read_text()
    assert "betas: [" in text, text
    path.write_text(text.replace("betas: [", "betas: [0.5, ", 1))  # three betas: each in range, the pair rule broken
    err = sandbox.check_refused("resume", ids[0], "--force", "--executor", "slurm", "--workdir", str(sandbox.ws)).err
    assert "config.yaml" in err and "optim.betas" in err, err
    assert "override it" not in err, err  # resume takes no override: restore the file, or `arctl run` the change
    assert "restore the file if it was edited, or launch the changed config as a new run with `arctl run`" in err, err

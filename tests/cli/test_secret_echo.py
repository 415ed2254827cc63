"""What a refusal says it does not show is not shown elsewhere in the output (from a hunt of secrets):

- a dry run refused for a token pasted into ``cluster.secrets`` printed it in the config preview (YAML and
  ``--json``) above the line that said "(not shown: it may be a secret's value ...)";
- such a token holding a ``-`` failed the names' check first, which echoed it (``cluster.secrets=['hf_...'] is
  invalid``);
- a secret's value given to an argument that is no override (an experiment's name, --arm, --seeds, a run target,
  ...) was echoed by its error line: :func:`arctl.cli.common.fail` masks every secret arctl knows of.
"""

from __future__ import annotations

import json

import pytest
from bad_input import launch_args

PASTED = "hf_PASTEDnotinenv0123456789abcdef"  # a token pasted where a variable's name goes; no shell holds it


@pytest.mark.parametrize("as_json", [False, True], ids=["yaml", "json"])
def test_a_refused_dry_runs_preview_does_not_show_a_pasted_token(sandbox, as_json):
    done = sandbox.run("run", "main-grpo", f"cluster.secrets=[HOME,{PASTED}]", "--executor", "local", "--dry-run",
                       "--workdir", str(sandbox.ws), *(["--json"] if as_json else []))
    assert done.code == 2 and done.crash is None, done.err + (done.crash or "")
    assert "cluster.secrets[1] is no variable this shell sets (not shown" in done.err, done.err
    assert PASTED not in done.out + done.err
    if as_json:
        (run,) = json.loads(done.out)["runs"]
        assert run["config"]["cluster"]["secrets"] == ["HOME", "(not shown)"]  # a variable's name is shown
    else:
        assert "secrets: [HOME, (not shown)]" in done.out, done.out


@pytest.mark.parametrize("entry", ["hf_PASTED-notinenv0123456789", "sk-proj-PASTEDnotinenv0123", "$HF_TOKEN"])
def test_an_entry_of_cluster_secrets_that_is_no_name_is_refused_unechoed(sandbox, entry):
    err = sandbox.check_refused("run", "main-grpo", f"cluster.secrets=['{entry}']", *launch_args(sandbox)).err
    assert "cluster.secrets[0] is no environment variable's name (not shown" in err and entry not in err, err


KEY = "local-0123456789abcdef0123456789abcdef01234567"  # the W&B key of the launching shell


@pytest.mark.parametrize("args", [
    ["run", KEY], ["run", "main-grpo", "--arm", KEY], ["run", "main-grpo", "--seeds", KEY],
    ["run", "main-grpo", "--scale", KEY], ["run", "main-grpo", "--executor", KEY], ["sweep", KEY], ["show", KEY],
    ["status", KEY], ["logs", KEY], ["cancel", KEY], ["resume", KEY], ["cp", KEY, "copy.yaml"],
    ["report", "--figure", "main_training", "--where", KEY], ["data", "prepare", "--source", KEY],
], ids=lambda args: "-".join(a for a in args if a != KEY))
@pytest.mark.parametrize("where", ["environment", "netrc"])
def test_a_secret_given_to_an_argument_that_is_no_override_is_not_echoed(sandbox, monkeypatch, args, where):
    home = sandbox.root / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NETRC", raising=False)
    if where == "environment":
        monkeypatch.setenv("WANDB_API_KEY", KEY)
        shown = "<value of $WANDB_API_KEY>"
    else:
        monkeypatch.delenv("WANDB_API_KEY", raising=False)
        (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {KEY}\n")
        shown = "<value of WANDB_API_KEY (~/.netrc)>"
    workdir = [] if args[0] in ("cp", "data", "show") else ["--workdir", str(sandbox.ws)]
    err = sandbox.check_refused(*args, *workdir).err
    assert KEY not in err and shown in err, err


def test_the_longest_secret_is_masked_first(monkeypatch):
    """A secret that holds another (a token and its prefix in two variables) is masked whole."""
    from arctl.cli.common import secrets_masked

    monkeypatch.setenv("SHORT_TOKEN", "abcdefgh0123")
    monkeypatch.setenv("LONG_TOKEN", "abcdefgh0123456789")
    assert secrets_masked("x abcdefgh0123456789 y abcdefgh0123 z") == \
        "x <value of $LONG_TOKEN> y <value of $SHORT_TOKEN> z"

"""A secret written out in the lines frozen into config.yaml and the job script (``cluster.setup``,
``cluster.sbatch_extra``, ``verl.overrides``; :func:`arctl.compose.validate.written_secret`). From a hunt: the
first rule refused ``WANDB_API_KEY=<literal>`` only, and ``export GITHUB_TOKEN=ghp_...``, ``wandb login <key>``,
``export HF_TOKEN=hf_...`` (a token the launching shell did not hold) reached config.yaml, the sbatch script
(SLURM's state) and W&B's config. Refused wherever the line comes from, in one line that names the secret, not its
value, and says to pass it from the shell with ``cluster.secrets``; a reference to it is no literal."""

from __future__ import annotations

import pytest
from bad_input import launch_args

from arctl.compose.validate import written_secret

LITERAL = "NOTINENVliteral0123456789abcdef"  # a value no shell of the tests holds

# (line, the name the error gives): a secret's name given a literal, the logins that take one as an argument
WRITTEN = [
    (f"export GITHUB_TOKEN=ghp_{LITERAL}", "GITHUB_TOKEN"),
    (f"export HF_TOKEN=hf_{LITERAL}", "HF_TOKEN"),
    (f"export HF_TOKEN='hf_{LITERAL}'", "HF_TOKEN"),
    (f'HF_TOKEN="hf_{LITERAL}" python prep.py', "HF_TOKEN"),
    (f"export WANDB_API_KEY={LITERAL}", "WANDB_API_KEY"),
    (f"AWS_SECRET_ACCESS_KEY: {LITERAL}", "AWS_SECRET_ACCESS_KEY"),
    (f"--export=ALL,PGPASSWORD={LITERAL}", "PGPASSWORD"),
    (f"+actor_rollout_ref.env_vars.HF_TOKEN={LITERAL}", "HF_TOKEN"),
    (f"module load cuda && token={LITERAL}; hf auth login --token $token", "token"),  # a shell variable
    (f"python -c \"import wandb; wandb.login(key='{LITERAL}')\"", "key"),
    (f"wandb login {LITERAL}", "wandb login"),
    (f"wandb login --relogin --host https://wandb.example.com {LITERAL}", "wandb login"),
    (f"python -m wandb login {LITERAL} && echo ok", "wandb login"),
    (f"huggingface-cli login --token hf_{LITERAL}", "--token"),
    (f"hf auth login --token=hf_{LITERAL} --add-to-git-credential", "--token"),
]
# references, unsets, flags and config keys that only look like a secret's name: no literal secret
NOT_WRITTEN = [
    "export WANDB_API_KEY=$(cat ~/.wandb_key)", 'export WANDB_API_KEY="$MY_KEY"', "unset WANDB_API_KEY",
    "export HF_TOKEN=${HF_TOKEN}", 'export HF_TOKEN="$(cat /secure/hf)"', "export GITHUB_TOKEN=`cat ~/.gh`",
    "export HF_TOKEN=", 'export HF_TOKEN=""', "--export=ALL,HF_TOKEN", "wandb login", "wandb login --relogin",
    "wandb login $WANDB_API_KEY", 'wandb login "$(cat ~/.wandb_key)"', "hf auth login --token $HF_TOKEN",
    'huggingface-cli login --token "${HF_TOKEN}"',
    "export HF_HUB_DISABLE_IMPLICIT_TOKEN=1",  # a flag, shorter than any secret (SECRET_MIN_CHARS)
    "export TOKENIZERS_PARALLELISM=false", "export HF_TOKEN_PATH=/secure/hf_token_file",  # no secret's name
    "data.prompt_key=question_text",  # verl config keys: a key's tail, not a variable
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384000", "python prep.py --max_token_len=40960000",
    # (from the review of this rule) a setting about a secret, not the secret: its last word names no credential;
    # a path is no secret's value
    "export PRIVATE_MODEL_REPO=org/some-model", "export SECRETS_BACKEND=hashicorp-vault",
    "export SSL_PRIVATE_KEY=/etc/ssl/private/key.pem", "export GIT_SSH_KEY=~/.ssh/id_ed25519",
]


@pytest.mark.parametrize("line, name", WRITTEN)
def test_a_secret_written_out_as_a_literal_is_found_and_its_value_is_not_said(line, name):
    found = written_secret(line)
    assert found is not None and name in found[0], (line, found)
    assert LITERAL not in " ".join(found)


@pytest.mark.parametrize("line, carrier", [
    (f"python -c \"import wandb; wandb.login(key='{LITERAL}')\"", "WANDB_API_KEY"),
    (f"token={LITERAL}; hf auth login --token $token", "HF_TOKEN"),
    (f"export GITHUB_TOKEN=ghp_{LITERAL}", "GITHUB_TOKEN"),
])
def test_the_variable_to_carry_a_lower_case_names_secret_is_its_tools(line, carrier):
    """From the review of this rule: `wandb.login(key=...)` was told to pass `key` in cluster.secrets."""
    assert written_secret(line)[1] == carrier


@pytest.mark.parametrize("line", NOT_WRITTEN)
def test_a_reference_a_flag_or_a_config_key_is_no_written_secret(line):
    assert written_secret(line) is None


SETUP = f"export GITHUB_TOKEN=ghp_{LITERAL}"


def _refused(sandbox, *args: str, name: str = "GITHUB_TOKEN", said: str = ""):
    err = sandbox.check_refused(*args).err
    assert f"writes out {said or name} (not shown)" in err and f"cluster.secrets=[{name}]" in err, err
    assert LITERAL not in err, err


@pytest.mark.parametrize("override, name, said", [
    (f"cluster.setup=['{SETUP}']", "GITHUB_TOKEN", ""),
    (f"cluster.setup=['module load cuda', 'export HF_TOKEN=hf_{LITERAL}']", "HF_TOKEN", ""),
    (f"cluster.setup=['hf auth login --token hf_{LITERAL}']", "HF_TOKEN", "a Hugging Face token (`hf ... --token <token>`)"),
    (f"cluster.sbatch_extra=['--export=ALL,MYSVC_TOKEN={LITERAL}']", "MYSVC_TOKEN", ""),
], ids=["export", "second-line", "hf-login", "sbatch-extra"])
@pytest.mark.parametrize("command", ["run", "show"])
def test_a_secret_written_in_an_override_is_refused_with_the_way_to_pass_it(sandbox, monkeypatch, override, name,
                                                                            said, command):
    for variable in ("GITHUB_TOKEN", "HF_TOKEN", "MYSVC_TOKEN"):
        monkeypatch.delenv(variable, raising=False)  # a token the shell does not hold: only its spelling tells
    _refused(sandbox, command, "main-grpo", override, *(launch_args(sandbox) if command == "run" else []), name=name,
             said=said)


def test_the_w_and_b_key_given_to_wandb_login_is_refused_with_the_w_and_b_way(sandbox):
    err = sandbox.check_refused("run", "main-grpo", f"cluster.setup=['wandb login {LITERAL}']",
                                *launch_args(sandbox)).err
    assert "cluster.setup[0] writes out the W&B key" in err and "`wandb login` on the cluster" in err, err
    assert LITERAL not in err


def test_a_secret_written_in_a_spec_file_a_sweep_or_a_cluster_profile_is_refused(sandbox):
    """Every place a setup line comes from is composed into the config the rule reads."""
    experiments, sweeps = sandbox.specs / "experiments", sandbox.specs / "sweeps"
    (experiments / "leak.yaml").write_text(
        f"description: x\noverrides: [\"cluster.setup=['{SETUP}']\"]\narms:\n  a: [algo=grpo, prior=base]\n")
    _refused(sandbox, "run", "leak", *launch_args(sandbox))
    (experiments / "leak-arm.yaml").write_text(
        f"description: x\narms:\n  a: [algo=grpo, prior=base, \"cluster.setup=['{SETUP}']\"]\n")
    _refused(sandbox, "run", "leak-arm", *launch_args(sandbox))
    (sweeps / "leak.yaml").write_text(
        f"description: x\nexperiments: [main-grpo]\nseeds: [0]\noverrides: [\"cluster.setup=['{SETUP}']\"]\n")
    _refused(sandbox, "sweep", "leak", *launch_args(sandbox))
    (sandbox.specs / "conf" / "cluster").mkdir(parents=True)
    (sandbox.specs / "conf" / "cluster" / "mysite.yaml").write_text(
        f"# @package _global_\ncluster:\n  executor: slurm\n  setup: ['{SETUP}']\n")
    _refused(sandbox, "run", "main-grpo", "cluster=mysite", *launch_args(sandbox))
    (sandbox.specs / "conf" / "cluster" / "reads.yaml").write_text(  # read where the job runs: accepted
        "# @package _global_\ncluster:\n  executor: slurm\n  setup: ['export GITHUB_TOKEN=$(cat ~/.gh)']\n")
    done = sandbox.run("show", "main-grpo", "cluster=reads", "--json")
    assert done.code == 0, done.err

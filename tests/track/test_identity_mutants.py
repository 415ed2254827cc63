"""The W&B identity of a run as W&B and a verl job receive it, from a mutation hunt of arctl/track/identity.py.

Each case was a change of the module that the suite's identity tests let through:

- verl's tracker reads its tags from ``WANDB_TAGS``, which wandb splits on commas: a run's tags are one tag each;
- verl's tracker resumes the run named by ``WANDB_RUN_ID``: it is the W&B id the launcher records (W&B's
  characters), the one arctl's own writer opens for the same config;
- a shell's ``WANDB_ENTITY`` / ``WANDB_TAGS`` / ``WANDB_NOTES`` are removed from the process that opens a run whose
  config sets none, and only those;
- a W&B key written into a longer text of the config (``cluster.setup: "wandb login KEY && ..."``) is found;
- a variable that names where a secret lives (``..._HOST``) is no secret: a config may hold its value;
- a netrc file named ``~/.netrc`` is read under any home folder (one ending in ``X`` too);
- a Hugging Face token file of 8 characters (the shortest secret) holds a secret;
- the eval-only run of a cell is named ``{arm}-s{seed}-eval`` also when the config holds the schema's default name.
"""

from __future__ import annotations

from arctl.track.identity import WandbIdentity, netrc_secrets, secret_in, wandb_id


def _config(**wandb):
    return {"experiment": "main-grpo", "arm": "grpo", "seed": 3, "run_id": "main-grpo_grpo_s3_abc",
            "wandb": {"project": "p", "mode": "offline", **wandb}}


def test_verl_gets_each_tag_as_its_own_tag(tmp_path):
    """``wandb.tags=[paper, lam]``: W&B's UI shows two tags, ``paper`` and ``lam`` (wandb splits WANDB_TAGS on
    commas), the tags ``wandb.init`` gets in arctl's own writer."""
    identity = WandbIdentity.from_config(_config(tags=["paper", "lam"]), tmp_path)
    assert identity.env()["WANDB_TAGS"].split(",") == ["paper", "lam"]
    assert identity.env()["WANDB_TAGS"].split(",") == identity.init_kwargs({})["tags"]


def test_verl_resumes_the_w_and_b_id_the_writer_opens(tmp_path):
    """A ``wandb.id`` with characters W&B refuses (a run id of an experiment named ``a/b c``): verl's
    ``WANDB_RUN_ID`` is the same W&B id as arctl's writer opens, so both write one run, and it resumes."""
    identity = WandbIdentity.from_config(_config(id="exp/a b:c-g2"), tmp_path)
    env, kwargs = identity.env(), identity.init_kwargs({})
    assert env["WANDB_RUN_ID"] == kwargs["id"] == wandb_id("exp/a b:c-g2") == "exp-a-b-c-g2"
    assert env["WANDB_RESUME"] == kwargs["resume"] == "allow"


def test_the_shells_w_and_b_settings_the_config_does_not_give_are_removed_from_the_run(tmp_path):
    """A researcher's shell exports ``WANDB_ENTITY=team``: a run whose config gives no entity must not be sent to
    that entity by a later ``wandb sync``; the process opening it drops the variable. A config that gives the entity
    keeps the variable alone (wandb.init gets the config's)."""
    shell = {"WANDB_ENTITY": "team", "WANDB_TAGS": "t", "WANDB_NOTES": "n", "HOME": "/h"}
    plain = WandbIdentity.from_config(_config(), tmp_path).process_env(shell)
    assert {k: v for k, v in plain.items() if v is None} == {"WANDB_ENTITY": None, "WANDB_TAGS": None,
                                                             "WANDB_NOTES": None}
    given = WandbIdentity.from_config(_config(entity="lab", tags=["x"], notes="why"), tmp_path).process_env(shell)
    assert not any(v is None for v in given.values())
    assert WandbIdentity.from_config(_config(), tmp_path).process_env({"HOME": "/h"}).get("WANDB_ENTITY", 1) == 1


def test_a_user_who_turned_w_and_b_error_reports_on_keeps_them(tmp_path):
    """``WANDB_ERROR_REPORTING=true`` in the shell stays; an offline run's default (false) fills only its absence."""
    identity = WandbIdentity.from_config(_config(), tmp_path)
    assert identity.process_env({"WANDB_ERROR_REPORTING": "true"}) == {"WANDB_MODE": "offline"}
    assert identity.process_env({}) == {"WANDB_MODE": "offline", "WANDB_ERROR_REPORTING": "false"}


def test_a_key_inside_a_setup_command_is_found_and_not_shown(tmp_path):
    """``cluster.setup: ["wandb login KEY && module load cuda"]`` would freeze the key into config.yaml and the job
    script: it is found inside the longer text, and the answer names the key, not the value."""
    key = "0123456789abcdef0123456789abcdef01234567"
    config = {"cluster": {"setup": [f"wandb login {key} && module load cuda"]}}
    found = secret_in(config, {"WANDB_API_KEY": key, "HOME": str(tmp_path)})
    assert found == ("cluster.setup[0]", "WANDB_API_KEY")
    assert key not in repr(found)


def test_an_eval_only_run_with_the_schemas_default_name_is_the_cells_eval_run(tmp_path):
    """Every composed config holds ``wandb.name: ${arm}-s${seed}``; an eval-only run of it is ``grpo-s3-eval``
    of job type ``eval`` (beside the training run ``grpo-s3`` in the group), a user's own name stays."""
    default = WandbIdentity.from_config(_config(name="grpo-s3"), tmp_path, evaluates=True)
    assert (default.name, default.init_kwargs({})["job_type"]) == ("grpo-s3-eval", "eval")
    assert WandbIdentity.from_config(_config(name="mine"), tmp_path, evaluates=True).name == "mine"
    train = WandbIdentity.from_config(_config(name="grpo-s3"), tmp_path)
    assert (train.name, train.group, train.init_kwargs({})["job_type"]) == ("grpo-s3", "main-grpo", "train")


def test_a_config_may_name_the_host_of_a_secret(tmp_path):
    """``PGPASSWORD_HOST=db.lab.internal`` names where a password is used, not a password: a config that holds the
    host (``data.source: db.lab.internal``) is accepted; the password itself is found."""
    environ = {"PGPASSWORD_HOST": "db.lab.internal", "PGPASSWORD": "s3cr3t-pass-word", "HOME": str(tmp_path)}
    assert secret_in({"data": {"source": "db.lab.internal"}}, environ) is None
    assert secret_in({"data": {"source": "s3cr3t-pass-word"}}, environ) == ("data.source", "PGPASSWORD")


def test_a_netrc_under_a_home_of_any_name_is_read(tmp_path):
    """``NETRC=~/.netrc`` under ``HOME=/home/MAX``: the W&B login there is found (an online SLURM launch checks it),
    whatever letters the home folder's name ends in."""
    home = tmp_path / "MAX"
    home.mkdir()
    (home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password 0123456789abcdef0123\n")
    (home / ".netrc").chmod(0o600)
    assert list(netrc_secrets({"HOME": str(home), "NETRC": "~/.netrc"}).values()) == ["0123456789abcdef0123"]


def test_a_hugging_face_token_of_the_shortest_secret_length_is_a_secret(tmp_path):
    """A token file holding 8 characters (:data:`SECRET_MIN_CHARS`, the shortest value taken for a secret): a config
    that holds it is refused, naming the file, as an environment variable of that length is."""
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text("hf_abcde\n")
    found = secret_in({"cluster": {"setup": ["hf auth login --token hf_abcde"]}},
                      {"HF_HOME": str(tmp_path / "hf"), "HOME": str(tmp_path)})
    assert found is not None and found[0] == "cluster.setup[0]" and found[1].startswith("HF_TOKEN (")

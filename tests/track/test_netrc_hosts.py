"""The W&B login ``wandb login`` stores, as the pinned wandb (0.31) stores and reads it, and every other password
of the netrc file (from a hunt). wandb 0.31's default server is CoreWeave Forge's: ``wandb login`` writes
``machine api.forge.coreweave.com`` into ~/.netrc, where arctl knew ``api.wandb.ai`` only. So the login it had just
written was no login (an online SLURM launch was refused, telling the user to run ``wandb login``) and no secret (a
key pasted into ``cluster.setup`` reached config.yaml, the job script and SLURM's state); nor were a ``default``
entry, ``~/_netrc`` or ``NETRC=~/...``, which wandb reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input import launch_args

from arctl.track import identity
from arctl.track.identity import known_secrets, netrc_secrets

KEY = "FORGEplanted0123456789abcdef0123456789abcd"  # 40 characters, as wandb takes a key
OTHER = "ghp_plantedOTHER0123456789abcdef"
WANDB = str(Path(sys.executable).with_name("wandb"))


def test_the_wandb_hosts_are_the_installed_wandbs():
    """arctl copies them (importing them imports all of wandb, for every command): one home, checked here."""
    from wandb.sdk.lib import urls

    assert (identity.WANDB_DEFAULT_BASE_URL, identity.WANDB_FORGE_HOSTS) == (urls.DEFAULT_BASE_URL, urls.FORGE_HOSTS)


def _home(tmp_path: Path, name: str) -> dict[str, str]:
    home = tmp_path / name
    home.mkdir()
    return {"HOME": str(home), "PATH": os.environ["PATH"]}


def _wandb_finds(env: dict[str, str]) -> str | None:
    """The key wandb itself reads for its default server (or $WANDB_BASE_URL's) with ``env``, or None."""
    code = ("import wandb; from wandb.sdk.lib import wbauth; s = wandb.Settings(); "
            "print(wbauth.read_netrc_auth(host=s.base_url) or '')")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() or None


def test_the_login_wandb_login_writes_counts_as_a_login_and_a_secret(tmp_path):
    env = _home(tmp_path, "home")
    done = subprocess.run([WANDB, "login", "--no-verify", KEY], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "machine api.forge.coreweave.com" in (Path(env["HOME"]) / ".netrc").read_text()
    assert _wandb_finds(env) == KEY
    assert netrc_secrets(env) == {"WANDB_API_KEY (~/.netrc)": KEY}
    assert known_secrets(env)["WANDB_API_KEY (~/.netrc)"] == KEY


@pytest.mark.parametrize("layout", ["forge", "wandb.ai", "default", "_netrc", "NETRC~", "other-host-only", "none"])
def test_arctl_finds_a_wandb_login_exactly_where_wandb_does(tmp_path, layout):
    """As wandb 0.31 reads it (wandb/sdk/lib/wbauth/wbnetrc.py): $NETRC (``~`` expanded), else ~/.netrc, else
    ~/_netrc; the base URL's host, else the W&B host behind a Forge host, else the ``default`` entry."""
    env = _home(tmp_path, "home")
    home = Path(env["HOME"])
    other = f"machine github.com login me password {OTHER}\n"
    text = {"forge": f"{other}machine api.forge.coreweave.com login user password {KEY}\n",
            "wandb.ai": f"machine api.wandb.ai login user password {KEY}\n{other}",
            "default": f"{other}default login user password {KEY}\n",
            "_netrc": f"machine api.forge.coreweave.com login user password {KEY}\n",
            "NETRC~": f"machine api.forge.coreweave.com login user password {KEY}\n",
            "other-host-only": other, "none": None}[layout]
    if layout == "_netrc":
        (home / "_netrc").write_text(text)
    elif layout == "NETRC~":
        (home / "secrets").mkdir()
        (home / "secrets" / "netrc").write_text(text)
        env["NETRC"] = "~/secrets/netrc"
    elif text is not None:
        (home / ".netrc").write_text(text)
    found = _wandb_finds(env)
    assert found == (None if layout in ("other-host-only", "none") else KEY), found
    assert sorted(netrc_secrets(env).values()) == ([KEY] if found else [])
    # every password of the file is a secret, a W&B login's or not
    passwords = identity.netrc_passwords(env)
    assert sorted(passwords.values()) == sorted(([KEY] if found else []) + ([OTHER] if other in (text or "") else []))
    assert {k: v for k, v in known_secrets(env).items() if v == OTHER} == (
        {"password (~/.netrc, github.com)": OTHER} if other in (text or "") else {})


def test_the_verl_jobs_login_check_takes_the_login_wandb_login_writes(tmp_path):
    """The verl job's own check (ray_job.NETRC_LOGIN_CHECK), run as its script runs it: it failed a job that had
    the login ``wandb login`` writes ("neither WANDB_API_KEY nor a W&B login")."""
    from arctl.backends.verl.ray_job import NETRC_LOGIN_CHECK

    for name, text, code in (("forge", f"machine api.forge.coreweave.com login user password {KEY}\n", 0),
                             ("default", f"default login user password {KEY}\n", 0),
                             ("other", f"machine github.com login me password {OTHER}\n", 1)):
        env = _home(tmp_path, name)
        (Path(env["HOME"]) / ".netrc").write_text(text)
        done = subprocess.run([sys.executable, "-c", NETRC_LOGIN_CHECK], env={**env, "PYTHONPATH": os.getcwd()},
                              capture_output=True, text=True, timeout=120)
        assert (name, done.returncode) == (name, code), done.stderr


def test_an_online_slurm_launch_takes_the_login_and_an_override_holding_any_netrc_password_is_refused(
        sandbox, monkeypatch):
    """The dry run makes the launch's check (launcher.online_key_problem): it refused the login `wandb login` wrote."""
    home = sandbox.ws.parent / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for name in ("NETRC", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    (home / ".netrc").write_text(f"machine api.forge.coreweave.com\n  login user\n  password {KEY}\n"
                                 f"machine github.com login me password {OTHER}\n")
    result = sandbox.run("run", "main-grpo", "wandb.mode=online", "--dry-run", *launch_args(sandbox))
    assert result.code == 0, result.err
    for override, said in ((f"cluster.setup=['wandb login {KEY}']", "WANDB_API_KEY (~/.netrc)"),
                           (f"wandb.notes={OTHER}", "password (~/.netrc, github.com)")):
        result = sandbox.check_refused("run", "main-grpo", override, *launch_args(sandbox))
        assert f"the value of {said} is written" in result.err and KEY not in result.err \
            and OTHER not in result.err, result.err

"""Which secrets of the launching shell arctl knows of, and the names ``cluster.secrets`` takes (from a hunt).

- By name (:func:`arctl.track.identity.is_secret_name`): the first rule (names ending in _TOKEN, _API_KEY,
  _SECRET*, _PASSWORD, _PASSWD) missed PGPASSWORD, KAGGLE_KEY, SSH_PRIVATE_KEY, GITHUB_PAT, HF_TOKEN_2,
  OPENAI_APIKEY: a SLURM submission gave them to sbatch (which stores the environment with the job), and a config
  holding their value was accepted. The wider rule must still leave the shell's, CI's and SLURM's own variables
  alone (a harmless one taken for a secret would refuse a config that holds its value, a path say).
- From files: the Hugging Face token ``hf auth login`` stores, as the W&B key in ~/.netrc already was.
- ``cluster.secrets``: a token pasted in place of a variable's name was frozen into config.yaml, and a name the
  shell does not set was submitted without a word; a resume of a run frozen so still goes.
- The verl job script's W&B fallback: an online run's job fell back to offline whenever WANDB_API_KEY was not
  exported (always, on SLURM, unless cluster.secrets names it), a W&B login in ~/.netrc or not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input import launch_args

from arctl.track.identity import is_secret_name, known_secrets, secret_in

PLANTED = "planted0123456789abcdef0123456789abcdef"

# secrets the first rule missed (a hunt's list, and their kin)
MISSED = ["PGPASSWORD", "KAGGLE_KEY", "SSH_PRIVATE_KEY", "GITHUB_PAT", "HF_TOKEN_2", "OPENAI_APIKEY", "MYSQL_PWD",
          "SLURM_JWT", "CI_JOB_JWT_V2", "GPG_PASSPHRASE", "DB_PASS", "AZURE_CLIENT_SECRET", "HF_TOKEN2", "API_KEYS",
          "AWS_ACCESS_KEY_ID", "DOCKER_CREDENTIALS", "hf_token"]
# harmless: the shell's, a login's, CI's and SLURM's own variables (those SLURM sets in a job, and sbatch's
# input ones), and variables whose value is a place (a path a config may well hold)
HARMLESS = [
    "PWD", "OLDPWD", "HOME", "PATH", "SHELL", "SHLVL", "LANG", "TERM", "USER", "LOGNAME", "_", "MAIL", "HOSTNAME",
    "TOKENIZERS_PARALLELISM", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_ASKPASS", "GIT_ASKPASS", "SUDO_ASKPASS",
    "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "KEYTIMEOUT", "GPG_AGENT_INFO", "GPG_TTY", "GNOME_KEYRING_CONTROL",
    "GNOME_KEYRING_PID", "KRB5CCNAME", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
    "HF_TOKEN_PATH", "HF_HOME", "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE", "ACTIONS_ID_TOKEN_REQUEST_URL", "GITHUB_PATH", "GITHUB_ENV", "CI", "MAX_TOKENS",
    "WANDB_MODE", "WANDB_BASE_URL", "NETRC", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "PYTHONPATH",
    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_CLUSTER_NAME", "SLURM_CONF", "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK", "SLURM_CPU_BIND", "SLURM_DISTRIBUTION", "SLURM_EXPORT_ENV", "SLURM_GPUS_ON_NODE",
    "SLURM_GTIDS", "SLURM_JOB_ACCOUNT", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_DEPENDENCY", "SLURM_JOB_END_TIME",
    "SLURM_JOB_GID", "SLURM_JOB_GPUS", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES", "SLURM_JOB_PARTITION", "SLURM_JOB_QOS", "SLURM_JOB_RESERVATION", "SLURM_JOB_START_TIME",
    "SLURM_JOB_UID", "SLURM_JOB_USER", "SLURM_LOCALID", "SLURM_MEM_PER_NODE", "SLURM_NNODES", "SLURM_NODEID",
    "SLURM_NODELIST", "SLURM_NPROCS", "SLURM_NTASKS", "SLURM_PRIO_PROCESS", "SLURM_PROCID", "SLURM_RESTART_COUNT",
    "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST", "SLURM_TASK_PID", "SLURM_TASKS_PER_NODE", "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_WORKING_CLUSTER", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
    "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT", "SLURM_UMASK", "SLURMD_NODENAME", "SBATCH_PARTITION",
    "SBATCH_ACCOUNT", "PMIX_SERVER_URI21", "PMIX_NAMESPACE", "PMIX_SECURITY_MODE",
]


def test_the_secrets_the_first_rule_missed_are_left_out_of_a_slurm_job_and_refused_in_a_config(monkeypatch):
    from arctl.compose import resolve_experiment
    from arctl.launch.launcher import LaunchItem, job_environment, left_out_secrets

    for name in [n for n in os.environ if is_secret_name(n)]:
        monkeypatch.delenv(name)
    for name in MISSED:
        monkeypatch.setenv(name, PLANTED + name)
    plain = LaunchItem("plain", resolve_experiment("ablation-vr", arms=["grpo"])[0])
    assert left_out_secrets([plain]) == sorted(MISSED)
    with job_environment([plain], scheduler=True):  # what sbatch is given (and stores with the job)
        assert [n for n in MISSED if n in os.environ] == []
    for name in MISSED:  # a config holding the value: refused, by its name
        assert secret_in({"cluster": {"setup": [f"export X={PLANTED}{name}"]}}, os.environ) == ("cluster.setup[0]", name)


def test_the_shells_cis_and_slurms_own_variables_are_no_secrets():
    """Leaving a harmless variable out of a SLURM job costs a line the launch prints; refusing a config that holds
    its value (a path) would refuse a valid config."""
    caught = [n for n in HARMLESS if is_secret_name(n)]
    assert caught == []
    environ = {name: f"/home/me/some/place/{name.lower()}" for name in HARMLESS}
    assert secret_in({"cluster": {"setup": [f"cd {v}" for v in environ.values()]}}, environ) is None


def test_a_pgpassword_in_cluster_setup_is_refused_unechoed(sandbox, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", PLANTED)
    result = sandbox.check_refused("run", "main-grpo", f"cluster.setup=['export PGPASSWORD={PLANTED}']",
                                   *launch_args(sandbox))
    assert "$PGPASSWORD" in result.err and "planted" not in result.err, result.err


def _hf_environment(monkeypatch, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_TOKEN_PATH", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.mark.parametrize("where", ["default", "HF_HOME", "HF_TOKEN_PATH", "XDG_CACHE_HOME", "stored_tokens"])
def test_the_hugging_face_token_of_the_login_file_is_refused_in_a_config(sandbox, monkeypatch, tmp_path, where):
    """As the W&B key in ~/.netrc (tests/cli/test_bad_input.py): `huggingface-cli login --token hf_...` in
    cluster.setup was frozen into config.yaml and the job script, the token known to arctl only from a file."""
    home = _hf_environment(monkeypatch, tmp_path)
    token = "hf_" + PLANTED
    file = {"default": home / ".cache" / "huggingface" / "token", "HF_HOME": tmp_path / "hf" / "token",
            "HF_TOKEN_PATH": tmp_path / "elsewhere" / "my-token", "XDG_CACHE_HOME": tmp_path / "xdg" / "huggingface" /
            "token", "stored_tokens": home / ".cache" / "huggingface" / "stored_tokens"}[where]
    if where in ("HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(where, str(file.parent if where == "HF_HOME" else file.parent.parent))
    elif where == "HF_TOKEN_PATH":
        monkeypatch.setenv(where, str(file))
    file.parent.mkdir(parents=True)
    file.write_text(f"[work]\nhf_token = {token}\n" if where == "stored_tokens" else token + "\n")
    setup = f"cluster.setup=['huggingface-cli login --token {token}']"
    for args in (["run", "main-grpo", setup, *launch_args(sandbox)], ["show", "main-grpo", setup]):
        result = sandbox.check_refused(*args)
        assert "the value of HF_TOKEN (" in result.err and PLANTED not in result.err, result.err
    assert list(known_secrets(dict(os.environ)).values()) == [token]
    file.unlink()  # no such login: no known value; the login's spelling is still a token written out
    err = sandbox.check_refused("show", "main-grpo", setup).err  # (tests/spec/test_setup_secrets.py)
    assert "writes out a Hugging Face token" in err and PLANTED not in err, err
    assert sandbox.run("show", "main-grpo", f"cluster.setup=['echo {token} > x']", "--json").code == 0  # unsaid


def test_an_unreadable_hugging_face_token_file_is_no_traceback(sandbox, monkeypatch, tmp_path):
    home = _hf_environment(monkeypatch, tmp_path)
    folder = home / ".cache" / "huggingface"
    folder.mkdir(parents=True)
    (folder / "token").mkdir()  # a folder where the file would be
    (folder / "stored_tokens").write_bytes(b"not \xe9 an ini file\n")
    assert known_secrets({"HOME": str(home)}) == {}
    assert sandbox.run("show", "main-grpo", "--json").code == 0


def _launch(sandbox, executor: str) -> list[str]:
    """The launch's options; on the local executor its dry run, which asks what the launch asks (executor_problem)
    and starts nothing where the check is missing (the SLURM shims refuse every submission)."""
    return ["--executor", executor, "--workdir", str(sandbox.ws), *(["--dry-run"] if executor == "local" else [])]


@pytest.mark.parametrize("executor", ["local", "slurm"])
def test_a_pasted_token_in_cluster_secrets_is_refused_unechoed(sandbox, monkeypatch, executor):
    """Never frozen into config.yaml (nor W&B's config), never shown in the error."""
    canary = "hf_sekritCanaryToken1234"
    monkeypatch.delenv(canary, raising=False)
    result = sandbox.check_refused("run", "main-grpo", f"cluster.secrets=[{canary}]", *_launch(sandbox, executor))
    assert "cluster.secrets[0] is no variable this shell sets" in result.err and "e.g. [HF_TOKEN]" in result.err
    assert "sekrit" not in result.err, result.err


@pytest.mark.parametrize("executor", ["local", "slurm"])
def test_a_cluster_secret_this_shell_does_not_set_is_refused(sandbox, monkeypatch, executor):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    args = ["run", "main-grpo", "cluster.secrets=[HF_TOKEN]", *_launch(sandbox, executor)]
    result = sandbox.check_refused(*args)
    assert ("main-grpo/grpo: cluster.secrets names HF_TOKEN, which this shell does not set: it takes the names of "
            "environment variables") in result.err, result.err
    monkeypatch.setenv("HF_TOKEN", "   ")  # set, but to nothing
    assert "names HF_TOKEN, which this shell does not set" in sandbox.check_refused(*args).err
    monkeypatch.setenv("HF_TOKEN", "hf_" + PLANTED)  # set: the dry run shows nothing refused
    done = sandbox.run(*args, *([] if executor == "local" else ["--dry-run"]), "--json")
    assert done.code == 0 and json.loads(done.out)["refused"] is None, done.out + done.err


def test_a_run_frozen_with_a_cluster_secret_resumes_where_this_shell_lacks_it(specs, tmp_path, cli, monkeypatch):
    """The check is the launch's: ``arctl resume`` cannot change a frozen config, and a name already frozen is no
    news. A name a resume adds is refused as at the first launch."""
    ws = tmp_path / "ws"
    run = ["run", "lt", "--arm", "a", "trainer.total_steps=3", "--executor", "debug", "--workdir", str(ws)]
    monkeypatch.setenv("HF_TOKEN", "hf_" + PLANTED)
    monkeypatch.setenv("ARCTL_TEST_FAIL_ARM", "a")  # fails after its first step
    doc = json.loads(cli(*run, "cluster.secrets=[HF_TOKEN]", "--json").stdout)
    (first,) = doc["submitted"]
    assert first["state"] == "FAILED", doc
    monkeypatch.delenv("ARCTL_TEST_FAIL_ARM")
    monkeypatch.delenv("HF_TOKEN")
    res = cli(*run, "cluster.secrets=[HF_TOKEN,GH_TOKEN]")  # GH_TOKEN: new at this resume, and not set
    assert res.returncode == 2 and "cluster.secrets names GH_TOKEN, which this shell does not set" in res.stderr, \
        res.stderr
    doc = json.loads(cli("resume", first["run_id"], "--workdir", str(ws), "--json").stdout)
    assert [(r["action"], r["state"]) for r in doc["submitted"]] == [("resume", "COMPLETED")], doc


def _wandb_check(tmp_path: Path, netrc: str | None, key: str | None) -> subprocess.CompletedProcess:
    """The job script's W&B check (ray_job.job_setup), run alone as the job would: WANDB_MODE=online, the job's
    HOME holding ``netrc`` (None: no file), WANDB_API_KEY ``key``; it prints the mode it leaves."""
    from arctl.backends.verl.ray_job import job_setup
    from arctl.compose import resolve_experiment

    config = resolve_experiment("main-ar-uniform", ["wandb.mode=online"], scale="paper")[0].config
    lines = job_setup(config, tmp_path / "run", python=sys.executable).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('if [ "${WANDB_MODE}" = online ]'))
    end = lines.index("fi", start)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if netrc is not None:
        (home / ".netrc").write_text(netrc)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "WANDB_MODE": "online", **({"WANDB_API_KEY": key} if key
                                                                                        else {})}
    script = "\n".join(["set -euo pipefail", *lines[start:end + 1], 'echo "mode=$WANDB_MODE"'])
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_an_online_verl_job_logs_online_with_a_wandb_login_and_fails_at_once_without_a_key(tmp_path):
    """With `wandb login` done (~/.netrc) the job logs online, as the launch's check (online_key_problem) promised;
    with neither that nor WANDB_API_KEY it fails before Ray starts, saying why, where it used to say "logging
    offline" while Ray's runtime env told verl's TaskRunner to log online (which then failed for want of a key)."""
    login = tmp_path / "ok"
    login.mkdir()
    done = _wandb_check(login, f"machine api.wandb.ai\n  login user\n  password {PLANTED}\n", None)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "mode=online", ""), done
    keyed = tmp_path / "keyed"
    keyed.mkdir()
    done = _wandb_check(keyed, None, PLANTED)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "mode=online", ""), done
    for name, netrc in (("none", None), ("other", f"machine github.com login me password {PLANTED}\n")):
        folder = tmp_path / name
        folder.mkdir()
        done = _wandb_check(folder, netrc, None)
        assert done.returncode == 1 and done.stdout == "", done
        assert ("wandb.mode=online, but this job has neither WANDB_API_KEY nor a W&B login in "
                f"{folder / 'home' / '.netrc'}: run `wandb login` on the cluster") in done.stderr, done.stderr

"""An offline run talks to no W&B server, and takes no W&B settings from the shell that its config does not give.

From a hunt: wandb 0.31 builds its telemetry (OpenTelemetry metrics POSTed to ``/sdk/otel/v1/metrics``, with the W&B
login of ``~/.netrc`` as Basic auth) from the *process's* settings, not the run's: every offline run (the default)
opened a connection to W&B's host. And ``WANDB_ENTITY``, ``WANDB_TAGS`` and ``WANDB_NOTES`` of the shell went into
the run's .wandb file (a later ``wandb sync`` sent the run to that entity) where the config set none.

A real run is opened, logged and closed (:mod:`arctl.track.writer`) in a child process whose environment is a
researcher's: no ``WANDB_MODE`` (the suite's conftest sets one), every proxy variable and ``WANDB_BASE_URL`` pointing
at a listener of this test, a W&B login for it in ``~/.netrc``. Once the child has exited, every request it made
has been answered, so the listener's log is complete: it must be empty.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from arctl.track.wandbfile import FIELD_RUN, iter_records, read_wandb_header, record_field

SHELL = {"WANDB_ENTITY": "shellent", "WANDB_TAGS": "shelltag", "WANDB_NOTES": "shellnote"}

# a child that opens the run of the config (argv[1], JSON) in argv[2], logs two rows and closes it
CHILD = """
import json, sys
from arctl.track import writer
run = writer.open_run(json.loads(sys.argv[1]), sys.argv[2])
for step in (1, 2):
    writer.log_row(run, {"trainer/global_step": step, "train/loss": 1.0 / step})
sys.exit(0 if writer.close_run(run) else 3)
"""


class _Listener(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[str] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def _record(self):
        self.server.requests.append(f"{self.command} {self.path} auth={self.headers.get('Authorization')}")
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _record

    def log_message(self, *args):
        pass


@pytest.fixture
def listener():
    server = _Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _researcher_env(tmp_path: Path, port: int, extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without any W&B or proxy setting, pointed at the listener as a user's shell
    could be: proxies and W&B's server, with a W&B login for it in ~/.netrc."""
    home = tmp_path / "home"
    home.mkdir()
    netrc = home / ".netrc"
    netrc.write_text(f"machine 127.0.0.1\n  login user\n  password wandbkey_in_netrc_{'0' * 24}\n")
    netrc.chmod(0o600)
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("WANDB_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({"HOME": str(home), "WANDB_BASE_URL": url, "WANDB_SILENT": "true",
                "HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url, **extra})
    return env


def _run(tmp_path: Path, env: dict[str, str], wandb: dict | None = None) -> Path:
    """The run folder of a child's offline run (config: ``wandb``), after the child exited 0."""
    run_dir = tmp_path / "run"
    config = {"experiment": "quiet", "arm": "grpo", "seed": 0, "run_id": "quiet_grpo_s0_0123456789",
              "wandb": {"mode": "offline", **(wandb or {})}}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config), str(run_dir)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir


def _run_record(run_dir: Path):
    """The run record of the run's one .wandb file, as arctl's reader frames it."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = sorted(run_dir.glob("wandb/**/run-*.wandb"))
    for payload in iter_records(path.read_bytes(), lambda _msg: None, str(path)):
        if record_field(payload) == FIELD_RUN:
            return path, pb.Record.FromString(payload).run
    raise AssertionError(f"{path}: no run record")


def test_offline_run_sends_nothing(tmp_path, listener):
    """The default config (offline) with no W&B variable in the shell: no request reaches W&B's server or a proxy,
    and the run's file holds its rows."""
    run_dir = _run(tmp_path, _researcher_env(tmp_path, listener.server_address[1], {}))
    assert listener.requests == []
    path, _ = _run_record(run_dir)
    from arctl.track.wandbfile import read_wandb_file

    assert read_wandb_file(path).n_rows == 2


def test_shell_entity_tags_notes_stay_out_of_the_run(tmp_path, listener):
    """WANDB_ENTITY, WANDB_TAGS and WANDB_NOTES of the shell, a config that sets none of them: the .wandb file
    records none (what the dry run shows); the child's environment keeps them for anything else it runs."""
    env = _researcher_env(tmp_path, listener.server_address[1], SHELL)
    run_dir = _run(tmp_path, env)
    path, record = _run_record(run_dir)
    assert read_wandb_header(path).entity == ""
    assert (record.entity, list(record.tags), record.notes) == ("", [], "")
    assert listener.requests == []


def test_config_entity_tags_notes_win(tmp_path, listener):
    """Where the config sets them, the run records the config's, whatever the shell says."""
    env = _researcher_env(tmp_path, listener.server_address[1], SHELL)
    run_dir = _run(tmp_path, env, {"entity": "team", "tags": ["a", "b"], "notes": "why"})
    path, record = _run_record(run_dir)
    assert read_wandb_header(path).entity == "team"
    assert (record.entity, list(record.tags), record.notes) == ("team", ["a", "b"], "why")


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


@pytest.mark.parametrize("shell", [{}, {"WANDB_ERROR_REPORTING": "true"}], ids=["plain", "reporting-on"])
def test_verl_job_environment(tmp_path, shell):
    """A verl job (its setup, then what runs in it, here ``env``; ``scontrol`` and ``srun`` stubbed) of an offline
    run whose config sets no entity, tags or notes, launched from a shell that has them: the job's processes (verl's
    tracker opens its W&B run in them) get WANDB_MODE=offline, W&B's error reporting off unless the shell set it,
    and none of the shell's entity, tags and notes."""
    from extras import NO_VERL, verl_missing  # tests/support/extras.py

    if verl_missing():
        pytest.skip(NO_VERL)
    from arctl.backends.verl.ray_job import job_setup
    from arctl.compose import resolve_experiment

    config = resolve_experiment("main-ar-uniform", scale="paper")[0].config
    config = {**config, "cluster": {**config["cluster"], "nodes": 1}, "wandb": {**config["wandb"], "mode": "offline"}}
    assert not any(config["wandb"].get(k) for k in ("entity", "tags", "notes"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "scontrol", 'if [ "$1 $2" = "show hostnames" ]; then echo solo; fi\n')
    _stub(bin_dir, "srun", 'for a in "$@"; do [ "$a" = --ip-address ] && echo 10.0.0.1; done; exit 0\n')
    script = job_setup(config, tmp_path / "run") + f"\nenv > {tmp_path / 'job.env'}\n"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "SLURM_JOB_NODELIST": "solo",
           "SLURM_CPUS_PER_TASK": "2", "ARCTL_RAY_HEAD_WAIT_S": "0.2", **SHELL, **shell}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in (tmp_path / "job.env").read_text().splitlines() if "=" in line)
    assert seen["WANDB_MODE"] == "offline"
    assert seen["WANDB_ERROR_REPORTING"] == shell.get("WANDB_ERROR_REPORTING", "false")
    assert not set(SHELL) & set(seen)


def test_a_launch_names_the_shells_wandb_variables_its_runs_do_not_use(tmp_path, monkeypatch):
    """The runs no longer take WANDB_ENTITY/TAGS/NOTES from the shell (above); a user who relied on WANDB_ENTITY for
    online runs is told, by the dry run (and the launch: the same note) which config keys give them."""
    import json

    from typer.testing import CliRunner

    from arctl.cli.main import app

    args = ["run", "main-grpo", "--scale", "tiny", "--seeds", "0", "--executor", "debug", "--workdir",
            str(tmp_path / "ws"), "--dry-run", "--json"]
    monkeypatch.delenv("WANDB_ENTITY", raising=False)
    monkeypatch.delenv("WANDB_TAGS", raising=False)
    monkeypatch.delenv("WANDB_NOTES", raising=False)
    assert json.loads(CliRunner().invoke(app, args).stdout)["wandb_shell"] is None
    monkeypatch.setenv("WANDB_ENTITY", "team")
    monkeypatch.setenv("WANDB_NOTES", "a note")
    said = json.loads(CliRunner().invoke(app, args).stdout)["wandb_shell"]
    assert said.startswith("WANDB_ENTITY, WANDB_NOTES of this shell are not used") and "wandb.entity=..." in said, said
    assert json.loads(CliRunner().invoke(app, [*args, "wandb.entity=team", "wandb.notes=n"]).stdout)["wandb_shell"] is None
    assert not (tmp_path / "ws").exists()

"""Who holds a tiny warm-up's lock, and whether the cache has room for the entry, said before anything trains.

From a hunt of the warm-up cache: a run waiting for another run's warm-up said "waiting for the warm-up (another run
trains it)" for as long as a stopped process held the lock, naming no run, host or process (finding 8); and a cache on
a full disk was found only once the whole warm-up had trained, 16-24 min at tiny scale, as it was saved (finding 7)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from micro import MICRO  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.backends.base import get_backend
from arctl.backends.tiny import warmup, warmup_key
from arctl.track.phase import is_waiting

KEEP = ["tiny.warmup.steps=2", "tiny.warmup.batch_size=4", "tiny.warmup.seed=6262"]  # trained in a second


def _config() -> dict:
    return arm_config("main-grpo", "grpo", overrides=[*MICRO, *KEEP])


def _accuracy(config: dict):
    return lambda model, tok: {int(b): 0.9 for b in config["eval"]["budgets"]}


@pytest.fixture
def trained(monkeypatch) -> list:
    """The holder's record and whether the lock is held, as each warm-up trained saw them as it started."""
    seen: list = []
    real = warmup._train_into

    def recording(config, target, *args, **kwargs):
        lock = warmup_key.lock_path(target.name, target)
        seen.append((json.loads(warmup_key.holder_path(lock).read_text()), warmup_key.lock_held(lock)))
        return real(config, target, *args, **kwargs)

    monkeypatch.setattr(warmup, "_train_into", recording)
    return seen


def _run(tmp_path: Path, name: str = "r") -> Path:
    run = tmp_path / "ws" / "runs" / name
    run.mkdir(parents=True, exist_ok=True)
    return run


def test_the_run_that_trains_the_warm_up_is_recorded_beside_its_lock_until_it_ends(tmp_path, cache, trained):
    config = _config()
    warmup.warmup_model(config, _run(tmp_path, "mine_s0"), _accuracy(config))
    ((record, held),) = trained
    assert held and record["run"] == "mine_s0" and record["host"] == socket.gethostname()
    assert record["pid"] == os.getpid() and record["since"].endswith(" UTC")
    lock = warmup_key.lock_path(warmup.warmup_key(config), warmup.warmup_dir(config))
    assert not warmup_key.holder_path(lock).exists() and not warmup_key.lock_held(lock)  # removed, then released


def _hold(lock: Path, run_id: str):
    """Another process that holds ``lock`` as run ``run_id`` until its stdin closes."""
    code = ("import sys; from pathlib import Path; from filelock import FileLock; "
            "from arctl.backends.tiny.warmup_key import write_holder; "
            f"lock = FileLock({str(lock)!r}); lock.acquire(); write_holder(Path({str(lock)!r}), {run_id!r}); "
            "print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_waiting_run_names_the_run_that_holds_the_lock(tmp_path, cache, trained, capsys):
    """The phase (`arctl status`) and the job log name the holder's run, host, pid and start; the phase is not taken
    for the wait of a run for the run it starts from (``waiting for <run>``)."""
    config = _config()
    target = warmup.warmup_dir(config)
    target.parent.mkdir(parents=True)
    holder = _hold(warmup_key.lock_path(warmup.warmup_key(config), target), "theirs_s1")
    phases: list = []
    try:
        with pytest.raises(warmup.WarmupInterrupted):
            warmup.warmup_model(config, _run(tmp_path), _accuracy(config), should_stop=lambda: bool(phases),
                                on_phase=phases.append)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    who = f"run theirs_s1 (host {socket.gethostname()}, pid {holder.pid}, since "
    (phase,) = phases
    assert phase.startswith(f"waiting on the tiny warm-up: {who}") and phase.endswith(" UTC) trains it"), phase
    assert not is_waiting(phase)
    assert f"tiny warm-up: waiting for {who}" in capsys.readouterr().out
    assert trained == []


class _Full:
    """``shutil`` of warmup_key with a disk that has ``free`` bytes free."""

    def __init__(self, free: int):
        self.disk_usage = lambda path: SimpleNamespace(total=10**12, used=10**12 - free, free=free)


def test_a_cache_without_room_fails_the_job_before_the_warm_up_trains(tmp_path, cache, trained, monkeypatch):
    config = _config()
    need = warmup_key.entry_bytes(config)
    monkeypatch.setattr(warmup_key, "shutil", _Full(need - 1))
    key, target = warmup.warmup_key(config), warmup.warmup_dir(config)
    with pytest.raises(warmup.WarmupCacheError) as raised:
        warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    said = str(raised.value)
    assert said == (f"the tiny warm-up {key} needs ~{need / 2**20:.1f} MiB in the user cache (ARCTL_CACHE="
                    f"{tmp_path / 'cache'}) and its file system has {(need - 1) / 2**20:.1f} MiB free ({target.parent}): "
                    "free some space there, or set ARCTL_CACHE to a folder with room, then "
                    f"`arctl resume r --workdir {tmp_path / 'ws'}`")
    assert trained == [] and sorted(p.name for p in target.parent.iterdir()) == [f"{key}.lock"]
    monkeypatch.setattr(warmup_key, "shutil", _Full(need))  # room enough: trained
    warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    assert len(trained) == 1 and sum(p.stat().st_size for p in target.rglob("*") if p.is_file()) <= need


def test_the_launch_refuses_a_run_whose_warm_up_has_no_room(tmp_path, cache, monkeypatch):
    """Asked at the launch (and its dry run) for a key the cache must make; a cached key needs no room."""
    config = _config()
    backend = get_backend("tiny")
    monkeypatch.setattr(warmup_key, "shutil", _Full(1000))
    said = backend.launch_problem(config, None)
    assert said.startswith(f"the tiny warm-up {warmup.warmup_key(config)} needs ~") and "0.0 MiB free" in said
    chained = {**config, "trainer": {**config["trainer"], "init_from": "x"}}
    assert backend.launch_problem(chained, None) is None  # no warm-up of its own
    target = warmup.warmup_dir(config)
    target.mkdir(parents=True)
    (target / "warmup.json").write_text("{}")
    assert backend.launch_problem(config, None) is None


def test_the_dry_run_says_it_in_one_line(tmp_path, cache, monkeypatch):
    from typer.testing import CliRunner

    from arctl.cli.main import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    monkeypatch.setattr(warmup_key, "shutil", _Full(1000))
    out = CliRunner().invoke(app, ["run", "baselines-elastic", "--executor", "debug", "--workdir", str(tmp_path / "ws"),
                                   "--dry-run"])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "needs ~" in text and "0.0 MiB free" in text and "set ARCTL_CACHE to a folder with room" in text, text
    assert "(its job would fail as it starts)" in text


def test_the_room_counted_covers_the_entry_made():
    """:func:`entry_bytes` bounds what the entry takes (the shipped one here, a micro one above), without torch; its
    parameters are the model's, but for the tokenizer's few special words."""
    from arctl.backends.tiny.model import build_model, model_config, num_parameters
    from arctl.backends.tiny.tasks import toy_task
    from arctl.backends.tiny.tokenizer import build_tokenizer

    shipped = arm_config("main-grpo", "grpo")
    entry = warmup_key.shipped_entry(warmup_key.warmup_key(shipped))
    size = sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
    assert size <= warmup_key.entry_bytes(shipped) <= size * 1.05
    for config in (shipped, _config()):
        tok = build_tokenizer(toy_task(config["tiny"]["task"]).vocabulary())
        real = num_parameters(build_model(model_config(config["model"], len(tok), 0, 2), 0))
        assert 0 <= real - warmup_key.parameters(config) <= 8 * int(config["model"]["hidden_size"])

"""What a launch says of the tiny warm-ups its runs train before their first step (from a hunt of the warm-up cache:
a dry run of Elastic's arm said nothing of its 16-24 min warm-up, and on SLURM the other jobs of the key held their
allocations waiting for it): one line per key neither cached nor shipped, or shipped but ``ARCTL_TINY_WARMUP=train``;
read without torch."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from pids import unused_pid  # tests/support/pids.py

from arctl.backends.base import get_backend
from arctl.backends.tiny.settings import WARMUP_ENV
from arctl.backends.tiny.warmup_key import SHIPPED, TRAINED_SUFFIX, warmup_key
from arctl.compose import resolve_experiment


def _configs(experiment: str, seeds=None, overrides=()) -> list[dict]:
    return [r.config for r in resolve_experiment(experiment, list(overrides), "tiny", None, seeds)]


def test_a_key_neither_cached_nor_shipped_is_one_line_per_key(cache):
    notes = get_backend("tiny").launch_notes(_configs("baselines-elastic", [0, 1, 2]))
    key = warmup_key(_configs("baselines-elastic")[0])
    assert not (SHIPPED / key).exists()
    (line,) = notes
    assert line.startswith(f"the tiny warm-up {key} (3 runs) is not cached and arctl ships none for it: the first of "
                           "them trains it before its step 0 (") and line.endswith("), while the others of it wait")
    assert "; the shipped one took " in line
    (cache / key).mkdir(parents=True)
    (cache / key / "warmup.json").write_text("{}")
    assert get_backend("tiny").launch_notes(_configs("baselines-elastic")) == []  # cached: nothing to say


def test_the_shipped_key_says_nothing_unless_train_is_asked(cache, monkeypatch):
    configs = _configs("ablation-vr")
    key = warmup_key(configs[0])
    assert (SHIPPED / key / "warmup.json").is_file()
    assert get_backend("tiny").launch_notes(configs) == []
    monkeypatch.setenv(WARMUP_ENV, "train")
    (line,) = get_backend("tiny").launch_notes(configs)
    assert line.startswith(f"the tiny warm-up {key} (3 runs) is not cached and ARCTL_TINY_WARMUP=train: "), line
    (cache / (key + TRAINED_SUFFIX)).mkdir(parents=True)
    (cache / (key + TRAINED_SUFFIX) / "warmup.json").write_text("{}")
    assert get_backend("tiny").launch_notes(configs) == []


def test_a_run_that_starts_from_another_takes_no_warm_up(cache):
    configs = _configs("baselines-elastic")
    chained = [{**c, "trainer": {**c["trainer"], "init_from": "x"}} for c in configs]
    assert get_backend("tiny").launch_notes(chained) == []


def test_the_notes_import_no_torch():
    code = ("import sys; from arctl.backends.base import get_backend; from arctl.compose import resolve_experiment; "
            "get_backend('tiny').launch_notes([r.config for r in resolve_experiment('baselines-elastic', [], 'tiny', "
            "None, None)]); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_dry_run_and_the_launch_say_it(cache, tmp_path, monkeypatch):
    """`arctl run baselines-elastic --dry-run` (text and --json) and the launch itself say the warm-up its run trains
    first; the counting test backend trains the run, so nothing is trained here."""
    import json

    from typer.testing import CliRunner

    from arctl.cli.main import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCTL_SPECS", raising=False)
    args = ["run", "baselines-elastic", "--executor", "debug", "--workdir", str(tmp_path / "ws")]
    key = warmup_key(_configs("baselines-elastic")[0])
    dry = CliRunner().invoke(app, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    (note,) = json.loads(dry.stdout)["backend_notes"]
    assert note.startswith(f"the tiny warm-up {key} (1 run) is not cached")
    text = CliRunner().invoke(app, [*args, "--dry-run"])
    assert f"note: the tiny warm-up {key} (1 run)" in " ".join(text.stdout.split())
    monkeypatch.setenv("ARCTL_TEST_BACKEND", "count")
    monkeypatch.setenv("ARCTL_TEST_STEP_S", "0.01")  # its 100 steps: 1 s (ARCTL_TEST_STEPS, read by nothing, left 20 s)
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert f"note: the tiny warm-up {key} (1 run) is not cached" in " ".join(done.output.split())
    assert json.loads(CliRunner().invoke(app, [*args, "--dry-run", "--json"]).stdout)["backend_notes"] == []  # done


def _damaged_entry(cache, key: str, seconds: float = 1260.0):
    """A cache entry of ``key`` whose weights are not those its record names (cut after it was made)."""
    from arctl.backends.tiny.warmup import weights_sha256

    entry = cache / key
    (entry / "model").mkdir(parents=True)
    (entry / "model" / "model.safetensors").write_bytes(b"weights" * 100)
    sha = weights_sha256(entry / "model")
    (entry / "warmup.json").write_text(json.dumps({"key": key, "weights_sha256": sha, "seconds": seconds}))
    (entry / "model" / "model.safetensors").write_bytes(b"weights")
    return entry, sha


def test_a_damaged_entry_is_said_to_be_trained_again(cache):
    """From a hunt (r7 F2): an entry whose warmup.json is a file counted as cached, damaged or not, so a dry run said
    nothing of the full warm-up its first run trains after setting it aside. The check is the job's own
    (``cache_problem``), read without torch."""
    from arctl.backends.tiny.warmup import weights_sha256

    configs = _configs("baselines-elastic", [0, 1])
    key = warmup_key(configs[0])
    _entry, sha = _damaged_entry(cache, key)
    (line,) = get_backend("tiny").launch_notes(configs)
    now = weights_sha256(cache / key / "model")
    assert line.startswith(f"the tiny warm-up {key} (2 runs) is cached but damaged (weights sha256 {now[:12]}, "
                           f"recorded {sha[:12]}): the first of them sets it aside and trains it before its step 0 ("), line
    assert line.endswith("; it took 21 min when trained), while the others of it wait"), line


def test_an_intact_or_unchecked_entry_says_nothing(cache):
    configs = _configs("baselines-elastic")
    key = warmup_key(configs[0])
    entry, _sha = _damaged_entry(cache, key)
    (entry / "warmup.json").write_text(json.dumps({"key": key}))  # an older arctl's record: nothing to check
    assert get_backend("tiny").launch_notes(configs) == []


def _hold(lock, run_id: str | None):
    """A process that holds the warm-up lock ``lock`` (and records itself as run ``run_id``, unless None) until its
    stdin closes."""
    code = ("import sys; from pathlib import Path; from filelock import FileLock; "
            "from arctl.backends.tiny.warmup_key import write_holder; "
            f"lock = FileLock({str(lock)!r}); lock.acquire(); "
            + (f"write_holder(Path({str(lock)!r}), {run_id!r}); " if run_id else "")
            + "print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _release(proc) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.mark.parametrize("damaged", [False, True], ids=["not-cached", "damaged"])
def test_a_key_another_run_trains_now_names_that_run(cache, damaged):
    """From a hunt (r7 F2, cache finding 8): a key whose lock another launch's run held was said "the first of them
    trains it"; they wait for that run, named by the record it keeps beside the lock."""
    from arctl.backends.tiny.warmup_key import entry_dir, lock_path

    configs = _configs("baselines-elastic", [0, 1])
    key = warmup_key(configs[0])
    cache.mkdir(parents=True)
    if damaged:
        _damaged_entry(cache, key)
    lock = lock_path(key, entry_dir(key, False))
    holder = _hold(lock, "elsewhere_s0-abc")
    try:
        (line,) = get_backend("tiny").launch_notes(configs)
    finally:
        _release(holder)
    state = "is cached but damaged (" if damaged else "is not cached and arctl ships none for it: "
    assert line.startswith(f"the tiny warm-up {key} (2 runs) {state}"), line
    assert (f": run elsewhere_s0-abc (host {socket.gethostname()}, pid {holder.pid}, since " in line
            and " UTC) trains it now, and they wait for it before their step 0 (" in line), line
    assert "the first of them" not in line and not line.endswith("while the others of it wait")
    (after,) = get_backend("tiny").launch_notes(configs)  # released: its record gone with it
    assert "the first of them" in after and "elsewhere_s0-abc" not in after


def test_a_held_lock_without_a_live_record_is_another_run(cache):
    """A holder that recorded nothing (an older arctl), or a record a dead process of this host left: "another run";
    a stale record beside a free lock changes nothing."""
    from arctl.backends.tiny.warmup_key import entry_dir, holder_path, lock_path

    configs = _configs("baselines-elastic")
    key = warmup_key(configs[0])
    cache.mkdir(parents=True)
    lock = lock_path(key, entry_dir(key, False))
    stale = {"run": "dead_s0", "host": socket.gethostname(), "pid": unused_pid(), "since": "2026-12-07 01:00:00 UTC"}
    holder = _hold(lock, None)
    try:
        holder_path(lock).write_text(json.dumps(stale))
        (line,) = get_backend("tiny").launch_notes(configs)
    finally:
        _release(holder)
    assert ": another run trains it now, and they wait for it before their step 0 (" in line, line
    (free,) = get_backend("tiny").launch_notes(configs)
    assert ": the first of them trains it before its step 0 (" in free and "dead_s0" not in free

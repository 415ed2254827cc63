"""What a launch says of the tiny warm-ups its runs train before their first step (from a hunt of the warm-up cache:
a dry run of Elastic's arm said nothing of its 16-24 min warm-up, and on SLURM the other jobs of the key held their
allocations waiting for it): one line per key neither cached nor shipped, or shipped but ``ARCTL_TINY_WARMUP=train``;
read without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from arctl.backends.base import get_backend
from arctl.backends.tiny.settings import WARMUP_ENV
from arctl.backends.tiny.warmup_key import SHIPPED, TRAINED_SUFFIX, warmup_key
from arctl.compose import resolve_experiment
from arctl.config.files import TINY_WARMUP_CACHE


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(WARMUP_ENV, raising=False)
    return tmp_path / "cache" / TINY_WARMUP_CACHE


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
    monkeypatch.setenv("ARCTL_TEST_STEPS", "2")
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert f"note: the tiny warm-up {key} (1 run) is not cached" in " ".join(done.output.split())
    assert json.loads(CliRunner().invoke(app, [*args, "--dry-run", "--json"]).stdout)["backend_notes"] == []  # done

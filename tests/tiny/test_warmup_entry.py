"""A cached warm-up is used only whole and only for its own key and model: an entry copied under another key's name,
one whose tokenizer or model config was cut or edited, or a folder where a file should be, is set aside and made
again (or, where it cannot be, one error line), and a run never trains from a model its config does not build.

From a hunt (the warm-up cache, findings 1, 4 and 6): the entry's check hashed the weights alone, so a cache folder
copied under another key's name trained a 32-wide model for a run configured 48 wide, a cut tokenizer.json or
model/config.json failed every run of the key with a raw traceback (never set aside), an edited rms_norm_eps trained
from another model under the same recorded sha256, and a folder where the weights or the lock file should be failed
the job "set ARCTL_CACHE to a folder you can write", a folder that was writable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from micro import MICRO  # tests/support/micro.py
from resolved import arm_config  # tests/support/resolved.py

from arctl.backends.tiny import warmup

KEEP = ["tiny.warmup.steps=2", "tiny.warmup.batch_size=4", "tiny.warmup.seed=5151"]  # trained in a second


def _config(*extra: str) -> dict:
    other_task = any(o.startswith("tiny.task.name=") for o in extra)  # (the micro search knobs left out)
    micro = [o for o in MICRO if not (other_task and o.startswith("tiny.task.search."))]
    return arm_config("main-grpo", "grpo", overrides=[*micro, *KEEP, *extra])


def _accuracy(config: dict):
    return lambda model, tok: {int(b): 0.9 for b in config["eval"]["budgets"]}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One micro warm-up entry, made once for the module (copied into each test's cache)."""
    cache = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARCTL_CACHE", str(cache))
        patch.delenv("ARCTL_TINY_WARMUP", raising=False)
        config = _config()
        warmup.warmup_model(config, cache / "ws" / "runs" / "r", _accuracy(config))
        return warmup.warmup_dir(config)


@pytest.fixture
def trained(monkeypatch) -> list:
    """Grows by one per warm-up trained."""
    count: list = []
    real = warmup._train_into
    monkeypatch.setattr(warmup, "_train_into", lambda *a, **k: (count.append(1), real(*a, **k))[1])
    return count


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "ws" / "runs" / "r"
    run.mkdir(parents=True, exist_ok=True)
    return run


def _record(entry: Path, **change) -> None:
    """Rewrite the entry's warmup.json: fields set, or removed where the value is None (an older arctl's entry)."""
    info = json.loads((entry / "warmup.json").read_text())
    info.update(change)
    (entry / "warmup.json").write_text(json.dumps({k: v for k, v in info.items() if v is not None}))


def _aside(entry: Path) -> list[str]:
    return sorted(p.name for p in entry.parent.glob(f"{entry.name}.damaged-*"))


def test_an_entry_copied_under_another_keys_name_is_set_aside_and_made_again(tmp_path, cache, made, trained, capsys):
    """The hunt's case: the micro entry (32 wide) copied to the key of a run configured 48 wide."""
    wide = _config("model.hidden_size=48")
    entry = cache / warmup.warmup_key(wide)
    shutil.copytree(made, entry)
    assert warmup.cache_problem(entry) == (f"its record is of warm-up key {made.name}, not {entry.name}: a cache "
                                           "folder copied or renamed")
    model, _tok, info = warmup.warmup_model(wide, _run(tmp_path), _accuracy(wide))
    assert model.config.hidden_size == 48 and trained == [1] and info["key"] == entry.name
    assert f"the cached warm-up {entry} is damaged (its record is of warm-up key {made.name}" in capsys.readouterr().out
    assert len(_aside(entry)) == 1 and warmup.cache_problem(entry) is None


@pytest.mark.parametrize("other, wrong", [("model.hidden_size=48", "hidden_size 32, the run's 48"),
                                          ("model.num_layers=3", "num_hidden_layers 2, the run's 3"),
                                          ("tiny.task.name=running_sum", "its tokenizer's vocabulary is not the task's")],
                         ids=["wider", "deeper", "vocabulary"])
def test_an_entry_that_records_no_key_and_holds_another_model_is_one_line(tmp_path, cache, made, trained, other, wrong):
    """An older arctl's entry (no key, no checksum of its other files), copied under another config's key: the model
    loaded is compared with what the run's config builds, and the difference is one line naming the entry."""
    config = _config(other)
    entry = cache / warmup.warmup_key(config)
    shutil.copytree(made, entry)
    _record(entry, key=None, entry_sha256=None)
    with pytest.raises(ValueError) as raised:
        warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    said = str(raised.value)
    assert "\n" not in said and said.startswith(f"the cached tiny warm-up {entry} is not of this run's model ("), said
    assert wrong in said and trained == [] and said.endswith(f"`arctl resume r --workdir {tmp_path / 'ws'}`")


DAMAGE = {
    "tokenizer-cut": lambda e: (e / "tokenizer" / "tokenizer.json").write_bytes(
        (e / "tokenizer" / "tokenizer.json").read_bytes()[:100]),
    "config-cut": lambda e: (e / "model" / "config.json").write_bytes((e / "model" / "config.json").read_bytes()[:50]),
    "config-one-layer": lambda e: _edit_config(e, num_hidden_layers=1),
    "config-rms-eps": lambda e: _edit_config(e, rms_norm_eps=0.5),  # still loads: only the checksum tells
    "weights-a-folder": lambda e: ((e / "model" / "model.safetensors").unlink(),
                                   (e / "model" / "model.safetensors").mkdir()),
}


def _edit_config(entry: Path, **change) -> None:
    path = entry / "model" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_outside_the_weights_is_set_aside_and_made_again(tmp_path, cache, made, trained, damage, capsys):
    config = _config()
    entry = cache / made.name
    shutil.copytree(made, entry)
    clean = json.loads((made / "warmup.json").read_text())
    DAMAGE[damage](entry)
    problem = warmup.cache_problem(entry)  # found under the lock, before anything loads it
    model, _tok, info = warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    assert model.config.rms_norm_eps != 0.5 and model.config.num_hidden_layers == 2
    assert f"the cached warm-up {entry} is damaged ({problem})" in capsys.readouterr().out and problem
    assert trained == [1] and len(_aside(entry)) == 1 and warmup.cache_problem(entry) is None
    assert info["weights_sha256"] == clean["weights_sha256"]


@pytest.mark.parametrize("damage", ["tokenizer-cut", "config-cut", "config-one-layer"])
def test_an_older_entry_that_does_not_load_is_set_aside_and_made_again(tmp_path, cache, made, trained, damage, capsys):
    """An entry of an arctl that recorded no checksum of its other files passes its check, then does not load: it
    is set aside under the lock and made again, once."""
    config = _config()
    entry = cache / made.name
    shutil.copytree(made, entry)
    _record(entry, entry_sha256=None)
    DAMAGE[damage](entry)
    assert warmup.cache_problem(entry) is None  # what it records holds
    model, _tok, info = warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    out = capsys.readouterr().out
    assert f"the cached warm-up {entry} is damaged (it does not load: " in out
    assert trained == [1] and len(_aside(entry)) == 1 and model.config.num_hidden_layers == 2
    assert "entry_sha256" in json.loads((entry / "warmup.json").read_text())  # made again: recorded now


def test_an_entry_that_does_not_load_even_made_again_is_one_line(tmp_path, cache, made, monkeypatch):
    """A shipped copy whose tokenizer was cut (a record without the files' checksum) is installed, does not load, is
    set aside and installed again: still not loading, the job fails in one line naming the entry."""
    config = _config()
    shipped = tmp_path / "shipped"
    shutil.copytree(made, shipped / made.name)
    _record(shipped / made.name, entry_sha256=None)
    DAMAGE["tokenizer-cut"](shipped / made.name)
    monkeypatch.setattr(warmup, "SHIPPED", shipped)
    with pytest.raises(ValueError) as raised:
        warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    said = str(raised.value)
    assert "\n" not in said and said.startswith(f"the tiny warm-up {cache / made.name} does not load, even made "
                                                "again (it does not load: JSONDecodeError: "), said
    assert len(_aside(cache / made.name)) == 1


def test_a_shipped_copy_whose_other_files_differ_from_its_record_is_trained_instead(
        tmp_path, cache, made, trained, caplog, monkeypatch):
    config = _config()
    shipped = tmp_path / "shipped"
    shutil.copytree(made, shipped / made.name)
    _edit_config(shipped / made.name, rms_norm_eps=0.5)  # loads, the same weights
    monkeypatch.setattr(warmup, "SHIPPED", shipped)
    with caplog.at_level("WARNING"):
        model, _tok, info = warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    assert trained == [1] and "shipped warm-start" in caplog.text and "its files' sha256" in caplog.text
    assert model.config.rms_norm_eps != 0.5 and info["source"] == "shipped"  # (the key's entry: arctl ships one)


def test_the_shipped_warm_up_without_the_files_checksum_installs_records_it_and_is_checked_by_it(tmp_path, cache,
                                                                                                 trained, capsys):
    """arctl's own shipped warm-start (its record may lack ``entry_sha256``; it is not regenerated): installed, the
    cache's copy records its files' sha256, so a later edit of its model config is set aside and installed again."""
    from arctl.compose import resolve_experiment

    config = resolve_experiment("main-grpo", scale="tiny")[0].config  # the default: arctl ships its warm-up

    def unmeasured(model, tok):
        raise AssertionError("the shipped warm-up covers the default budgets: nothing is measured")

    _m, _t, info = warmup.warmup_model(config, _run(tmp_path), unmeasured)
    entry = Path(info["path"])
    assert info["source"] == "shipped" and trained == []
    shipped = json.loads((warmup.shipped_dir(entry.name) / "warmup.json").read_text())
    _edit_config(entry, rms_norm_eps=0.5)
    model, _t, again = warmup.warmup_model(config, _run(tmp_path), unmeasured)
    assert model.config.rms_norm_eps != 0.5 and again["weights_sha256"] == shipped["weights_sha256"]
    assert "is damaged (its files' sha256" in capsys.readouterr().out and trained == []
    assert len(_aside(entry)) == 1
    files = warmup.entry_sha256(entry)  # the shipped files' own, recorded beside the shipped record
    assert files == warmup.entry_sha256(warmup.shipped_dir(entry.name))
    assert json.loads((entry / "warmup.json").read_text()) == {**shipped, "entry_sha256": files}


def test_a_lock_that_is_a_folder_is_named_as_that(tmp_path, cache, made, trained):
    config = _config()
    lock = cache / f"{made.name}.lock"
    lock.mkdir(parents=True)
    with pytest.raises(warmup.WarmupCacheError) as raised:
        warmup.warmup_model(config, _run(tmp_path), _accuracy(config))
    said = str(raised.value)
    assert said.startswith(f"the tiny warm-up's lock {lock} is a folder: arctl makes it a file") and "\n" not in said
    assert f"rm -r {lock}" in said and "a folder you can write" not in said and trained == []

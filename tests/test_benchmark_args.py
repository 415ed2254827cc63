"""The benchmark scripts refuse bad arguments in one line (exit 2) before any workload starts, and
bench_report never labels an old fixture with new --runs/--steps. Every test here calls a script's
main() or parser with arguments it must refuse, or builds a fixture of a few steps: no benchmark's
workload runs."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str, monkeypatch):
    """A benchmark script as a module, with benchmarks/ on sys.path as it is when run as a script."""
    monkeypatch.syspath_prepend(str(BENCH))
    path = BENCH / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refused(main, argv: list[str], capsys, *, code: int = 2) -> str:
    """Run ``main(argv)``, which must exit with ``code`` before doing anything; its stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# bench_report


def test_bench_report_rebuilds_a_fixture_of_another_size_and_reports_the_runs_it_holds(tmp_path, monkeypatch):
    """`--runs 4 --steps 60` then `--runs 4 --steps 5000` printed "4 runs x 5000 steps" over the 60-step files,
    and `--runs 2` read 4 runs: build() kept every file that existed. Now fixture.json records the size."""
    report = load("bench_report", monkeypatch)
    root = tmp_path / "fixture"
    assert report.prepare(root, 4, 3) == 4
    template = root / "templates" / "run-grpo.wandb"
    small = template.stat().st_size
    assert json.loads((root / "fixture.json").read_text()) == {"runs": 4, "steps": 3, "complete": True}
    assert report.prepare(root, 2, 6) == 2  # fewer runs, more steps: rebuilt, not topped up
    assert template.stat().st_size > small
    assert len(list((root / "runs").iterdir())) == 2
    bigger = template.stat().st_size
    mtime = template.stat().st_mtime_ns
    assert report.prepare(root, 2, 6) == 2  # the same size: reused as it is
    assert template.stat().st_mtime_ns == mtime and template.stat().st_size == bigger


def test_bench_report_refuses_a_folder_it_did_not_build(tmp_path, monkeypatch, capsys):
    """A --dir with runs/ but no fixture.json (a real workspace, or a fixture from before) is never deleted."""
    report = load("bench_report", monkeypatch)
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    err = refused(report.main, ["--dir", str(tmp_path), "--runs", "2", "--steps", "3"], capsys)
    assert "no fixture.json" in err and (tmp_path / "runs" / "mine").is_dir()


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--runs", "-1"], ["--repeat", "0"], ["--steps", "abc"]])
def test_bench_report_refuses_sizes_below_one(tmp_path, monkeypatch, capsys, argv):
    report = load("bench_report", monkeypatch)
    err = refused(report.main, ["--dir", str(tmp_path / "f"), *argv], capsys)
    assert argv[0] in err and not (tmp_path / "f").exists()


# numeric options of the other scripts: zero, negative or not a number used to end in a traceback (or nonsense)

BAD_NUMBERS = [
    ("bench_block_mask", ["--repeat", "0"]), ("bench_block_mask", ["--think", "-5"]),
    ("bench_grader", ["--leaves", "0"]), ("bench_grader", ["--tree", "0"]),
    ("bench_group", ["--tokens", "abc"]), ("bench_group", ["--groups", "0"]), ("bench_group", ["--groups", ","]),
    ("bench_group", ["--repeats", "0"]),
    ("bench_launch", ["--repeat", "0"]), ("bench_launch", ["--runs", "-3"]),
    ("bench_tiny", ["eval", "--problems", "0"]), ("bench_tiny", ["bandwidth", "--repeats", "0"]),
    ("bench_tiny", ["bandwidth", "--threads", "0"]), ("bench_tiny", ["step", "--steps", "0"]),
    ("r1_like_odds", ["--steps", "0"]), ("r1_like_odds", ["--favourites", "notjson"]),
    ("r1_like_odds", ["--favourites", "[1, 2]"]),
]


@pytest.mark.parametrize(("script", "argv"), BAD_NUMBERS, ids=[f"{s} {' '.join(a)}" for s, a in BAD_NUMBERS])
def test_a_bad_number_is_refused_by_the_parser(monkeypatch, capsys, script, argv):
    module = load(script, monkeypatch)
    option = next(a for a in argv if a.startswith("--"))
    assert option in refused(module.main, argv, capsys)


def test_the_argument_types_say_what_is_wrong(monkeypatch):
    import argparse

    _args = load("_args", monkeypatch)
    assert _args.positive_int("3") == 3 and _args.int_list("1, 64,") == [1, 64]
    assert _args.json_object('{"EOS": 2}') == {"EOS": 2}
    for fn, text, says in ((_args.positive_int, "0", "1 or more"), (_args.positive_int, "x", "not a whole number"),
                           (_args.int_list, "1,0", "1 or more"), (_args.json_object, "1", "not a JSON object"),
                           (_args.json_object, "{", "not JSON")):
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            fn(text)


# bench_tiny


def test_bench_tiny_writes_its_runs_into_a_fresh_temporary_folder_by_default(monkeypatch, capsys, tmp_path):
    """The default was --workspace arctl-runs, the user's workspace from the repository root: 20 bench runs in
    runs/ and no registry entry for them, so `arctl status` there failed afterwards."""
    tiny = load("bench_tiny", monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    seen = []
    monkeypatch.setattr(tiny, "bench_step", lambda args: seen.append(args.workspace))
    monkeypatch.delenv("ARCTL_TINY_WARMUP", raising=False)
    assert tiny.main(["step"]) == 0
    (ws,) = seen
    assert Path(ws).parent == tmp_path / "tmp" and Path(ws).name.startswith("bench-tiny-") and Path(ws).is_dir()
    assert f"workspace {ws}" in capsys.readouterr().out and not (tmp_path / "arctl-runs").exists()
    assert tiny.main(["step", "--workspace", str(tmp_path / "mine")]) == 0 and seen[-1] == str(tmp_path / "mine")


def test_bench_tiny_refuses_a_bad_setting_in_one_line(monkeypatch, capsys, tmp_path):
    """A bad $ARCTL_TINY_WARMUP, or a config the experiment cannot compose, was a traceback."""
    tiny = load("bench_tiny", monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tiny, "bench_step", lambda args: pytest.fail("ran on a bad setting"))
    monkeypatch.setenv("ARCTL_TINY_WARMUP", "sometimes")
    assert tiny.main(["step"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: $ARCTL_TINY_WARMUP") and err.count("\n") == 1 and not list(tmp_path.iterdir())
    monkeypatch.delenv("ARCTL_TINY_WARMUP")
    monkeypatch.setattr(tiny, "bench_eval", lambda args: tiny._resolve("main-ar-uniform", ["foo=bar"]))
    assert tiny.main(["eval"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unknown config key 'foo'" in err and "Traceback" not in err

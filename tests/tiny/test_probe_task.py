"""benchmarks/probe_task.py (the mechanism checks of docs/testbed.md) runs end to end at micro scale,
so it cannot rot between the runs that fill docs/testbed.md; its numbers are checked for what they
must be whatever the model (shares in [0, 1], the reference expectation of the partial-progress
table, chance of the search task), not for their values."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from micro import MICRO  # tests/support/micro.py

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "probe_task.py"
MODEL = [o for o in MICRO if o.startswith(("model.", "tiny.task.", "tiny.warmup."))]


def _probe(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBE.parent))  # benchmarks/_args.py, found as when the script runs
    spec = importlib.util.spec_from_file_location("probe_task", PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe


def test_the_probe_prints_every_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    probe = _probe(monkeypatch)
    out_file = tmp_path / "probe.json"
    assert probe.main(["--problems", "8", "--samples", "2", "--json", str(out_file), *MODEL]) == 0
    out = json.loads(out_file.read_text())
    assert out_file.read_text() in capsys.readouterr().out  # printed too
    assert out["task"] == "search" and out["problems"] == 8 and out["samples"] == 2
    budgets = out["budgets"]
    prop = out["proportions"]
    assert set(prop["accuracy"]) == {str(b) for b in budgets}
    assert all(0 <= a <= 1 for a in prop["accuracy"].values())
    assert 0 < prop["chance"] <= 1 / 4  # search: one item of K >= 4 (micro: 4..8 items)
    assert set(prop["unfinished_at"]) == {str(b) for b in budgets[-2:]}
    assert prop["summary_over_thinking"] == prop["summary_tokens_per_tree"] / prop["thinking_tokens_per_tree"]
    for row in out["partial_progress"].values():  # the reference summary's expectation is a probability
        assert 0 < row["reference"] <= 1 and 0 <= row["accuracy"] <= 1 and row["cuts"] > 0
    assert {"without chk", "without hmm", "as sampled"} == set(out["verification"])
    assert set(out["diagnostics"]) == {"corr", "nvar"}
    assert out["warmup"]["weights_sha256"] and out["gradient_balance"]


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["foo=bar"], None, "unknown config key 'foo'"),
    (["--samples", "1"], None, "rollout.n=1"),
    ([], "sometimes", "$ARCTL_TINY_WARMUP"),
])
def test_a_bad_setting_is_one_error_line_before_any_warm_up(tmp_path, monkeypatch, capsys, argv, env, says):
    """A wrong override, --samples 1 and a bad $ARCTL_TINY_WARMUP printed SpecError/ValueError tracebacks."""
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    if env:
        monkeypatch.setenv("ARCTL_TINY_WARMUP", env)
    probe = _probe(monkeypatch)
    monkeypatch.setattr(probe, "probe", lambda *a: pytest.fail("the probe ran on a bad setting"))
    assert probe.main(["--json", str(tmp_path / "p.json"), *argv, *MODEL]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("argv", [["--problems", "0"], ["--samples", "-1"], ["--problems", "x"]])
def test_counts_below_one_are_refused_by_the_parser(monkeypatch, capsys, argv):
    probe = _probe(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        probe.main(argv)
    assert exc.value.code == 2 and argv[0] in capsys.readouterr().err

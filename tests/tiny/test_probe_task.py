"""benchmarks/probe_task.py (the mechanism checks of docs/testbed.md) runs end to end at micro scale,
so it cannot rot between the runs that fill docs/testbed.md; its numbers are checked for what they
must be whatever the model (shares in [0, 1], the reference expectation of the partial-progress
table, chance of the search task), not for their values."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from micro import MICRO  # tests/support/micro.py

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "probe_task.py"
MODEL = [o for o in MICRO if o.startswith(("model.", "tiny.task.", "tiny.warmup."))]


def test_the_probe_prints_every_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARCTL_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("probe_task", PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
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

"""A report whose runs of one warm-up key start from different warm-up weights says so (from a hunt of the warm-up
cache: with ``ARCTL_TINY_WARMUP=train`` a launch skipped the completed seeds, which started from the shipped
warm-up, trained the new seeds from a warm-up trained here, and the figure drew them together as one arm)."""

from __future__ import annotations

import json

import pandas as pd
import yaml
from typer.testing import CliRunner
from wandb_workspace import run_id  # tests/support/wandb_workspace.py

from arctl.cli.main import app
from arctl.report.data import warmup_mix_note


def _row(run: str, key: str | None, sha: str | None, source: str | None = None) -> dict:
    return {"run_id": run, "config.warmup.key": key, "config.warmup.weights_sha256": sha,
            "config.warmup.source": source}


def test_one_key_two_weights_is_one_line_naming_each_and_a_run_of_it():
    table = pd.DataFrame([_row("a", "k1", "1" * 64, "shipped"), _row("b", "k1", "1" * 64, "shipped"),
                          _row("c", "k1", "2" * 64, "trained"), _row("d", "k2", "3" * 64, "trained")])
    note = warmup_mix_note(table)
    assert note == ("runs of one config start from different warm-up weights (warm-up k1: 111111111111 (shipped) for "
                    "2 runs (e.g. a), 222222222222 (trained) for 1 run (e.g. c)): their differences include the "
                    "starting point; train them from one (the same ARCTL_TINY_WARMUP for every launch, `--force` "
                    "for the others)")


def test_other_keys_one_weights_and_runs_without_a_record_are_no_warning():
    assert warmup_mix_note(pd.DataFrame([_row("a", "k1", "1" * 64), _row("b", "k2", "2" * 64)])) is None
    assert warmup_mix_note(pd.DataFrame([_row("a", "k1", "1" * 64), _row("b", None, None)])) is None
    # a warm-up trained here where arctl ships one for the key is cached as <key>-trained: the same key
    assert warmup_mix_note(pd.DataFrame([_row("a", "k1", "1" * 64), _row("b", "k1-trained", "2" * 64)]))
    assert warmup_mix_note(pd.DataFrame({"run_id": ["a"]})) is None  # a verl workspace: no warm-up recorded
    assert warmup_mix_note(pd.DataFrame()) is None


def test_a_figure_of_seeds_from_two_warm_ups_says_so(completed_ws, tmp_path):
    _mixed(completed_ws)
    res = CliRunner().invoke(app, ["report", "--figure", "main_training", "--experiment", "main-grpo", "--workdir",
                                   str(completed_ws), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    (line,) = [w for w in json.loads(res.stdout)["warnings"] if "different warm-up weights" in w]
    assert "warm-up 0123456789abcdef: aaaaaaaaaaaa (shipped) for 1 run" in line and "bbbbbbbbbbbb (trained)" in line


def test_one_weights_reached_two_ways_is_one_starting_point():
    """From a review: the shipped warm-up trained again on the shipped one's kind of machine gives the same weights;
    grouped by weights, not by (weights, source), they are one starting point and no warning."""
    assert warmup_mix_note(pd.DataFrame([_row("a", "k1", "1" * 64, "shipped"),
                                         _row("b", "k1-trained", "1" * 64, "trained")])) is None
    note = warmup_mix_note(pd.DataFrame([_row("a", "k1", "1" * 64, "shipped"), _row("b", "k1", "1" * 64, "trained"),
                                         _row("c", "k1", "2" * 64, "trained")]))
    assert "111111111111 (shipped, trained) for 2 runs (e.g. a), 222222222222 (trained) for 1 run (e.g. c)" in note


def _mixed(ws) -> None:
    for seed, sha, source in ((0, "a" * 64, "shipped"), (1, "b" * 64, "trained")):
        path = ws / "runs" / run_id("main-grpo", "grpo", seed) / "config.yaml"
        config = yaml.safe_load(path.read_text())
        config["warmup"] = {"key": "0123456789abcdef", "weights_sha256": sha, "source": source}
        path.write_text(yaml.safe_dump(config))


def test_the_claims_say_it_too(completed_ws, tmp_path):
    """From a review: the claims' paired tests compared seeds that started from different weights, unsaid."""
    _mixed(completed_ws)
    res = CliRunner().invoke(app, ["report", "--claims", "priors", "ablations", "--scale", "tiny", "--workdir",
                                   str(completed_ws), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    assert [w for w in json.loads(res.stdout)["warnings"] if "different warm-up weights" in w], res.stdout[-3000:]

"""benchmarks/same_run.py: the check that one run id gave the same numbers twice (two machines of a
kind, #27), on real offline W&B runs whose values are known."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from wandb_workspace import LAST_STEP, _write_run, run_id  # tests/support/wandb_workspace.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import same_run  # noqa: E402  benchmarks/same_run.py

RUN = ("main-grpo", "grpo", 0)
OTHER = ("main-ar-uniform", "ar-uniform", 0)
STEPS = list(range(LAST_STEP + 1))


def _clock(seconds: float) -> list[dict]:
    return [{"trainer/global_step": LAST_STEP, "perf/step_time_s": seconds, "perf/step_cpu_s": seconds}]


@pytest.fixture(scope="module")
def spaces(tmp_path_factory) -> dict[str, Path]:
    """a: the run and another; same: the run again with other clock readings (and without the other run);
    late: from step 15 every value +0.5; short: the last step missing."""
    import wandb

    root = tmp_path_factory.mktemp("same-run")
    out = {name: root / name for name in ("a", "same", "late", "short")}
    _write_run(out["a"], *RUN, STEPS, extra_rows=_clock(1.0))
    _write_run(out["a"], *OTHER, STEPS)
    _write_run(out["same"], *RUN, STEPS, extra_rows=_clock(2.5))
    _write_run(out["late"], *RUN, STEPS, bad_from=15)
    _write_run(out["short"], *RUN, STEPS[:-1])
    wandb.teardown()
    return out


def test_the_same_numbers_with_other_clocks_are_the_same_run(spaces, capsys, tmp_path):
    out = tmp_path / "same.json"
    assert same_run.main([str(spaces["a"]), str(spaces["same"]), "--json", str(out)]) == 0
    (row,) = __import__("json").loads(out.read_text())
    assert row["run_id"] == run_id(*RUN) and row["same"]
    assert row["compared"] == row["identical"] > 20 * 10  # every logged number of 21 steps, the clocks left out
    assert (row["only_a"], row["only_b"], row["max_abs_diff"]) == (0, 0, 0.0)
    assert "bit-identical" in capsys.readouterr().out


def test_values_that_differ_from_a_step_on_are_found_with_their_difference(spaces, capsys, tmp_path):
    out = tmp_path / "late.json"
    assert same_run.main([str(spaces["a"]), str(spaces["late"]), "--json", str(out)]) == 1
    (row,) = __import__("json").loads(out.read_text())
    assert not row["same"] and row["max_abs_diff"] == pytest.approx(0.5)
    # 6 of 21 steps differ (15..20), in every metric they log
    per_step = row["compared"] / len(STEPS)
    assert row["compared"] - row["identical"] == pytest.approx(per_step * 6, rel=0.35)
    assert row["examples"][0][0] == 15
    assert "DIFFERENT" in capsys.readouterr().out


def test_a_missing_step_is_a_difference(spaces, tmp_path):
    out = tmp_path / "short.json"
    assert same_run.main([str(spaces["a"]), str(spaces["short"]), "--json", str(out)]) == 1
    (row,) = __import__("json").loads(out.read_text())
    assert row["identical"] == row["compared"] and row["only_a"] > 0 and row["only_b"] == 0


def test_no_common_run_is_one_error_line(spaces, tmp_path, capsys):
    empty = tmp_path / "empty"
    shutil.copytree(spaces["a"] / "runs" / run_id(*OTHER), empty / "runs" / run_id(*OTHER))
    assert same_run.main([str(spaces["same"]), str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no run id is in both")
    assert same_run.main([str(spaces["a"]), str(spaces["same"]), "--run", "nope"]) == 2
    assert "run nope is not in both" in capsys.readouterr().err

"""Tables ``final``/``anytime`` cells as a reader takes them (mutation hunt of arctl.report.tables): a cell is the
mean over an arm's seeds, values are shown as logged where the spec gives no ``scale``, and cells that print alike
are bold alike. Each case is one that the tables' other tests, built from two seeds per arm, could not tell apart."""

from __future__ import annotations

import pandas as pd
import pytest

from arctl.report.data import ReportData
from arctl.report.tables import AVG, accuracy_table, to_markdown
from arctl.track.runs.tidy import Runs


def _table(rows, spec: dict | None = None):
    """accuracy_table of final_acc values ``rows`` (run_id, arm, dataset, value), one evaluation each."""
    history = pd.DataFrame([{"run_id": r, "arm": a, "metric": f"eval/{d}/final_acc", "value": v, "step": 9}
                            for r, a, d, v in rows])
    return accuracy_table(spec or {"key": "eval/{dataset}/final_acc", "scale": 100},
                          ReportData(Runs(history, pd.DataFrame()), None, source="test"))


def _cells(md: str) -> dict[str, list[str]]:
    return {line.split(" | ")[0].removeprefix("| "): [c.strip() for c in line.strip(" |").split(" | ")[1:]]
            for line in md.splitlines()[2:]}


def test_a_cell_is_the_mean_of_three_seeds_not_their_median():
    """The paper's tables report the mean over seeds; with three seeds a median (or any other middle) differs.
    0.2, 0.3, 0.7 -> 40.0 (the median would be 30.0)."""
    table = _table([("g0", "grpo", "aime24", 0.2), ("g1", "grpo", "aime24", 0.3), ("g2", "grpo", "aime24", 0.7)])
    assert table.loc["GRPO", "AIME24"] == pytest.approx(40.0)
    assert table.loc["GRPO", AVG] == pytest.approx(40.0)
    assert _cells(to_markdown(table))["GRPO"] == ["**40.0**", "**40.0**"]


def test_a_spec_without_scale_shows_the_values_as_logged():
    """``scale`` is optional in a table spec (reports/*.yaml set 100 for percent): without it a cell is the logged
    accuracy itself, 0.45, not 45 (a user's table of fractions would be shown a hundred times larger)."""
    table = _table([("g0", "grpo", "aime24", 0.4), ("g1", "grpo", "aime24", 0.5)],
                   {"key": "eval/{dataset}/final_acc"})
    assert table.loc["GRPO", "AIME24"] == pytest.approx(0.45)


def test_cells_that_print_alike_are_bold_alike():
    """Bold marks the best cell as printed (one decimal): 45.04 and 45.0 both print 45.0, so both are bold; bolding
    only the first would claim a difference the table does not show."""
    table = _table([("g0", "grpo", "aime24", 0.4504), ("u0", "ar-uniform", "aime24", 0.45),
                    ("b0", "ar-base", "aime24", 0.40)])
    cells = _cells(to_markdown(table))
    assert cells["GRPO"][0] == "**45.0**" and cells["AR-uniform"][0] == "**45.0**"
    assert cells["AR-base"][0] == "40.0"


def test_differences_from_the_paper_are_signed():
    """The "Δ vs paper" rows print a sign on every difference, "+1.0" as "-1.0": without it a reader cannot tell a
    gain over the paper from a loss once the minus is the only mark."""
    from arctl.report.tables import compare_with_paper, paper_rows

    spec = {"key": "eval/{dataset}/final_acc", "scale": 100, "name": "final"}
    table = _table([("g0", "grpo", "amc22", 0.66), ("g0", "grpo", "aime24", 0.279)], spec)
    md = to_markdown(table, compare_with_paper(table, paper_rows(spec, list(table.columns))))
    assert _cells(md)["GRPO (Δ vs paper)"][:2] == ["+1.0", "-1.0"]


def test_a_seed_with_nan_in_a_budget_forced_column_is_counted_out_of_its_row():
    """A run that logged NaN in ``toy-forced`` (a column Avg leaves out): that cell averages one run of two, and the
    row says "(1 of 2 runs)" as it does for a NaN in any other column."""
    table = _table([("g0", "grpo", "toy", 0.5), ("g0", "grpo", "toy-forced", 0.4),
                    ("g1", "grpo", "toy", 0.7), ("g1", "grpo", "toy-forced", float("nan"))],
                   {"key": "eval/{dataset}/final_acc", "scale": 100})
    assert list(_cells(to_markdown(table))) == ["GRPO (1 of 2 runs)"]
    assert table.attrs["runs"] == {"GRPO": 1}


def test_the_csv_counts_runs_on_our_rows_only(tmp_path):
    """The CSV's ``runs`` and ``most_runs`` say how many of our runs a row averages: on the paper's rows and the
    differences they are empty (the paper's numbers are no runs of this workspace; a count there reads as if they
    were)."""
    import csv

    from arctl.report.tables import build

    spec = {"key": "eval/{dataset}/final_acc", "scale": 100, "name": "final"}
    history = pd.DataFrame([{"run_id": r, "arm": "grpo", "metric": "eval/aime24/final_acc", "value": v, "step": 9}
                            for r, v in (("g0", 0.3), ("g1", 0.4))])
    data = ReportData(Runs(history, pd.DataFrame()), None, source="test")
    build(spec, data, tmp_path, compare_paper=True)
    with open(tmp_path / "final.csv") as f:
        rows = [(r["algorithm"], r["source"], r["runs"], r["most_runs"]) for r in csv.DictReader(f)]
    assert ("GRPO", "arctl", "2", "2") in rows
    assert [r for r in rows if r[1] != "arctl" and (r[2] or r[3])] == []
    assert {r[1] for r in rows} == {"arctl", "paper", "diff"}

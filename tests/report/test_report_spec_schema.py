"""The schema of report specs (``reports/*.yaml``, ``claims.yaml``, ``labels.yaml``, ``paper_tables.csv``):
a mistake in a user's copy is one ``error:`` line naming the file and the field, exit 2, nothing written;
never a traceback from the builder that reads the field, never a string read letter by letter.
(From a read-only hunt: each case below was a traceback with exit 1, or silently accepted.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.errors import SpecError
from arctl.compose.paths import PROJECT_ROOT
from arctl.compose.report_specs import (
    FIELDS,
    FIGURE_BUILDERS,
    PANEL_FIELDS,
    all_report_specs,
    check_report_spec,
)

runner = CliRunner()
SHIPPED = PROJECT_ROOT / "reports"


def _shipped(name: str) -> str:
    return (SHIPPED / name).read_text()


def _without(text: str, field: str) -> str:
    """``text`` (a shipped spec) less its top-level ``field`` (and that field's indented lines)."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if re.match(rf"{field}:", line):
            skipping = True
            continue
        if skipping and line.startswith((" ", "-")):
            continue
        skipping = False
        out.append(line)
    return "".join(out)


def _with(name: str, field: str, value: str) -> str:
    return _without(_shipped(name), field) + f"{field}: {value}\n"


MAIN_TRAINING, SCORE_CURVE, TABLE_FINAL, TREE_MASK = ("main_training.yaml", "score_curve.yaml",
                                                     "table_final.yaml", "tree_mask.yaml")
FIGURE = {"main_training.yaml": ["--figure", "main_training"], "score_curve.yaml": ["--figure", "score_curve"],
          "table_final.yaml": ["--table", "final"], "tree_mask.yaml": ["--figure", "tree_mask"]}
# (file, the field the error names, its value there (None: left out), words the error says)
SPEC_CASES = {
    "panel without key": (MAIN_TRAINING, "panels", "[{label: x}]", "needs a key"),
    "panels a number": (MAIN_TRAINING, "panels", "5", "expected a list of panels"),
    "panel key placeholder": (MAIN_TRAINING, "panels", "[{key: 'train/{nope}'}]", "unknown placeholder {nope}"),
    "panel key brace": (MAIN_TRAINING, "panels", "[{key: 'eval/{dataset/x'}]", "not a key template"),
    "panel scale text": (MAIN_TRAINING, "panels", "[{key: train/loss, scale: abc}]", "item 0.scale: expected a number > 0"),
    "panel field typo": (MAIN_TRAINING, "panels", "[{key: train/loss, lable: x}]", "did you mean 'label'"),
    "datasets a number": (MAIN_TRAINING, "datasets", "5", "expected a list of names"),
    "experiments a number list": (SCORE_CURVE, "experiments", "[5]", "item 0: expected a name"),
    "experiments a string": (SCORE_CURVE, "experiments", "main-grpo", "write [main-grpo]"),
    "experiment unknown": (SCORE_CURVE, "experiments", "[main-grpoo]", "did you mean 'main-grpo'"),
    "arms a number": (SCORE_CURVE, "arms", "5", "expected a list of names"),
    "per_seed text": (SCORE_CURVE, "per_seed", "yes please", "true or false"),
    "score_curve key not drawn": (SCORE_CURVE, "key", "'eval/{dataset}/final_acc'", "score_curve draws eval/{dataset}/acc@{budget}"),
    "table without key": (TABLE_FINAL, "key", None, "a table needs key:"),
    "table key without dataset": (TABLE_FINAL, "key", "eval/final_acc", "has no {dataset}"),
    "table scale text": (TABLE_FINAL, "scale", "abc", "expected a number > 0"),
    "table sweep unknown": (TABLE_FINAL, "sweep", "nonexist", "unknown sweep 'nonexist'"),
    "field typo": (TABLE_FINAL, "arm", "[grpo]", "did you mean 'arms'"),
    "another builder's field": (TABLE_FINAL, "per_seed", "true", "'per_seed' is read by score_curve, not by table"),
    "table builder": (TABLE_FINAL, "builder", "score_curve", "built by builder 'table'"),
    "figure builder unknown": (SCORE_CURVE, "builder", "scorecurve", "no figure builder"),
    "name a path": (SCORE_CURVE, "name", "../x", "is not a name"),
    "tree cuts text": (TREE_MASK, "cuts", "abc", "expected a list of thinking lengths"),
    "tree cut past the thinking": (TREE_MASK, "cuts", "[6, 30]", "cut 30 is beyond"),
    "tree length zero": (TREE_MASK, "summary_len", "0", "expected a whole number 1.."),
}


def _user_specs(tmp_path: Path, monkeypatch, file: str, text: str) -> Path:
    """A spec root (``$ARCTL_SPECS``) whose ``reports/<file>`` is ``text``, overlaying the shipped one."""
    specs = tmp_path / "specs"
    (specs / "reports").mkdir(parents=True)
    (specs / "reports" / file).write_text(text)
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    return specs


def _one_error_line(res, *words: str) -> str:
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_a_mistake_in_a_figure_or_table_spec_is_one_line_naming_file_and_field(case, tmp_path, monkeypatch):
    file, field, value, words = SPEC_CASES[case]
    text = _with(file, field, value) if value is not None else _without(_shipped(file), field)
    specs = _user_specs(tmp_path, monkeypatch, file, text)
    flag = FIGURE[file] if case != "name a path" else ["--figure", "../x"]
    out, work = tmp_path / "out", tmp_path / "ws"
    work.mkdir()
    res = runner.invoke(app, ["report", *flag, "--workdir", str(work), "--out", str(out)], env={"COLUMNS": "400"})
    _one_error_line(res, f"{specs / 'reports' / file}: {field}: ", words)
    assert not out.exists()
    if file != TREE_MASK:  # `arctl ls` lists the specs: the same line, not a listing of letters
        kind = "tables" if file == TABLE_FINAL else "figures"
        res = runner.invoke(app, ["ls", kind], env={"COLUMNS": "400"})
        _one_error_line(res, f"{specs / 'reports' / file}: {field}: ", words)


def test_every_shipped_spec_passes_and_every_builder_has_a_name_in_the_schema():
    from arctl.report.render import BUILDERS

    assert set(BUILDERS) == set(FIGURE_BUILDERS)
    for kind in ("figure", "table"):
        specs = all_report_specs(kind)
        assert specs
        for spec in specs.values():
            check_report_spec(spec, spec["_path"])  # raises on a mistake


def test_a_field_is_checked_only_where_a_builder_reads_it():
    base = {"kind": "figure", "name": "x", "builder": "training_curves"}
    check_report_spec({**base, "datasets": ["aime24"], "panels": [{"key": "eval/{dataset}/final_acc"}]}, "x.yaml")
    with pytest.raises(SpecError, match=r"x.yaml: datasets: unknown field for a score_curve figure — 'datasets' is "
                                        "read by training_curves, not by score_curve"):
        check_report_spec({**base, "builder": "score_curve", "datasets": ["aime24"]}, "x.yaml")
    check_report_spec({**base, "sweep": None}, "x.yaml")  # `sweep:` left empty: not given
    with pytest.raises(SpecError, match="key: missing"):
        check_report_spec({"kind": "table", "name": "t", "key": None}, "t.yaml")


def test_the_reports_doc_lists_every_field():
    doc = (PROJECT_ROOT / "docs" / "reports.md").read_text()
    for name in [*FIELDS, *PANEL_FIELDS]:
        assert f"`{name}`" in doc, name


def test_a_kind_no_report_has_is_refused_and_a_users_copy_of_a_name_overlays_the_shipped_spec(tmp_path, monkeypatch):
    """A kind none of figure/table/claims is one line; a YAML without a kind (notes) is no report spec and is
    skipped; a copy under another file name (`arctl cp score_curve reports/mine.yaml`, `name: score_curve`)
    overlays the shipped spec (from a review: it stopped every figure command), two of one origin are refused."""
    specs = _user_specs(tmp_path, monkeypatch, "mine.yaml", _shipped(SCORE_CURVE).replace("kind: figure", "kind: figur"))
    res = runner.invoke(app, ["ls", "figures"], env={"COLUMNS": "400"})
    _one_error_line(res, f"{specs / 'reports' / 'mine.yaml'}: kind: ", "not one of figure, table, claims")
    (specs / "reports" / "mine.yaml").write_text("foo: 1\n")  # no kind: not a report spec
    assert runner.invoke(app, ["ls", "figures"]).exit_code == 0
    (specs / "reports" / "mine.yaml").write_text(_shipped(SCORE_CURVE).replace("description: ", "description: mine. "))
    res = runner.invoke(app, ["ls", "figures", "--json"])
    import json

    row = next(r for r in json.loads(res.stdout) if r["name"] == "score_curve")
    assert res.exit_code == 0 and row["path"] == str(specs / "reports" / "mine.yaml"), res.output
    (specs / "reports" / "other.yaml").write_text(_shipped(SCORE_CURVE))  # a second copy in the same folder
    res = runner.invoke(app, ["ls", "figures"], env={"COLUMNS": "400"})
    _one_error_line(res, "two figure specs are named 'score_curve'", "rename one of them")


CLAIMS = "claims.yaml"
CLAIMS_CASES = {  # the text of a claims file's part, the error's words
    "claims a number": ("claims: 5", "claims: expected a list"),
    "a claim a number": ("claims: [5]", "claims[0]: expected a mapping"),
    "tests a number": ("claims: [{id: 1, title: t, tests: 5}]", "claims[0].tests: expected a list"),
    "arms a string": ("claims: [{id: 1, title: t, tests: [{kind: sign, arms: grpo, stat: s}]}]",
                      "claims[0].tests[0].arms: expected a list of names, got the text 'grpo'; write [grpo]"),
    "a claim field typo": ("claims: [{id: 1, title: t, test: []}]", "claims[0]: unknown field 'test'"),
    "direction": ("claims: [{id: 1, title: t, tests: [{kind: sign, arms: [grpo], stat: s, direction: up}]}]",
                  "claims[0].tests[0].direction: str 'up' is not one of greater, less"),
    "precondition a number": ("claims: [{id: 1, title: t, tests: [{kind: sign, arms: [a], stat: s}], "
                              "preconditions: 5}]", "claims[0].preconditions: expected a list"),
}
STATS = "statistics: {s: {kind: final, key: 'eval/{dataset}/final_acc'}}"
STAT_CASES = {
    "statistics a list": ("statistics: [1]", "statistics: expected a mapping"),
    "a statistic a number": ("statistics: {s: 5}", "statistics.s: expected a mapping"),
    "fraction text": ("statistics: {s: {kind: band, key: 'eval/{dataset}/acc@{budget}', fraction: abc}}",
                      "statistics.s.fraction: expected a fraction 0 < f <= 1, got str 'abc'"),
    "a key that is no evaluation key": ("statistics: {s: {kind: final, key: k}}",
                                        "statistics.s.key: 'k' has no {dataset}"),
    "a key outside eval": ("statistics: {s: {kind: final, key: 'train/{dataset}/x'}}",
                           "statistics.s.key: 'train/{dataset}/x' is not an evaluation key"),
    "a band without budgets": ("statistics: {s: {kind: band, key: 'eval/{dataset}/final_acc'}}",
                               "statistics.s: a band statistic reads a metric per budget"),
    "band word": ("statistics: {s: {kind: band, key: 'eval/{dataset}/acc@{budget}', band: middle}}",
                  "statistics.s.band: str 'middle' is not one of low, high"),
    "a test without a kind": ("statistics: {s: {kind: final, key: 'eval/{dataset}/final_acc'}}\n"
                              "claims: [{id: 1, title: t, tests: [{kind: null, arms: [a], stat: s}]}]",
                              "claims[0].tests[0]: needs a kind"),
}


@pytest.mark.parametrize("case", [*CLAIMS_CASES, *STAT_CASES, "sweeps a number", "sweep unknown"])
def test_a_mistake_in_the_claims_file_is_one_line_naming_the_field(case, tmp_path, monkeypatch):
    if case in CLAIMS_CASES:
        part, words = CLAIMS_CASES[case]
        text = f"kind: claims\n{STATS}\n{part}\n"
    elif case in STAT_CASES:
        part, words = STAT_CASES[case]
        text = f"kind: claims\n{part}\n"
        if "\nclaims:" not in text:
            text += "claims: [{id: 1, title: t, tests: [{kind: sign, arms: [a], stat: s}]}]\n"
    else:
        sweeps, words = {"sweeps a number": ("5", "sweeps: expected a list of names"),
                         "sweep unknown": ("[nope]", "sweeps: unknown sweep 'nope'")}[case]
        text = (f"kind: claims\nsweeps: {sweeps}\n{STATS}\n"
                "claims: [{id: 1, title: t, tests: [{kind: sign, arms: [a], stat: s}]}]\n")
    specs = _user_specs(tmp_path, monkeypatch, CLAIMS, text)
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--claims", "priors", "--workdir", str(tmp_path), "--out", str(out)],
                        env={"COLUMNS": "400"})
    _one_error_line(res, f"{specs / 'reports' / CLAIMS}: ", words)
    assert not out.exists()


LABELS = _shipped("labels.yaml")
LABEL_CASES = {
    "arms a number": (LABELS.replace("arms:\n", "arms: 5\nx:\n", 1), "labels.yaml: arms: expected a mapping arm id"),
    "arms a list": ("arms: [grpo]\n", "labels.yaml: arms: expected a mapping arm id"),
    "a list": ("- a\n", "labels.yaml: expected a mapping like"),
    "dataset_order a number": ("dataset_order: 5\n", "labels.yaml: dataset_order: expected a list of names"),
    "a field typo": ("arm: {grpo: GRPO}\n", "labels.yaml: arm: unknown field; did you mean 'arms'"),
    "a label a list": ("datasets: {aime24: [a]}\n", "labels.yaml: datasets.aime24: expected text"),
}


@pytest.mark.parametrize("case", list(LABEL_CASES))
def test_a_mistake_in_the_display_names_is_one_line(case, workspace, tmp_path, monkeypatch):
    text, words = LABEL_CASES[case]
    specs = _user_specs(tmp_path, monkeypatch, "labels.yaml", text)
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--figure", "score_curve", "--workdir", str(workspace), "--out", str(out)],
                        env={"COLUMNS": "400"})
    _one_error_line(res, str(specs / "reports"), words)
    assert not out.exists()


PAPER = _shipped("paper_tables.csv")
PAPER_CASES = {
    "no table column": (PAPER.replace("table,", "tabl,", 1), "paper_tables.csv: no column table"),
    "not CSV": (PAPER + 'final,"unclosed\n', "paper_tables.csv: not a readable CSV file"),
    "a cell not a number": (PAPER.replace("56.4", "abc", 1),
                            "table 'final', algorithm 'R1-Distill-1.5B', column 'AMC22': 'abc' is not a number"),
    "a row twice": (PAPER + PAPER.splitlines()[1] + "\n", "table 'final' has algorithm 'R1-Distill-1.5B' twice"),
}


@pytest.mark.parametrize("case", list(PAPER_CASES))
def test_a_mistake_in_the_papers_tables_is_one_line(case, workspace, tmp_path, monkeypatch):
    text, words = PAPER_CASES[case]
    specs = _user_specs(tmp_path, monkeypatch, "paper_tables.csv", text)
    res = runner.invoke(app, ["report", "--table", "final", "--compare-paper", "--workdir", str(workspace),
                              "--out", str(tmp_path / "out")], env={"COLUMNS": "400"})
    _one_error_line(res, str(specs / "reports" / "paper_tables.csv"), words)


def test_the_papers_tables_read_as_numbers_with_a_blank_cell_missing(tmp_path):
    from arctl.report.tables import read_paper_tables

    path = Path(tmp_path / "p.csv")
    path.write_text("table,algorithm,AMC22,AIME24,Avg\nfinal,GRPO,65.0,,50.7\nfinal,L1,NA,n/a,-\n")
    paper = read_paper_tables(path)
    assert paper["AMC22"].tolist()[0] == 65.0 and paper["AIME24"].isna().all() and paper["Avg"].tolist()[0] == 50.7
    assert paper.iloc[1][["AMC22", "AIME24", "Avg"]].isna().all()  # NA spellings pandas read as missing before


def test_a_null_optional_field_of_the_claims_file_is_not_given(tmp_path):
    """From a review: `label: null`, `paper_table: null`, `above_chance: null` were refused (read as values)."""
    from arctl.report.claims import load_claims

    path = tmp_path / "claims.yaml"
    path.write_text("kind: claims\nstatistics: {s: {kind: band, key: 'eval/{dataset}/acc@{budget}', label: null, "
                    "paper_table: null, above_chance: null, band: null}}\n"
                    "claims: [{id: 1, title: t, paper: null, tests: [{kind: sign, arms: [a], stat: s, direction: null}]}]\n")
    spec = load_claims(path)
    assert spec.stats["s"].band == "low" and spec.stats["s"].above_chance is None
    assert spec.claims[0].tests[0].direction == "greater"


def test_a_claims_arm_no_experiment_defines_is_one_line_not_a_test_forever_missing_runs(workspace, tmp_path, monkeypatch):
    """From a review: a typo (``ar-bsae``) made its test "inconclusive, runs missing" for good."""
    text = _shipped(CLAIMS).replace("{kind: compare, a: ar-base, b: grpo, stat: anytime, direction: greater}",
                                    "{kind: compare, a: ar-bsae, b: grpo, stat: anytime, direction: greater}", 1)
    specs = _user_specs(tmp_path, monkeypatch, CLAIMS, text)
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--claims", "priors", "--workdir", str(workspace), "--out", str(out)],
                        env={"COLUMNS": "400"})
    _one_error_line(res, f"{specs / 'reports' / CLAIMS}: claims[0].tests[0]: no experiment defines arm 'ar-bsae'",
                    "did you mean 'ar-base'")
    assert not out.exists()

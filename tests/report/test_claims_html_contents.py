"""What claims.md, claims.html and the curves figure say, where a mutation hunt (mutation8) found a change no test
noticed or a defect: a ``|`` in a claim's title, paper reference or test label split its claims.md row (and a claim
without a paper printed "()"), a test label unescaped in claims.html, the per-claim figures and the interval cells
of claims.html, each test kind's per-seed table, the curves' per-seed lines, and ``--scale`` (a run of another
scale is no seed of the claims)."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from arctl.report.claims import HOLDS, INCONCLUSIVE, ClaimResult, ClaimsSpec
from arctl.report.claims import TestResult as Result  # (as TestResult, pytest would try to collect it)
from arctl.report.claims_render import ClaimsReport, _seeds_table, curves_figure, fmt, to_html, to_markdown

META = {"created": "T", "host": "h", "cpus": 2, "load_average": [0.1], "code_version": "v", "workspace": "/ws",
        "sweeps": ["priors"], "scale": None, "claims_file": "claims.yaml"}


def _report(label: str = "AR-uniform − GRPO on |J − J_anytime|") -> ClaimsReport:
    """Two claims: one with bars in its title, paper reference, test label and the test's paper numbers; one
    without a paper reference."""
    t1 = Result("compare", label, ["ar-uniform", "grpo"], "gap", "greater",
                    {1: {"a": 0.50, "b": 0.40, "value": 0.10}, 2: {"a": 0.55, "b": 0.43, "value": 0.12},
                     3: {"a": 0.52, "b": 0.41, "value": 0.11}}, 3, 0.11, 0.085, 0.135, HOLDS, sd=0.01,
                    p_value=0.003, p_holm=0.006, unit="accuracy", paper="GRPO 40.1 | AR 42.0")
    t2 = Result("sign", "GRPO final_acc", ["grpo"], "acc", "less", {1: {"value": -0.02}, 2: {"value": 0.01}}, 2,
                    -0.005, -0.2, 0.19, INCONCLUSIVE, seeds_needed=40, sd=0.02, p_value=0.7, p_holm=0.7, unit="accuracy")
    r1 = ClaimResult("1", "AR | anytime beats GRPO", "Table 2 | Fig. 3", HOLDS, [t1])
    r2 = ClaimResult("2", "GRPO gains nothing", "", INCONCLUSIVE, [t2])
    return ClaimsReport(ClaimsSpec(Path("claims.yaml"), ("priors",), {}, ()), [r1, r2], [], META)


def test_a_bar_in_a_claims_title_paper_or_label_stays_in_its_claims_md_cell():
    """From a hunt: "AR | anytime beats GRPO" made 11 cells of the row's 7, its verdict column "anytime beats GRPO
    (Table 2"; a claim without a paper reference printed "()"."""
    md = to_markdown(_report())
    rows = [line for line in md.splitlines() if re.match(r"\| \d+\. ", line)]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    assert [len(c) for c in cells] == [7, 7]
    assert cells[0][:3] == ["1. AR \\| anytime beats GRPO (Table 2 \\| Fig. 3)", "**holds**",
                            "AR-uniform − GRPO on \\|J − J_anytime\\|"]
    assert cells[0][5:] == ["holds", "GRPO 40.1 \\| AR 42.0"]
    assert cells[1][:2] == ["2. GRPO gains nothing", "**inconclusive**"] and "()" not in rows[1]


def test_a_test_label_is_escaped_in_claims_html():
    page = to_html(_report("mean <think> length & more"))
    assert "mean &lt;think&gt; length &amp; more" in page and "<think>" not in page


class _Headers(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
            self.rows[-1].append(self._cell)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cell = None


def _table(text: str) -> list[list[str]]:
    parser = _Headers()
    parser.feed(text)
    return [["".join(c) for c in row] for row in parser.rows]


def test_each_test_kind_has_its_own_per_seed_columns_in_claims_html():
    sign = Result("sign", "GRPO acc", ["grpo"], "acc", "greater", {2: {"value": 0.25}, 1: {"value": -0.02}}, 2,
                      0.1, -0.5, 0.7, INCONCLUSIVE)
    assert _table(_seeds_table(sign)) == [["seed", "value"], ["s1", "-0.020"], ["s2", "+0.250"]]
    pre = Result("sign", "GRPO acc", ["grpo"], "acc", "greater", {0: {"value": 0.5}}, 1, 0.5, None, None,
                     INCONCLUSIVE)
    assert _table(_seeds_table(pre)) == [["seed", "value"], ["s0", "+0.500"]]
    converge = Result("converge", "AR leads at low, less at high", ["ar-uniform", "grpo"], None, "greater",
                          {1: {"lead_low": 0.1, "lead_high": 0.02, "value": 0.08},
                           2: {"lead_low": 0.2, "lead_high": 0.05, "value": 0.15}}, 2, 0.115, 0.0, 0.2, INCONCLUSIVE)
    assert _table(_seeds_table(converge)) == [["seed", "lead, low", "lead, high", "diff"],
                                              ["s1", "+0.100", "+0.020", "+0.080"], ["s2", "+0.200", "+0.050", "+0.150"]]


def test_the_curves_draw_each_seed_as_accuracy_against_the_budget():
    """From a hunt: the thin per-seed lines with their axes swapped went unnoticed (only the mean was checked)."""
    curves = {"grpo": {"budget": {1: {1000: 0.2, 2000: 0.3}, 2: {1000: 0.25, 2000: 0.35}},
                       "train": {1: {0: 0.1, 10: 0.15}, 2: {0: 0.12, 10: 0.2}}}}
    fig = curves_figure(curves)
    try:
        by_budget, train = fig.axes
        for ax, xs, ys in ((by_budget, [1000, 2000], [[0.2, 0.3], [0.25, 0.35]]),
                           (train, [0, 10], [[0.1, 0.15], [0.12, 0.2]])):
            thin = [ln for ln in ax.get_lines() if ln.get_linewidth() < 1]
            assert [list(ln.get_xdata()) for ln in thin] == [xs, xs]
            assert [list(ln.get_ydata()) for ln in thin] == ys
            assert ax.get_xlim()[0] >= xs[0] - (xs[1] - xs[0]) and ax.get_ylim()[1] <= 1
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


@pytest.fixture(scope="module")
def two_scales(tmp_path_factory) -> tuple[Path, dict]:
    """A workspace of tiny runs of grpo and ar-uniform, seeds 0 and 1, and paper-scale runs of both at seed 2;
    the report ``--claims priors --scale tiny`` over it (its folder and claims.json)."""
    import wandb
    import yaml
    from wandb_workspace import _write_run

    from arctl.report.claims_render import build_claims_report

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ["WANDB_MODE"] = "offline"
    tmp = tmp_path_factory.mktemp("two_scales")
    ws = tmp / "ws"
    for experiment, arm in (("main-grpo", "grpo"), ("main-ar-uniform", "ar-uniform")):
        for seed in (0, 1):
            _write_run(ws, experiment, arm, seed, list(range(21)))
        paper = _write_run(ws, experiment, arm, 2, list(range(21)), wandb_config={"scale": "paper"})
        cfg = yaml.safe_load((paper / "config.yaml").read_text())  # the run's frozen config: what the report reads
        (paper / "config.yaml").write_text(yaml.safe_dump({**cfg, "scale": "paper"}))
    wandb.teardown()
    build_claims_report(sweeps=["priors"], scale="tiny", workdir=ws, out_dir=tmp / "out", progress=False, processes=1)
    return tmp / "out", json.loads((tmp / "out" / "claims.json").read_text())


def test_claims_at_one_scale_read_no_run_of_another_scale(two_scales):
    """From a hunt: with run_views's scale filter dropped, a paper-scale run was read as seed 2 of its arm."""
    _, doc = two_scales
    assert {(u["arm"], u["seed"]) for u in doc["runs"]} == {(a, s) for a in ("grpo", "ar-uniform") for s in (0, 1)}
    uniform = next(t for c in doc["claims"] for t in c["tests"] if t["label"].startswith("AR-uniform > GRPO: anytime"))
    assert uniform["n"] == 2 and sorted(map(int, uniform["per_seed"])) == [0, 1]
    assert all(set(map(int, t["per_seed"])) <= {0, 1} for c in doc["claims"] for t in c["tests"])


class _Page(HTMLParser):
    """claims.html's figures (their alt texts) and each test row's own cells (not those of its per-seed table)."""

    def __init__(self):
        super().__init__()
        self.alts, self.rows = [], []
        self._row, self._nested, self._cell = None, 0, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.alts.append(a.get("alt", ""))
        if tag == "tr" and a.get("class") == "test":
            self._row = []
            self.rows.append(self._row)
        elif self._row is not None and tag == "table":
            self._nested += 1
        elif self._row is not None and tag == "td" and not self._nested:
            self._cell = []
            self._row.append(self._cell)

    def handle_data(self, data):
        if self._cell is not None and not self._nested:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if self._row is not None and tag == "table" and self._nested:
            self._nested -= 1
        elif tag == "td" and not self._nested:
            self._cell = None
        elif tag == "tr" and not self._nested and self._row is not None:
            self._row[:] = ["".join(c) for c in self._row]
            self._row = None


def _figures_and_intervals(page_text: str, doc: dict) -> list[str]:
    """Check claims.html against its claims.json (``doc``): one figure per claim with a test with seeds (in order),
    and each test row's interval cell [ci_low, ci_high]; the claims with a figure."""
    page = _Page()
    page.feed(page_text)
    # a bound test's violations are no dot of the figure: a claim of bound tests alone has none
    with_seeds = [c["id"] for c in doc["claims"] if any(t["per_seed"] and t["kind"] != "bound" for t in c["tests"])]
    assert [a for a in page.alts if a.startswith("claim ")] == [f"claim {i}: per-seed values and intervals"
                                                                for i in with_seeds]
    tests = [t for c in doc["claims"] for t in c["tests"]]
    assert len(page.rows) == len(tests)
    expected = [f"[{fmt(t['ci_low'])}, {fmt(t['ci_high'])}]" if t["kind"] != "bound" and t["ci_low"] is not None
                else "–" for t in tests]
    assert [row[2] for row in page.rows] == expected
    return with_seeds


def test_claims_html_has_a_figure_per_claim_with_seeds_and_each_test_s_interval(two_scales):
    """From a hunt: with the figures dropped, or a test's interval written [high, low], no test failed (the browser
    tests are slow ones)."""
    out, doc = two_scales
    with_seeds = _figures_and_intervals((out / "claims.html").read_text(), doc)
    assert with_seeds and len(with_seeds) < len(doc["claims"])
    report = _report()  # the workspace's seeds agree to the last bit (an interval of width 0): here they spread
    doc = json.loads(json.dumps(report.to_json(files=True)))
    assert all(t["ci_low"] < t["ci_high"] for c in doc["claims"] for t in c["tests"])
    assert _figures_and_intervals(to_html(report), doc) == ["1", "2"]

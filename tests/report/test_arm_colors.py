"""One colour per arm in every figure (``reports/labels.yaml``'s ``colors``; an arm not listed gets one from its
name), and PDFs with TrueType fonts. From a hunt: an arm's colour was its place among the arms a figure had, so
AR-uniform was orange beside AR-base and red without it, red was GRPO+dense, GRPO+decouple or GRPO+BRPO by figure;
and every PDF embedded a Type 3 font, which camera-ready checkers refuse."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from arctl.cli.main import app
from arctl.compose.paths import PROJECT_ROOT
from arctl.compose.report_specs import all_report_specs
from arctl.config import safe_yaml
from arctl.report import style
from arctl.report.specs import arm_label

SHIPPED = safe_yaml.load((PROJECT_ROOT / "reports" / "labels.yaml").read_text())["colors"]
DATASET, BUDGETS = "aime24", (100, 200)


def _data(arms):
    """Two seeds of each arm, logging an accuracy at every budget of the final evaluation and an anytime accuracy,
    at steps 0 and 20."""
    import pandas as pd

    from arctl.report.data import ReportData
    from arctl.track.runs import Runs

    metrics = [f"eval/{DATASET}/acc@{b}" for b in BUDGETS] + [f"eval/{DATASET}/anytime_acc"]
    rows, runs = [], []
    for arm in arms:
        for seed in range(2):
            run = f"{arm}-{seed}"
            runs.append({"run_id": run, "experiment": "e", "arm": arm, "seed": seed})
            rows += [{"run_id": run, "arm": arm, "experiment": "e", "seed": seed, "step": step, "metric": m,
                      "value": 0.3 + 0.1 * seed + 0.001 * step} for m in metrics for step in (0, 20)]
    history = pd.DataFrame(rows)
    for col in ("run_id", "arm", "experiment", "metric"):
        history[col] = history[col].astype("category")
    return ReportData(Runs(history, pd.DataFrame(runs)), None, source="t")


def _drawn_colors(builder: str, arms, spec_arms) -> dict[str, str]:
    """arm -> the colour of its line in the figure ``builder`` draws of runs of ``arms`` (spec ``arms``:
    ``spec_arms``, the order of the legend)."""
    import importlib

    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    build = importlib.import_module(f"arctl.report.{builder}").build
    spec = {"name": "t", "arms": list(spec_arms)}
    if builder == "training_curves":
        spec["panels"] = [{"key": "eval/{dataset}/anytime_acc", "label": "anytime accuracy"}]
    fig, _ = build(spec, _data(arms))
    by_label = {arm_label(a): a for a in arms}
    drawn: dict[str, set[str]] = {}
    for ax in fig.axes:
        for line in ax.lines:
            if line.get_label() in by_label:
                drawn.setdefault(by_label[line.get_label()], set()).add(to_hex(line.get_color()))
    plt.close(fig)
    assert sorted(drawn) == sorted(arms) and all(len(c) == 1 for c in drawn.values()), drawn
    return {a: c.pop() for a, c in drawn.items()}


SPEC_ARMS = ["grpo", "ar-base", "ar-linear", "ar-uniform"]  # the order of score_curve's spec
ARM_SETS = [["grpo", "ar-base", "ar-uniform"], ["grpo", "ar-uniform"], ["ar-uniform"], ["ar-uniform", "my-arm"],
            ["my-arm", "grpo-dense", "grpo"]]


def test_an_arms_colour_is_the_same_whichever_arms_and_figure():
    """The hunt's case: score_curve of the paper sweep (GRPO, AR-base, AR-uniform) and of the baselines sweep
    (no AR-base): AR-uniform orange, then red; the training curves agree with the score curve."""
    seen: dict[str, set[str]] = {}
    for arms in ARM_SETS:
        for builder in ("score_curve", "training_curves"):
            for arm, color in _drawn_colors(builder, arms, SPEC_ARMS).items():
                seen.setdefault(arm, set()).add(color)
    assert {a: len(c) for a, c in seen.items()} == dict.fromkeys(seen, 1), seen
    for arm in ("grpo", "ar-base", "ar-uniform", "grpo-dense"):
        assert seen[arm] == {SHIPPED[arm].lower()}, arm  # labels.yaml's colour
    assert seen["my-arm"] == {style.arm_color("my-arm").lower()}


def test_an_unlisted_arm_gets_a_colour_of_its_name_no_listed_arm_has():
    listed = {c.lower() for c in SHIPPED.values()}
    names = ["my-arm", "grpo-v2", "ablation-x", "baseline", "a"]
    colors = {n: style.arm_color(n) for n in names}
    assert not {c.lower() for c in colors.values()} & listed
    assert len(set(colors.values())) > 1  # chosen by name, not one colour for every unlisted arm
    # the same in another process (another PYTHONHASHSEED: not Python's salted hash()) and beside other arms
    code = f"from arctl.report import style; print(' '.join(style.arm_color(n) for n in {names!r}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.split()
    assert other == list(colors.values())
    assert style.arm_colors(["grpo", "ar-uniform", *names])["my-arm"] == colors["my-arm"]


def test_two_unlisted_arms_whose_names_choose_one_colour_get_two():
    by_color: dict[str, str] = {}
    for i in range(100):
        name = f"arm-{i}"
        color = style.arm_color(name)
        if color in by_color:
            first, second = by_color[color], name
            break
        by_color[color] = name
    else:
        pytest.fail("no two of 100 names chose one colour")
    colors = style.arm_colors([first, second, "grpo"])
    assert colors[first] == style.arm_color(first) and colors[second] != colors[first]
    assert colors[second].lower() not in {c.lower() for c in SHIPPED.values()}


def test_where_every_fallback_colour_is_listed_an_unlisted_arm_still_gets_its_own(monkeypatch):
    listed = {f"arm-{i}": c for i, c in enumerate(style.FALLBACK_COLORS)}
    monkeypatch.setattr(style, "fixed_arm_colors", lambda: dict(listed))
    colors = style.arm_colors(["mine", "yours", *listed])
    assert colors["mine"] != colors["yours"]
    assert not {colors["mine"].lower(), colors["yours"].lower()} & {c.lower() for c in listed.values()}
    assert style.arm_color("mine") == colors["mine"]


def _lab(hex_color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour."""
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _distance(a: str, b: str) -> float:
    return math.dist(_lab(a), _lab(b))


def test_the_shipped_colours_tell_the_arms_of_each_figure_apart():
    """Every listed arm its own colour; in each shipped figure of arms, the arms' colours far apart (CIELAB
    distance >= 25); the fallback colours far from every listed one and from each other."""
    assert len({c.lower() for c in SHIPPED.values()}) == len(SHIPPED)
    figures = {n: s for n, s in all_report_specs("figure").items() if s.get("arms")}
    assert figures
    for name, spec in figures.items():
        colors = style.arm_colors(spec["arms"])
        closest = min(_distance(colors[a], colors[b]) for i, a in enumerate(spec["arms"]) for b in spec["arms"][i + 1:])
        assert closest >= 25, (name, colors)
    fallback = list(style.FALLBACK_COLORS)
    for i, c in enumerate(fallback):
        assert min(_distance(c, other) for other in [*SHIPPED.values(), *fallback[i + 1:]]) >= 20, c


runner = CliRunner()
LABELS = (PROJECT_ROOT / "reports" / "labels.yaml").read_text()


@pytest.mark.parametrize(("value", "words"), [
    ("red", "colors.grpo: expected a colour '#rrggbb' like '#0072B2', got 'red'"),
    ("'#07B2'", "colors.grpo: expected a colour '#rrggbb' like '#0072B2', got '#07B2'"),
    ("#0072B2", "colors.grpo: expected a colour '#rrggbb' like '#0072B2', got nothing (quote it"),  # a comment
])
def test_a_colour_that_is_not_one_is_one_error_line(value, words, workspace, tmp_path, monkeypatch):
    specs = tmp_path / "specs"
    (specs / "reports").mkdir(parents=True)
    (specs / "reports" / "labels.yaml").write_text(LABELS.replace('  grpo: "#0072B2"\n', f"  grpo: {value}\n", 1))
    monkeypatch.setenv("ARCTL_SPECS", str(specs))
    out = tmp_path / "out"
    res = runner.invoke(app, ["report", "--figure", "score_curve", "--workdir", str(workspace),
                              "--out", str(out)], env={"COLUMNS": "400"})
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert f"{specs / 'reports' / 'labels.yaml'}: {words}" in lines[0]
    assert not out.exists()


def test_a_pdf_has_truetype_fonts_not_type_3(tmp_path):
    fig, axes = style.new_figure(1, 1)
    axes[0][0].plot([0, 1], [0, 1], label="GRPO")
    axes[0][0].set_xlabel("thinking budget (tokens)")
    axes[0][0].set_ylabel(r"accuracy (%), $\lambda=0.5$")
    style.add_legend(fig, *axes[0][0].get_legend_handles_labels())
    style.add_footnote(fig, "Runs: GRPO ×2 (main-grpo)")
    pdf = next(p for p in style.save_figure(fig, tmp_path, "fig") if p.suffix == ".pdf").read_bytes()
    assert b"/Subtype /Type3" not in pdf
    assert b"/FontFile2" in pdf  # the TrueType font is embedded (a subset), not only named

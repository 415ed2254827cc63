"""Tables ``final`` and ``anytime`` (paper Tables 1-2): accuracy per benchmark and their average,
one row per arm (mean over seeds of each run's last logged value), the highest of a column as printed in bold
(every row that prints it), written as Markdown, LaTeX (booktabs) and CSV. A benchmark's cell averages the
arm's runs that logged a finite value of it; Avg averages, over the arm's runs that logged every benchmark,
each run's mean over the benchmarks (so Avg and a claim compare the same runs on the same benchmarks), "–"
where no run logged them all. A row where some cell, Avg included, averages fewer runs than the table's
fullest cell is named "<arm> (n of N runs)", n the fewest; the CSV says n and N of every row (columns ``runs``,
``most_runs``). ``compare_paper`` adds the paper's rows (from ``reports/paper_tables.csv``) and our-minus-paper
differences; a paper row's Avg is the paper's own, shown only where every benchmark of it is (else none, said
once in a warning); the difference has no Avg where ours averages a benchmark the paper's does not (said too)."""

from __future__ import annotations

import math
from pathlib import Path

from arctl.compose.report_specs import key_glob
from arctl.report.data import ReportData, eval_budgets_notes, final_values
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label, dataset_label, dataset_order, order, paper_tables_path
from arctl.track.metrics_schema import FORCED_SUFFIX, parse_metric

AVG = "Avg"
CSV_DECIMALS = 4  # the decimals a report's CSV (a table's, a figure's) writes
PAPER_MISSING = ("", "na", "n/a", "nan", "-", "\u2013")  # a cell of paper_tables.csv where the paper has no value


OURS = "arctl"  # the source of a row of our runs (beside "paper" and "diff" with compare_paper)

def metric_globs(spec: dict) -> list[str]:
    return [key_glob(spec["key"])]


def accuracy_table(spec: dict, data: ReportData):
    """DataFrame: index = arm label, columns = dataset labels + Avg (over the benchmarks evaluated
    without budget forcing, over the runs that logged every one of them: :func:`_average`), values × ``spec.scale``.
    ``attrs["runs"]``: label -> the fewest runs a cell of its row, Avg included, averages (finite values only:
    a run that logged NaN is not in its mean); the Markdown and
    LaTeX tables name a row with a cell that averages fewer runs than another cell: an arm with a failed or
    diverged seed, or a run that did not log every benchmark."""
    import pandas as pd

    name = spec["key"].split("{dataset}/", 1)[-1]  # e.g. grid_anytime_acc, acc_at_frac/50
    fin = final_values(data.history)
    rows = []
    for m, arm, run, v in zip(fin["metric"].astype(str), fin["arm"].astype(str), fin["run_id"].astype(str),
                              fin["value"]):
        p = parse_metric(m)
        if p is not None and p.dataset and p.name == name and p.budget is None:
            rows.append((arm, run, p.dataset, float(v)))
    if not rows:
        raise ReportError(f"the runs in {data.source} logged no {spec['key']}; they must finish training "
                          "(the final evaluation runs at the last step)")
    df = pd.DataFrame(rows, columns=["arm", "run_id", "dataset", "value"])
    scale = float(spec.get("scale", 1))
    means = df.groupby(["arm", "dataset"])["value"].mean().unstack("dataset") * scale
    datasets = dataset_order(means.columns)
    arms = order(means.index, spec.get("arms"))
    means = means.loc[arms, datasets]
    # the average over the benchmarks; a budget-forced evaluation ("-forced") of the same problems is
    # another decoding of them, not another benchmark: it stays out of Avg
    plain = [d for d in datasets if not str(d).endswith(FORCED_SUFFIX)] or datasets
    avg, avg_runs = _average(df, plain, arms, scale)
    means[AVG] = avg
    means.attrs["avg_of"] = [dataset_label(d) for d in plain]  # the columns Avg averages (paper_rows compares them)
    # runs a cell averages: its finite values (pandas' mean skips a NaN, so a diverged seed left the mean while
    # the row still counted it: from a review), against the most runs any cell averages
    used = (df.dropna(subset=["value"]).groupby(["arm", "dataset"])["run_id"].nunique().unstack("dataset")
            .reindex(index=arms, columns=datasets).fillna(0))
    most = df.groupby(["arm", "dataset"])["run_id"].nunique().max()
    means.index = [arm_label(a) for a in arms]
    # a cell not logged shows "–"; Avg averages the runs that logged every benchmark, at most any cell's
    means.attrs["runs"] = {arm_label(a): int(min(used.loc[a].min(), avg_runs[a])) for a in arms}
    means.attrs["most_runs"] = int(most)
    means.columns = [dataset_label(d) for d in datasets] + [AVG]
    means.index.name = "algorithm"
    return means


def _average(df, plain: list, arms: list, scale: float):
    """(Avg per arm, the runs it averages per arm): the mean over the arm's runs that have a finite value of
    every benchmark of ``plain`` of each run's mean over them, NaN for an arm without such a run. The columns'
    means average all of an arm's runs that logged each benchmark; averaging those would set a mean over
    three seeds beside one over two (a run that did not log a benchmark, or logged NaN) and call it one
    number. So Avg compares runs on what every one of them has, as a claim's paired difference does
    (:func:`arctl.report.claims.common_support`)."""
    import pandas as pd

    per_run = (df[df["dataset"].isin(plain)].groupby(["arm", "run_id", "dataset"])["value"].mean()
               .unstack("dataset").reindex(columns=plain))
    complete = per_run[per_run.notna().all(axis=1)]
    run_means = complete.mean(axis=1) * scale
    by_arm = run_means.groupby(level="arm")
    avg = by_arm.mean().reindex(arms) if len(run_means) else pd.Series(float("nan"), index=arms)
    counts = by_arm.size().reindex(arms).fillna(0) if len(run_means) else pd.Series(0, index=arms)
    return avg.to_numpy(), {a: int(counts[a]) for a in arms}


def paper_rows(spec: dict, columns: list[str], avg_of: list[str] | None = None):
    """The paper's rows of this table restricted to ``columns``. A row's Avg is the paper's own where every
    benchmark the row has is among ``columns``, else NaN: a mean over the benchmarks shown (53.3 of three of
    Table 1's five, where the paper says 45.6) would be no number of the paper's, under its name (from a review).
    ``avg_of``: the columns our Avg averages (:func:`accuracy_table`'s ``attrs["avg_of"]``; default: every column
    but Avg). Where it holds a benchmark a row of the paper lacks (runs with gsm8k beside the paper's five), our Avg
    and the paper's average different benchmarks: ``attrs["unlike_avg"]`` names those rows, whose difference
    (:func:`compare_with_paper`) has no Avg (from a hunt: runs equal to the paper on all five showed +7.4).
    ``attrs["avg_note"]``: why a row, or its difference, has no Avg (None where none lacks it)."""

    path = paper_tables_path()
    if not path.is_file():
        raise ReportError(f"--compare-paper needs {path} (the paper's tables); it is missing")
    paper = read_paper_tables(path)
    which = spec.get("paper_table", spec["name"])
    if not (paper["table"] == which).any():
        has = ", ".join(sorted(set(paper["table"].astype(str))))
        raise ReportError(f"--compare-paper: the paper has no table {which!r} (the paper's tables here: {has}); "
                          f"drop --compare-paper for --table {spec['name']}")
    paper = paper[paper["table"] == which].drop(columns="table")
    paper = paper.set_index("algorithm")
    bench = [c for c in columns if c != AVG and c in paper.columns]
    if not bench:
        raise ReportError(
            f"--compare-paper: these runs have none of the paper's benchmarks "
            f"({', '.join(c for c in paper.columns if c != AVG)}); they have {', '.join(c for c in columns if c != AVG)}"
        )
    out = paper[bench].astype(float)
    all_bench = [c for c in paper.columns if c != AVG]
    unshown = {alg: [c for c in all_bench if c not in bench and not math.isnan(float(paper.loc[alg, c]))]
               for alg in paper.index}
    out[AVG] = [float("nan") if unshown[alg] else float(paper.loc[alg, AVG]) for alg in paper.index]
    out.index.name = "algorithm"
    lacking = {c for cols in unshown.values() for c in cols}
    ours_avg = [c for c in (columns if avg_of is None else avg_of) if c != AVG]
    extra = {alg: [c for c in ours_avg if c not in paper.columns or math.isnan(float(paper.loc[alg, c]))]
             for alg in paper.index if not unshown[alg]}  # (a row without the paper's Avg has no difference of it)
    out.attrs["unlike_avg"] = [alg for alg in paper.index if extra.get(alg)]
    beyond = list(dict.fromkeys(c for alg in out.attrs["unlike_avg"] for c in extra[alg]))
    notes = [
        f"--compare-paper: the paper's {AVG} averages {', '.join(all_bench)}; these runs have no "
        f"{', '.join(c for c in all_bench if c in lacking)}, so the paper's rows show no {AVG}, nor their difference "
        "(a mean over the benchmarks shown would not be the paper's number)" if lacking else None,
        f"--compare-paper: our {AVG} averages {', '.join(beyond)} too, which the paper's {AVG} does not "
        f"(it averages {', '.join(all_bench)}), so the differences from the paper show no {AVG} (a mean over other "
        "benchmarks is not comparable with the paper's); the benchmarks' differences compare like with like"
        if beyond else None]
    out.attrs["avg_note"] = "; ".join(n for n in notes if n) or None
    return out


def read_paper_tables(path: Path):
    """``reports/paper_tables.csv`` as a DataFrame (columns table, algorithm, one per benchmark, Avg; the
    numbers as floats, a blank cell NaN), each mistake one :class:`ReportError` line naming the file."""
    import pandas as pd

    try:
        paper = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as err:  # pandas' ParserError is a ValueError
        raise ReportError(f"{path}: not a readable CSV file ({' '.join(str(err).split())[:160]})") from None
    missing = [c for c in ("table", "algorithm", AVG) if c not in paper.columns]
    if missing:
        raise ReportError(f"{path}: no column {', '.join(missing)} (the header is table,algorithm,<benchmarks>,{AVG}; "
                          f"it has {', '.join(map(str, paper.columns))})")
    repeated = paper.duplicated(["table", "algorithm"])
    if repeated.any():
        row = paper[repeated].iloc[0]
        raise ReportError(f"{path}: table {row['table']!r} has algorithm {row['algorithm']!r} twice; keep one row")
    for col in [c for c in paper.columns if c not in ("table", "algorithm")]:
        cells = paper[col].str.strip()
        given = ~cells.str.lower().isin(PAPER_MISSING)
        numbers = pd.to_numeric(cells.where(given, None), errors="coerce")
        if (bad := given & numbers.isna()).any():
            i = int(bad.to_numpy().argmax())
            where = f"table {paper['table'].iloc[i]!r}, algorithm {paper['algorithm'].iloc[i]!r}, column {col!r}"
            raise ReportError(f"{path}: {where}: {paper[col].iloc[i]!r} is not a number "
                              "(leave the cell empty where the paper has no value)")
        paper[col] = numbers
    return paper


def compare_with_paper(ours, paper):
    """Long table with a ``source`` column: arctl rows, paper rows, and diff = arctl − paper for
    the algorithms in both; no Avg difference for the rows :func:`paper_rows` names in ``attrs["unlike_avg"]``
    (our Avg averages a benchmark the paper's does not)."""
    import pandas as pd

    cols = [c for c in ours.columns if c in paper.columns]
    shared = [a for a in ours.index if a in paper.index]
    diff = ours.loc[shared, cols] - paper.loc[shared, cols]
    if AVG in cols:
        diff.loc[[a for a in shared if a in paper.attrs.get("unlike_avg", ())], AVG] = float("nan")
    parts = [ours.assign(source=OURS), paper[cols].assign(source="paper"), diff.assign(source="diff")]
    out = pd.concat(parts)
    out.attrs = dict(ours.attrs)  # the runs each of our rows averages (concat keeps no attrs)
    return out


def _fmt(v: float, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:+.1f}" if signed else f"{v:.1f}"


def _best(ours) -> dict[str, set[str]]:
    """Per column, our rows that print its highest value: bold follows what :func:`_fmt` prints (pandas'
    ``round(1)`` made a mean of 52.949999999999996 53.0 while it prints "52.9", bold beside a "53.0": from a
    hunt), so cells that print alike are bold alike and a cell printed lower is not."""
    best = {}
    for c in ours.columns:
        shown = ours[c].dropna().map(lambda v: float(_fmt(v)))
        best[c] = set(shown.index[shown == shown.max()]) if len(shown) else set()
    return best


def _name(ours, alg) -> str:
    """The row's label, and "(n of N runs)" when a cell of it averages fewer runs than another cell: a
    mean over fewer seeds (a run that failed, logged NaN or is not exported yet) is not the same claim."""
    n, most = row_runs(ours, alg)
    return str(alg) if n == most else f"{alg} ({n} of {most} runs)"


def row_runs(ours, alg) -> tuple[int, int]:
    """(n, N) of our row ``alg``: the fewest runs a cell of it averages, the most any cell of the table does."""
    runs = ours.attrs.get("runs") or {}
    most = ours.attrs.get("most_runs", max(runs.values(), default=0))
    return runs.get(alg, most), most


def _sections(ours, compare):
    secs = [(OURS, ours, False)]
    if compare is not None:
        paper = compare[compare["source"] == "paper"].drop(columns="source")
        diff = compare[compare["source"] == "diff"].drop(columns="source")
        secs += [("paper", paper, False), ("diff", diff, True)]
    return secs


def to_markdown(ours, compare=None) -> str:
    best = _best(ours)
    cols = list(ours.columns)
    lines = ["| Algorithm | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for source, frame, signed in _sections(ours, compare):
        for alg, row in frame.iterrows():
            name = _name(ours, alg) if source == OURS else f"{alg} ({'paper' if source == 'paper' else 'Δ vs paper'})"
            cells = []
            for c in cols:
                s = _fmt(row.get(c, float("nan")), signed)
                cells.append(f"**{s}**" if source == OURS and alg in best[c] else s)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _tex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        s = s.replace(a, b)
    return s


def to_latex(ours, compare=None, caption: str = "") -> str:
    best = _best(ours)
    cols = list(ours.columns)
    out = [r"\begin{tabular}{l" + "r" * len(cols) + "}", r"\toprule",
           "Algorithm & " + " & ".join(_tex_escape(c) for c in cols) + r" \\", r"\midrule"]
    for k, (source, frame, signed) in enumerate(_sections(ours, compare)):
        if k:
            out.append(r"\midrule")
        for alg, row in frame.iterrows():
            name = _tex_escape(_name(ours, alg) if source == OURS else str(alg)) + (
                "" if source == OURS else (" (paper)" if source == "paper" else r" ($\Delta$)"))
            cells = []
            for c in cols:
                s = _fmt(row.get(c, float("nan")), signed).replace("–", "--")
                cells.append(rf"\textbf{{{s}}}" if source == OURS and alg in best[c] else s)
            out.append(name + " & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        out.insert(0, f"% {caption}")
    return "\n".join(out) + "\n"


def build(spec: dict, data: ReportData, out_dir: str | Path, compare_paper: bool = False, outputs=None):
    """Write ``<name>.md/.tex/.csv``; returns (table DataFrame, paths). ``outputs``: the report's
    :class:`arctl.report.style.Outputs`, which puts them in place with its other files; without, they are
    put in place together when the three are written."""
    if outputs is None:
        from arctl.report.style import Outputs

        with Outputs() as own:
            return build(spec, data, out_dir, compare_paper, own)
    ours = accuracy_table(spec, data)
    # rows of summaries over other budgets (another eval.budgets, largest budget, eval.grid): said
    data.runs.warnings = [*data.runs.warnings, *eval_budgets_notes(data, metric_globs(spec), spec.get("arms"))]
    compare = None
    if compare_paper:
        paper = paper_rows(spec, list(ours.columns), ours.attrs.get("avg_of"))
        compare = compare_with_paper(ours, paper)
        if paper.attrs.get("avg_note"):
            data.runs.warnings = [*data.runs.warnings, paper.attrs["avg_note"]]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = spec["name"]
    csv_frame = compare if compare is not None else ours.assign(source=OURS)
    paths = [out_dir / f"{name}.md", out_dir / f"{name}.tex", out_dir / f"{name}.csv"]
    outputs.write_text(paths[0], to_markdown(ours, compare))
    outputs.write_text(paths[1], to_latex(ours, compare, caption=spec.get("description", "")))
    csv_frame.round(CSV_DECIMALS).assign(**runs_columns(ours, csv_frame)).to_csv(outputs.stage(paths[2]),
                                                                                 index_label="algorithm")
    return csv_frame, paths


def runs_columns(ours, frame) -> dict:
    """The CSV's ``runs`` and ``most_runs`` of each row of ``frame``: what the Markdown's "(n of N runs)" says
    (:func:`_name`), on every row of ours (the CSV held only the numbers: from a review); empty on the paper's
    rows and the differences."""
    import pandas as pd

    counts = [row_runs(ours, a) if src == OURS else (None, None) for a, src in zip(frame.index, frame["source"])]
    return {"runs": pd.array([n for n, _ in counts], dtype="Int64"),
            "most_runs": pd.array([most for _, most in counts], dtype="Int64")}

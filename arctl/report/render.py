"""``render_figure`` / ``render_table``: spec → runs → files (what ``arctl report`` calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arctl.compose.report_specs import spec_builder
from arctl.config.json_text import json_text
from arctl.report import cov_variance, score_curve, tables, training_curves, tree_mask
from arctl.report.data import ReportData, read_report_runs
from arctl.report.errors import ReportError
from arctl.report.specs import load_spec
from arctl.report.style import Outputs, path_from, save_figure

BUILDERS = {  # (arctl.compose.report_specs.FIGURE_BUILDERS names them) builder, metric globs of a spec, whether it reads only final values (final_values)
    "score_curve": (score_curve.build, lambda spec: score_curve.METRICS, True),
    "training_curves": (training_curves.build, training_curves.metric_globs, False),
    # each run's first evaluation (the model before RL, as the paper's Fig. 2): the whole history, not the final
    # values (from a review: read with final values only, the command drew the trained model after all)
    "cov_variance": (cov_variance.build, lambda spec: cov_variance.METRICS, False),
    "tree_mask": (tree_mask.build, None, False),
}


@dataclass
class ReportResult:
    name: str
    kind: str
    outputs: list[Path]
    runs: list[dict] = field(default_factory=list)
    missing_experiments: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    missing_arms: list[str] = field(default_factory=list)  # arms of the spec without runs (a warning names them)
    # experiments with runs of which none was read (a warning says why): not "missing", and --json says so too
    unread_experiments: list[str] = field(default_factory=list)
    # runs of its cells it could not read, not ended: nothing logged yet, or not in the export (ReportData.waiting)
    waiting: list[dict] = field(default_factory=list)
    figure: object = None  # matplotlib Figure
    table: object = None  # pandas DataFrame behind the figure/table

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "outputs": [str(p) for p in self.outputs],
            "runs": self.runs,
            "missing_experiments": self.missing_experiments,
            "missing_arms": self.missing_arms,
            "unread_experiments": self.unread_experiments,
            "waiting": self.waiting,
            "warnings": self.warnings,
            # a table's numbers, as its Markdown prints them (the text shows them: from a hunt, --json had none)
            **({"rows": table_rows(self.table)} if self.kind == "table" and self.table is not None else {}),
        }


def table_rows(table) -> list[dict]:
    """A table's rows as ``{"row": label, "source": "arctl" | "paper" | "diff", "values": {column: number or None},
    "runs": the fewest runs a cell of it averages (None: a row of the paper's)}``; NaN and inf are None."""
    import math
    import numbers

    runs = table.attrs.get("runs", {})

    def value(v):
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            return float(v) if math.isfinite(v) else None
        return None if v is None else str(v)

    return [{"row": str(label), "source": str(row.get("source", tables.OURS)),
             "values": {str(c): value(v) for c, v in row.items() if c != "source"},
             "runs": runs.get(label) if row.get("source", tables.OURS) == tables.OURS else None}
            for label, row in table.iterrows()]


FINISHED = "finished"  # a run's ``state`` in runs.json and --json where it finished (arctl.report.cells.finished_run)


def runs_used(data: ReportData | None) -> list[dict]:
    """The runs a report used (:meth:`ReportData.used_runs`), each with its ``state`` ("finished", or how it has
    not: "failed", "running or killed", "stopped before its last step", "its job says preempted", the words of
    :func:`arctl.report.cells.unfinished`) and ``last_step`` (the last step its W&B history logged; None where
    unknown). From a hunt: runs.json listed a seed that failed at step 59 of 100 as any other."""
    import math

    used = data.used_runs() if data is not None else []
    if not used:
        return used
    table = data.runs.runs
    ends = training_curves.unfinished_ends(table)
    last = dict(zip(table["run_id"].astype(str), table["last_step"], strict=True)) if "last_step" in table.columns else {}

    def step(v):
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None

    return [{**r, "state": ends[str(r["run_id"])].split(" at step ", 1)[0] if str(r["run_id"]) in ends else FINISHED,
             "last_step": step(last.get(str(r["run_id"])))} for r in used]


def _with_job_states(data: ReportData, workdir, wandb_project) -> None:
    """How each run's job said it ended (:func:`arctl.report.export.job_states`) in ``data``'s runs table, where a
    figure's read did not add it (a report of final values does): a preempted run whose W&B file closed cleanly is
    then said as preempted, in a left-out warning, the footnote and runs.json, not as stopped early."""
    from arctl.report.cells import JOB_STATE, with_job_states
    from arctl.report.export import job_states
    from arctl.track.runs import default_workdir

    table = data.runs.runs
    if wandb_project or not len(table) or JOB_STATE in table.columns:
        return
    with_job_states(table, job_states(Path(workdir or default_workdir()), table["run_id"]))


def _write_runs_used(out_dir: Path, name: str, data: ReportData | None, outputs: Outputs) -> Path:
    runs = runs_used(data)
    # the workspace relative to the report's folder (style.path_from): the same bytes however --workdir was typed
    source = (path_from(out_dir, data.workdir) if data.workdir is not None else data.source) if data else None
    text = json_text({"source": source, "runs": runs,
                      "missing_experiments": data.missing if data else [],
                      "missing_arms": data.missing_arms if data else [],
                      "unread_experiments": data.unread if data else [],
                      "waiting": data.waiting if data else []}, indent=1)
    return outputs.write_text(out_dir / f"{name}.runs.json", text)


def interrupted_export_note(workdir) -> list[str]:
    """The warning of an export an ``arctl export`` left unfinished (:func:`arctl.report.export.interrupted_export`),
    first among a report's warnings: its runs are a part of what was asked for."""
    from arctl.report.export import interrupted_export

    note = interrupted_export(workdir) if workdir is not None else None
    return [note] if note else []


def render_figure(name: str, *, out_dir: str | Path, experiments=None, sweep=None, workdir=None,
                  wandb_project=None, cache_dir=None, progress=True, processes=None, api=None,
                  where=None, outputs: Outputs | None = None) -> ReportResult:
    """Build figure ``name`` (a ``reports/*.yaml`` spec of kind figure) into ``out_dir``; ``where``:
    ``KEY=VALUE`` config filters (:func:`arctl.report.cells.one_run_per_cell`). ``outputs``: the
    :class:`Outputs` that puts the files in place (the caller's, to tell after a Ctrl-C whether they are)."""
    spec = load_spec("figure", name)  # checked: its builder is one of BUILDERS
    build, globs, final_only = BUILDERS[spec_builder(spec)]
    if globs is None:
        given = [flag for flag, value in (("--experiment", experiments), ("--sweep", sweep),
                                          ("--wandb-project", wandb_project), ("--where", where)) if value]
        if given:
            raise ReportError(f"figure {name} reads no runs (it is drawn from the method's definitions): "
                              f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply; leave {'it' if len(given) == 1 else 'them'} out")
    data = None
    if globs is not None:
        data = read_report_runs(spec, metrics=list(globs(spec)), experiments=experiments, sweep=sweep,
                                workdir=workdir, wandb_project=wandb_project, cache_dir=cache_dir,
                                progress=progress, processes=processes, api=api, final_only=final_only,
                                where=where)
        _with_job_states(data, workdir, wandb_project)
    fig, table = build(spec, data)
    out_dir = Path(out_dir)
    # every file of the figure, or (interrupted, failed) none: the previous ones stay, each whole
    with outputs or Outputs() as outputs:
        paths = save_figure(fig, out_dir, name, outputs)
        if hasattr(table, "to_csv") and len(table):  # the numbers behind the figure
            import pandas as pd

            # rounded as a table's CSV is (100 * 0.58 was written 57.99999999999999)
            path = out_dir / f"{name}.csv"
            table.round(tables.CSV_DECIMALS).to_csv(outputs.stage(path),
                                                    index=not isinstance(table.index, pd.RangeIndex))
            paths.append(path)
            if "seeds" in getattr(table, "attrs", {}):  # a figure's per-seed numbers (score_curve's per_seed)
                path = out_dir / f"{name}.seeds.csv"
                table.attrs["seeds"].round(tables.CSV_DECIMALS).to_csv(outputs.stage(path), index=False)
                paths.append(path)
        paths.append(_write_runs_used(out_dir, name, data, outputs))
    return ReportResult(name, "figure", paths, runs=runs_used(data),
                        missing_experiments=data.missing if data else [],
                        warnings=[*interrupted_export_note(workdir), *data.runs.warnings] if data else [],
                        missing_arms=data.missing_arms if data else [],
                        unread_experiments=data.unread if data else [], waiting=data.waiting if data else [],
                        figure=fig, table=table)


def render_table(name: str, *, out_dir: str | Path, compare_paper=False, experiments=None, sweep=None,
                 workdir=None, wandb_project=None, cache_dir=None, progress=True, processes=None,
                 api=None, where=None, outputs: Outputs | None = None) -> ReportResult:
    """Build table ``name`` (``final`` or ``anytime``) as Markdown, LaTeX and CSV into ``out_dir``
    (``outputs``: as :func:`render_figure`'s)."""
    spec = load_spec("table", name)
    data = read_report_runs(spec, metrics=tables.metric_globs(spec), experiments=experiments, sweep=sweep,
                            workdir=workdir, wandb_project=wandb_project, cache_dir=cache_dir,
                            progress=progress, processes=processes, api=api, final_only=True, where=where)
    with outputs or Outputs() as outputs:  # the Markdown, LaTeX, CSV and runs.json together, or none
        table, paths = tables.build(spec, data, out_dir, compare_paper=compare_paper, outputs=outputs)
        paths.append(_write_runs_used(Path(out_dir), name, data, outputs))
    return ReportResult(name, "table", paths, runs=runs_used(data), missing_experiments=data.missing,
                        warnings=[*interrupted_export_note(workdir), *data.runs.warnings],
                        missing_arms=data.missing_arms, unread_experiments=data.unread, waiting=data.waiting,
                        table=table)

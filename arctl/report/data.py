"""The runs a figure or table needs: which experiments, read through arctl.track, checked."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from arctl.report.cells import (
    CONFIG_PREFIX,
    cell_composer,
    grid_keys,
    listed,
    one_run_per_arm_seed,
    one_run_per_cell,
    serving,
    unfinished,
    unfinished_warning,
    with_job_states,
)
from arctl.report.errors import ReportError
from arctl.track.metrics_schema import (
    ACC_AT_FRAC_PREFIX,
    NAME_ANYTIME_ACC,
    NAME_CURVE_AUC,
    NAME_FINAL_ACC,
    NAME_GRID_ANYTIME_ACC,
    parse_metric,
)
from arctl.track.runs import Runs, default_workdir, load_runs
from arctl.track.start_record import TRAINED_SUFFIX, warmup_column
from arctl.track.wandbfile.reader import NO_EXIT_RECORD, NO_RECORDS

EVAL_BUDGETS = CONFIG_PREFIX + "eval.budgets"  # the runs table's column of a run's eval.budgets
EVAL_GRID = CONFIG_PREFIX + "eval.grid"  # and of its final-evaluation grid


@dataclass(frozen=True)
class BudgetFact:
    """What of a run's config an eval summary depends on: arms compared on the summary must agree on it."""

    names: tuple[str, ...]  # the summaries (metric names; one ending in "/" a prefix: acc_at_frac/{pct})
    column: str  # the runs table's column of the config list the fact is read from
    largest: bool  # the fact: the list's largest budget (True), its set of budgets (False)
    says: str  # how the summary depends on it; {s}: "s" after one summary's name, "" after several
    what: str  # what the numbers side by side then are
    same: str  # what to give the arms


# each eval summary a report sets side by side, and the config fact of a run it depends on (docs/metrics.md,
# arctl.track.metrics_schema.anytime_eval_metrics): where the runs compared differ in one, a warning says so
# (:func:`eval_budgets_notes`, one line per fact)
BUDGET_FACTS = (
    BudgetFact((NAME_ANYTIME_ACC,), EVAL_BUDGETS, False, "average{s} each run's accuracy over its eval.budgets, which "
               "differ", "means over different budgets", "the same eval.budgets"),
    BudgetFact((NAME_FINAL_ACC,), EVAL_BUDGETS, True, "give{s} each run's accuracy at the largest of its eval.budgets, "
               "which differs", "accuracies at different budgets", "the same largest budget in eval.budgets"),
    BudgetFact((NAME_GRID_ANYTIME_ACC, NAME_CURVE_AUC, ACC_AT_FRAC_PREFIX), EVAL_GRID, False, "summarise{s} each "
               "run's accuracy over its eval.grid, which differs", "summaries over different budgets",
               "the same eval.grid"),
)


@dataclass
class ReportData:
    """Runs selected for one report, and what was asked for but not found."""

    runs: Runs
    experiments: list[str] | None  # None: every experiment
    missing: list[str] = field(default_factory=list)
    source: str = ""  # where the runs were read, for messages: the workspace as given, or "W&B project P"
    workdir: Path | None = None  # the workspace read (None: a W&B project's runs)
    missing_arms: list[str] = field(default_factory=list)  # arms of the spec without runs (:func:`missing_arms`)
    unread: list[str] = field(default_factory=list)  # experiments with runs, none read (not in ``missing``: a warning)
    named: str = ""  # what names the workspace in a command (:func:`arctl.launch.workspace.workdir_arg`)
    # runs of the report's cells that have not ended and that it could not read: no W&B file yet (pending, running,
    # a --force rerun queued), or, in an export, not exported (:func:`waiting_runs`); a warning names them. Each
    # {run_id, experiment, arm, seed, state}: what a report's runs.json and --json carry beside ``runs``
    waiting: list[dict] = field(default_factory=list)

    @property
    def history(self):
        return self.runs.history

    def used_runs(self) -> list[dict]:
        """run_id, experiment, arm, seed of every run with data in ``history``."""
        h = self.runs.history
        present = set(h["run_id"].unique()) if len(h) else set()
        rows = self.runs.runs
        if not len(rows):
            return []
        cols = ["run_id", "experiment", "arm", "seed"]
        return [r for r in rows[cols].to_dict("records") if r["run_id"] in present]


def resolve_experiments(spec: dict, experiments: list[str] | None, sweep: str | None) -> list[str] | None:
    """The experiments whose runs a report reads: ``--experiment`` flags, else the ``--sweep``'s,
    else the spec's (an empty list in the spec means every experiment)."""
    if experiments:
        return list(experiments)
    if sweep:
        from arctl.compose.sweep import load_sweep

        return list(load_sweep(sweep).experiments)
    exps = spec.get("experiments") or []
    return list(exps) or None


def producing_command(spec: dict, experiments: list[str] | None, sweep: str | None, where: str = "", *,
                      run_ids: list[str] | None = None, found=None, filters: list[str] | None = None) -> str:
    """The arctl command(s) that would produce the runs a report needs, in the workspace ``where`` names
    (:func:`arctl.launch.workspace.workdir_arg`: ``""`` for the one a bare command means; from a hunt, a
    report on ``--workdir ws`` said "produce them with `arctl run main`", which trains in ./arctl-runs).

    With ``run_ids`` (the runs of its cells the report found and cannot read as finished), the command finishes
    those: `arctl resume RUN` of one run; else the launch command(s) with the scale, seeds and overrides of the
    runs ``found`` (their runs table), and each ``--where`` ``filters`` in effect (:func:`missing_arm_args`, as a
    missing arm's command carries them), which resumes them and trains the cells without runs at their config;
    `arctl resume` of every run where no overrides give each run its config. From a hunt: beside stopped runs of
    the micro overrides, "produce them with `arctl run main-grpo`" planned a new 100-step run of the default
    config."""
    ids = list(dict.fromkeys(str(r) for r in run_ids or []))
    if len(ids) == 1:
        return f"`arctl resume {ids[0]}{where}`"
    rows = found if ids and found is not None and len(found) else None
    if not experiments and rows is not None and not sweep:  # every experiment: those of the runs found
        experiments = list(dict.fromkeys(rows["experiment"].astype(str)))
    uneven: list[str] = []

    def args(sweeps: list[str], experiment: str | None) -> str:
        if rows is None:
            return ""
        tail, keys = missing_arm_args(rows, sweeps, experiment, _an_arm(experiment, rows), filters)
        uneven.extend(keys)
        return tail

    first = str(rows["experiment"].iloc[0]) if rows is not None else None
    if sweep:
        command = f"`arctl sweep {sweep}{args([sweep], first)}{where}`"
    else:
        runs = " and ".join(f"`arctl run {e}{args([], e)}{where}`" for e in experiments or [])
        if spec.get("sweep") and experiments:
            runs += f" (or the whole sweep: `arctl sweep {spec['sweep']}{args([spec['sweep']], first)}{where}`)"
        command = runs or spec_hint(spec, where) or f"`arctl run EXPERIMENT{where}`"
    return f"`arctl resume {' '.join(ids)}{where}`" if uneven else command


def _an_arm(experiment: str | None, rows) -> str:
    """An arm of ``experiment`` to compose its cell with (:func:`missing_arm_args`): that of its first run in
    ``rows`` (a runs table), else its spec's first, else the first run's."""
    if experiment is None:
        return str(rows["arm"].iloc[0])
    own = rows[rows["experiment"].astype(str) == experiment]
    if len(own):
        return str(own["arm"].iloc[0])
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment

    try:
        return next(iter(load_experiment(experiment).arms))
    except (SpecError, StopIteration):
        return str(rows["arm"].iloc[0])


def spec_hint(spec: dict, where: str = "") -> str | None:
    """The spec's own ``hint`` of what produces its runs (free text with commands), and, where ``where`` names a
    workspace, that its commands need it too (from a review: `cov_variance`'s "e.g. `arctl run main-ar-uniform`"
    after a report on ``--workdir WS`` trained in ./arctl-runs)."""
    hint = spec.get("hint")
    if not hint:
        return None
    return f"{hint} (with `{where.strip()}`: the workspace this report reads)" if where else hint


def read_report_runs(
    spec: dict,
    *,
    metrics: list[str],
    experiments: list[str] | None = None,
    sweep: str | None = None,
    workdir: str | Path | None = None,
    wandb_project: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    processes: int | None = None,
    api=None,
    final_only: bool = False,
    where: list[str] | None = None,
) -> ReportData:
    """Read the runs of ``spec`` (restricted to ``metrics`` globs); raise :class:`ReportError`
    naming the producing command when there are none. ``final_only``: only the last logged value
    of each (run, metric), for reports built from :func:`final_values`. One run per cell
    (:func:`arctl.report.cells.one_run_per_cell`): ``where`` (``KEY=VALUE`` config filters) first,
    then the cell as ``sweep`` (else the spec's) composes it. A spec with ``only_listed_arms: true``
    shows only its ``arms`` (else they only come first). With ``final_only``, runs that have not
    finished are left out, with a warning naming them."""
    exps = resolve_experiments(spec, experiments, sweep)
    where_from = f"W&B project {wandb_project}" if wandb_project else str(Path(workdir or default_workdir()))
    from arctl.report.export import producing_in_export

    # an export launches no runs: what it lacks comes from `arctl export` (from a hunt: "produce them with arctl run")
    in_export = None if wandb_project else producing_in_export(Path(workdir or default_workdir()))
    from arctl.launch.workspace import workdir_arg  # (a W&B project's runs: no workspace to name)

    named = "" if wandb_project else workdir_arg(workdir or default_workdir())
    producing = in_export or producing_command(spec, exps, sweep, named)
    if not wandb_project and not Path(workdir or default_workdir()).is_dir():
        raise ReportError(
            f"workspace {where_from} does not exist; pass --workdir DIR (or set ARCTL_HOME), or produce runs "
            f"with {producing}"
        )
    context = [sweep] if sweep else [spec["sweep"]] if spec.get("sweep") else []
    runs = load_runs(
        workdir, experiments=exps, metrics=metrics, wandb_project=wandb_project, cache_dir=cache_dir,
        progress=progress, processes=processes, api=api, last_only=final_only,
        serves=serving(exps, context) if exps else None,  # a run of another experiment that is a cell's run
    )
    compose = cell_composer(context)
    read_for_served_cells(runs, compose, None if wandb_project else Path(workdir or default_workdir()))
    # what reading the files said (before the cells add theirs) that left a run's data out
    read_notes = _unreadable_notes(runs)
    runs.warnings = [*runs.warnings, *spec.get("_skipped", [])]  # files under reports/ not read as specs
    runs.history = finite_history(runs.history)
    n_read, logged_any = len(runs.runs), bool(len(runs.history))  # runs there, that logged one of ``metrics``
    read_table = runs.runs  # every run read, before any is left out: the runs that logged none, where none did
    had_runs = _runs_by_experiment(runs.runs)  # before any is left out: an experiment with runs is not "no runs"
    one_run_per_cell(runs, where=where, compose=compose, grid_keys=grid_keys(context), source=where_from)
    if spec.get("only_listed_arms") and spec.get("arms"):  # e.g. ThinkPrune's rounds 1-2: runs, not methods shown
        shown = {str(a) for a in spec["arms"]}
        runs.runs = runs.runs[runs.runs["arm"].astype(str).isin(shown)].reset_index(drop=True) if len(runs.runs) else runs.runs
        if len(runs.history):
            runs.history = runs.history[runs.history["arm"].astype(str).isin(shown)].reset_index(drop=True)
    if final_only and not wandb_project:  # how each run's job said it ended (status.json; an export's index)
        from arctl.report.export import job_states

        with_job_states(runs.runs, job_states(Path(workdir or default_workdir()), runs.runs.get("run_id", [])))
    left_out = unfinished(runs.runs) if final_only else []
    # runs of its cells the report cannot read: nothing logged yet (from a hunt: a pending run, one at its first
    # steps and a queued --force rerun were invisible, a table said "from 1 run(s)"), or left out of the export
    waiting = [] if wandb_project else waiting_runs(spec, exps, Path(workdir or default_workdir()), runs.runs, where)
    not_read = (f"not read: {waiting_note(waiting, spec.get('kind') or 'report', bool(in_export))}"
                if waiting else "")
    then = (f"in their workspace: wait for them, then {in_export}" if in_export else f"`arctl status{named}`")
    gone: set[str] = set()
    if left_out:  # a running or killed run's last values are an earlier evaluation's, not the final one's
        gone = {item.split(" ", 1)[0] for item in left_out}
        stopped = runs.runs[runs.runs["run_id"].astype(str).isin(gone)]  # their rows: their config
        runs.runs = runs.runs[~runs.runs["run_id"].astype(str).isin(gone)].reset_index(drop=True)
        runs.history = runs.history[~runs.history["run_id"].astype(str).isin(gone)].reset_index(drop=True)
        from arctl.report.export import waiting_in_export

        waiting_cmd = waiting_in_export(Path(workdir or default_workdir())) if not wandb_project else None
        if not len(runs.history):
            status = waiting_cmd or f"`arctl status{named}`"
            also = [f"{r['run_id']} ({r['state']})" for r in waiting]
            # the runs there: how to finish them, at their config (not a new run of the default one)
            finishing = producing if in_export or wandb_project else producing_command(
                spec, exps, sweep, named, run_ids=[*(i.split(" ", 1)[0] for i in left_out),
                                                   *(r["run_id"] for r in waiting)],
                found=stopped, filters=where)
            raise ReportError(f"no finished runs in {where_from} ({len(left_out) + len(also)} not finished: "
                              f"{listed([*left_out, *also])}): wait for them ({status}), or "
                              f"{'produce' if in_export or wandb_project else 'finish'} them with {finishing}")
        # the left-out line names the run and how it ended: its file's "no exit record" would say it twice
        runs.warnings = [w for w in runs.warnings if not _no_exit_note_of(w, gone)]
        # and the runs of its cells not read, in the same line
        runs.warnings = [*runs.warnings, unfinished_warning(left_out, named, waiting_cmd)
                         + (f"; {not_read}" if not_read else "")]
    elif not_read and len(runs.history):
        runs.warnings = [*runs.warnings, f"{not_read} ({then})"]
    h = runs.history
    requires = spec.get("requires")
    before_requires = len(h)
    if requires and len(h):
        ok = {m for m in h["metric"].cat.categories if fnmatch.fnmatchcase(m, requires)}
        keep_runs = set(h.loc[h["metric"].isin(ok), "run_id"].astype(str))
        runs.history = h[h["run_id"].isin(keep_runs)].reset_index(drop=True)
        h = runs.history
    if len(h):  # the runs the report reads: several of one arm at one seed would be averaged as seeds
        kept = runs.runs[runs.runs["run_id"].astype(str).isin(set(h["run_id"].astype(str)))]
        _one_scale(kept, where_from)  # first: runs of two scales are said as such, not as an arm's other configs
        one_run_per_arm_seed(kept, grid_keys(context), relaunching(context, compose, named))
    present = set(h["experiment"].astype(str).unique()) if len(h) else set()
    if experiments:  # named with --experiment: a name that is neither an experiment nor in the runs is a typo
        from arctl.compose.errors import did_you_mean
        from arctl.compose.experiment import list_experiments

        known = set(list_experiments())
        if unknown := [e for e in experiments if e not in present and e not in known]:
            raise ReportError(f"--experiment {unknown[0]!r}: no such experiment, and no runs of it in {where_from} — "
                              f"{did_you_mean(unknown[0], known)} (`arctl ls experiments` lists them)")
    if not len(h):
        what = f"experiment(s) {', '.join(exps)}" if exps else "any experiment"
        logged = f" that logged {requires}" if requires else f" with metrics {', '.join(metrics)}"
        cmd = spec_hint(spec, named) if requires and spec.get("hint") and not in_export else producing
        unreadable = read_notes
        if unreadable:  # the runs may be there: say which files could not be read, not "produce them"
            raise ReportError(
                f"no readable runs of {what}{logged} in {where_from}: {len(unreadable)} W&B file(s) could not be read "
                f"(first: {' '.join(str(unreadable[0]).split())[:300]}); check or remove them, or produce new runs "
                f"with {cmd}")
        glob = None if logged_any else metrics  # what the runs there logged none of: a key, or `requires`
        if requires and before_requires:
            glob = [requires]
        if n_read and glob and not in_export and not wandb_project and all(map(evaluation_metric, glob)) and (
                wait := evaluation_wait(Path(workdir or default_workdir()), read_table)):
            # every run there is under way and logs this metric at its next evaluation: not a typo, nor "produce"
            raise ReportError(f"no runs of {what}{logged} in {where_from} yet: {wait}; wait for them "
                              f"(`arctl status{named}`)")
        if n_read and glob:  # runs there: not "produce them" alone (from a hunt: a typo in key: said so)
            near = _closest_keys(glob, lambda: _logged_metrics(workdir, exps, wandb_project, cache_dir, api))
            tail = f" (did you mean {' or '.join(near)}?)" if near else ""
            raise ReportError(f"no runs of {what}{logged} in {where_from}: the {n_read} run(s) there logged none"
                              f"{tail}; fix {spec.get('_path') or 'the spec'} if that is a typo, else produce runs "
                              f"that log it with {cmd}")
        if waiting:  # runs there that logged nothing yet: not "produce them"
            said = waiting_note(waiting, spec.get("kind") or "report", bool(in_export))
            raise ReportError(f"no runs of {what}{logged} in {where_from} yet: {said}; wait for them ({then})")
        raise ReportError(f"no runs of {what}{logged} in {where_from}; produce them with {cmd}")
    waiting_cells = {tuple(c) for r in waiting for c in r["cells"]}
    unread = [e for e in (exps or []) if e not in present and (had_runs.get(e) or e in {c[0] for c in waiting_cells})]
    if unread:  # runs there, none read: not "no runs yet" (from a hunt: a run still at its first steps was)
        kept = set(runs.runs["run_id"].astype(str)) if len(runs.runs) else set()
        # (an experiment whose runs all logged nothing yet: the not-read line names them)
        runs.warnings = [*runs.warnings, *(_unread_note(e, had_runs[e], gone, kept, requires or ", ".join(metrics), named,
                                                        spec.get("kind") or "report") for e in unread if had_runs.get(e))]
    missing = [e for e in (exps or []) if e not in present and e not in unread]
    # an arm whose runs have logged nothing yet is not an arm without runs ("produce them with ...")
    absent = missing_arms(spec, exps, present | {c[0] for c in waiting_cells},
                          set(h["arm"].astype(str).unique()) | {c[1] for c in waiting_cells})
    if absent:  # a line of the figure or a row of the table the spec lists, not drawn: said, as a missing experiment is
        read_rows = runs.runs[runs.runs["run_id"].astype(str).isin(set(h["run_id"].astype(str)))]
        runs.warnings = [*runs.warnings, missing_arms_warning(spec, absent, sweep, where_from, in_export, named,
                                                              runs_read=read_rows, filters=where)]
    if sweep and not in_export and (note := unlaunched_seeds_note(sweep, exps, read_table, waiting, compose, named)):
        runs.warnings = [*runs.warnings, note]
    if note := uneven_seeds_note(h, spec.get("arms")):
        runs.warnings = [*runs.warnings, note]
    if note := warmup_mix_note(runs.runs[runs.runs["run_id"].astype(str).isin(set(h["run_id"].astype(str)))]
                               if len(h) and "run_id" in runs.runs.columns else runs.runs.iloc[:0]):
        runs.warnings = [*runs.warnings, note]
    return ReportData(runs=runs, experiments=exps, missing=missing, source=where_from,
                      workdir=None if wandb_project else Path(workdir or default_workdir()), missing_arms=list(absent),
                      unread=unread, named=named,
                      waiting=[{k: r[k] for k in ("run_id", "experiment", "arm", "seed", "state")} for r in waiting])


def unlaunched_seeds_note(sweep: str, experiments: list[str] | None, read, waiting: list[dict], compose,
                          where: str = "") -> str | None:
    """The warning of a report on ``--sweep`` ``sweep`` whose seeds (the sweep's ``seeds``, else its experiments')
    include some no run of ``experiments`` was read at (``read``: every run read, left out or not) nor waits for
    (``waiting``: :func:`waiting_runs`), with the launch of them (``--scale`` of the runs read where that is not the
    one the sweep composes), or None. From a hunt: seeds added to the sweep's spec and not launched yet were not
    said; the figure said "from 4 run(s)"."""
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment
    from arctl.compose.sweep import load_sweep
    from arctl.config.ranges import seeds_text
    from arctl.report.cells import _plain, run_scale

    try:
        spec = load_sweep(sweep)
        listed_seeds = set(spec.seeds or [s for e in spec.experiments if e in (experiments or spec.experiments)
                                          for s in load_experiment(e).seeds])
    except SpecError:
        return None
    recs = read.to_dict("records") if len(read) else []
    had = {int(s) for r in recs if isinstance(s := _plain(r.get("seed")), int | float)} | {
        int(r["seed"]) for r in waiting if r.get("seed") is not None}
    if not recs or not (missing := sorted(listed_seeds - had)):
        return None
    scales = {s for s in (run_scale(r) for r in recs) if s is not None}
    at = ""
    if len(scales) == 1 and (default := compose(str(recs[0]["experiment"]), str(recs[0]["arm"]), missing[0], None)):
        at = f" --scale {next(iter(scales))}" if run_scale(default, prefix="") not in scales else ""
    return (f"sweep {sweep} lists seed(s) {seeds_text(missing)}, which no run read here has (not launched yet?): "
            f"launch them with `arctl sweep {sweep} --seeds {seeds_text(missing)}{at}{where}`")


def uneven_seeds_note(history, arms=None) -> str | None:
    """The warning of a figure or table whose arms are read at uneven seed counts (``history``'s runs: after one
    arm's edit, `--where` keeps 2 seeds of it beside 4 of another; from a hunt: only the CSV's ``n`` said so), or
    None: each arm's count and seeds, the spec's ``arms`` first."""
    from arctl.config.ranges import seeds_text
    from arctl.report.specs import arm_label, order

    if not len(history):
        return None
    seeds: dict[str, set[int]] = {}
    for arm, seed in history[["arm", "seed"]].drop_duplicates().itertuples(index=False):
        if seed is not None and seed == seed and int(seed) >= 0:
            seeds.setdefault(str(arm), set()).add(int(seed))
    if len({len(s) for s in seeds.values()}) < 2:
        return None
    said = ", ".join(f"{arm_label(a)} {len(seeds[a])} (seed{'s' if len(seeds[a]) > 1 else ''} {seeds_text(seeds[a])})"
                     for a in order(seeds, arms))
    return f"the arms are read at uneven seed counts: {said}; their means and intervals are over different seeds"


WARMUP_KEY, WARMUP_SHA, WARMUP_SOURCE = (warmup_column(f) for f in ("key", "weights_sha256", "source"))


def warmup_mix_note(read) -> str | None:
    """The warning of a report whose runs of one warm-up key (``read``: the runs table of those it reads; the tiny
    backend records ``warmup`` in each run's W&B config) start from different weights, or None: for each such key,
    each weights' sha256, where they came from and how many runs. From a hunt: with ``ARCTL_TINY_WARMUP=train`` a
    launch skipped the completed seeds, which started from the shipped warm-up, and trained new seeds from a warm-up
    trained here; the figure drew them together as seeds of one arm (on another kind of machine the two differ)."""
    if not len(read) or not {WARMUP_KEY, WARMUP_SHA} <= set(read.columns):
        return None
    groups: dict[str, dict[str, list[tuple[str, str]]]] = {}  # key -> weights' sha256 -> (run id, source)
    for rec in read.to_dict("records"):
        key, sha, source = rec.get(WARMUP_KEY), rec.get(WARMUP_SHA), rec.get(WARMUP_SOURCE)
        if isinstance(key, str) and isinstance(sha, str) and key and sha:
            groups.setdefault(key.removesuffix(TRAINED_SUFFIX), {}).setdefault(sha, []).append(
                (str(rec["run_id"]), source if isinstance(source, str) and source else ""))
    mixed = {k: v for k, v in groups.items() if len(v) > 1}  # one weights reached two ways (shipped, trained alike
    if not mixed:  # on the shipped one's kind of machine) is one starting point (from a review)
        return None

    def label(sha: str, runs: list[tuple[str, str]]) -> str:
        sources = ", ".join(sorted({s for _, s in runs if s}))
        n = len(runs)
        return f"{sha[:12]}{f' ({sources})' if sources else ''} for {n} run{'s' if n > 1 else ''} (e.g. {runs[0][0]})"

    said = "; ".join(f"warm-up {key}: " + ", ".join(label(sha, runs) for sha, runs in sorted(v.items()))
                     for key, v in sorted(mixed.items()))
    return (f"runs of one config start from different warm-up weights ({said}): their differences include the "
            "starting point; train them from one (the same ARCTL_TINY_WARMUP for every launch, `--force` for the others)")


def relaunching(context: list[str], compose, where: str = ""):
    """``relaunch(arm, [(a runs-table row of each config, its seeds), ...])`` of
    :func:`arctl.report.cells.one_config_per_arm`: the launch that trains again, as the specs now stand (``compose``,
    :func:`arctl.report.cells.cell_composer` of the sweeps ``context``), the seeds of the configs that are not their
    cell as composed: `arctl sweep S --seeds 0,1` (S, the report's sweep), else `arctl run E --arm A --seeds 0,1`, in
    the workspace ``where`` names; None where no config read is the cell as composed (runs of command-line overrides:
    a launch of the specs would train another config), or a cell no longer composes."""
    from arctl.config.ranges import seeds_text
    from arctl.report.cells import differs_from_cell, run_scale

    keys = set(grid_keys(context))

    def relaunch(arm: str, configs: list[tuple[dict, list[int]]]) -> str | None:
        stale: list[int] = []
        current = None
        for row, seeds in configs:
            cell = compose(str(row.get("experiment")), arm, seeds[0], run_scale(row))
            if cell is None:
                return None
            if [k for k in differs_from_cell(row, cell) if k not in keys]:
                stale += seeds
            else:
                current = row
        if not stale or current is None:
            return None
        experiment, scale = str(current.get("experiment")), run_scale(current)
        default = compose(experiment, arm, stale[0], None)
        at = f" --scale {scale}" if scale and default is not None and run_scale(default, prefix="") != scale else ""
        seeds = f" --seeds {seeds_text(sorted(set(stale)))}"
        if context:
            return f"`arctl sweep {context[0]}{seeds}{at}{where}`"
        return f"`arctl run {experiment} --arm {arm}{seeds}{at}{where}`"

    return relaunch


def read_for_served_cells(runs: Runs, compose, workdir: Path | None) -> None:
    """In place: each run of the workspace ``workdir`` (None: a W&B project's, which have none) read for every
    requested cell its shared.json names (of its ``serves`` column, :func:`arctl.track.runs.load_runs`': the cells of
    the report's experiments), one row of its table and a copy of its history per cell, as the claims read them:
    a cell of its own experiment too (from a hunt: with ``share_arms``, an arm renamed, or written alike, was said
    to have no runs, and the command given retrained nothing). A cell only its config serves
    (:func:`arctl.report.cells.serving`: no launch said it is that cell's run) stays in ``serves``. A cell whose
    config, as ``compose`` (:func:`arctl.report.cells.cell_composer`) composes it now, is not the run's is not read
    (:func:`arctl.report.claims._not_shared`), nor a second cell of an arm it is read for already (a figure's arm
    would count it twice); its own cell is left out where that no longer composes and a cell it serves does (an
    arm renamed: not drawn twice, under the old name and the new)."""
    import pandas as pd

    from arctl.report.cells import _plain, run_scale
    from arctl.report.claims import _not_shared, _served_cells
    from arctl.track.runs.discover import read_served

    table = runs.runs
    if workdir is None or not len(table) or "serves" not in table.columns:
        return
    rows: list[dict] = []
    added: list[tuple[str, str, str, str, str]] = []  # (run_id, its row's experiment, arm, the served cell's)
    dropped: set[tuple[str, str, str]] = set()  # its own row, where it is read for a served cell instead
    for rec in table.to_dict("records"):
        cells, seed = _served_cells(rec.get("serves")), _plain(rec.get("seed"))
        run_id, experiment, arm = str(rec["run_id"]), str(rec["experiment"]), str(rec["arm"])
        if cells:  # those the launch said it serves (an earlier arctl's shared.json: experiments, its own arm)
            named = read_served(workdir / "runs" / run_id, str(rec.get(CONFIG_PREFIX + "arm") or arm))
            cells = [c for c in cells if c in named]
        if not cells or not isinstance(seed, int | float):
            rows.append(rec)
            continue
        view = _RunRead(run_id, experiment, arm, int(seed))
        arms, served = {arm}, []
        for e, a in cells:
            if a not in arms and not _not_shared(rec, view, e, a, compose):
                arms.add(a)
                served.append((e, a))
        if served and compose(experiment, arm, int(seed), run_scale(rec)) is None:
            dropped.add((run_id, experiment, arm))
        else:
            rows.append(rec)
        rows += [{**rec, "experiment": e, "arm": a} for e, a in served]
        added += [(run_id, experiment, arm, e, a) for e, a in served]
    if not added:
        return
    runs.runs = pd.DataFrame.from_records(rows, columns=table.columns)
    h = runs.history
    if not len(h):
        return
    parts = [h]
    for run_id, experiment, arm, e, a in added:
        part = h[(h["run_id"] == run_id) & (h["experiment"] == experiment) & (h["arm"] == arm)]
        parts.append(part.assign(experiment=e, arm=a))
    out = pd.concat(parts, ignore_index=True)
    for run_id, experiment, arm in dropped:
        out = out[~((out["run_id"] == run_id) & (out["experiment"] == experiment) & (out["arm"] == arm))]
    for column in ("experiment", "arm"):
        out[column] = out[column].astype(str).astype("category")
    runs.history = out.reset_index(drop=True)


def waiting_runs(spec: dict, experiments: list[str] | None, workdir: Path, read,
                 where: list[str] | None = None) -> list[dict]:
    """The runs of the report's cells that it cannot read and that have not ended: in a workspace, those that have
    logged nothing yet (:func:`arctl.report.export.unlogged_runs`: pending, running, a ``--force`` rerun queued); in
    an export, those its index names as skipped (:func:`arctl.report.export.skipped_in_export`). Of ``experiments``
    (None: any; a run counts for the cells it serves too), of the spec's ``arms`` where it shows only those, and of
    the scale of the runs ``read`` (the runs table) where they ran at one, and of ``where`` (``KEY=VALUE``): a run
    whose config.yaml holds another value of KEY is not one of the report's (from a review: a run of another
    learning rate was named beside ``--where optim.lr=...``); one without the key, or of an export, is kept. Each a
    dict: run_id, experiment, arm, seed, state (as the report says it), cells (every cell of the report it is a run
    of)."""
    from arctl.report.cells import conditions_for, parse_where, run_scale, same_value
    from arctl.report.export import INDEX_FILE, skipped_in_export, unlogged_runs
    from arctl.track.runs.discover import read_run_yaml
    from arctl.track.runs.tidy import flatten_config

    conditions = parse_where(where)

    def other_config(run) -> bool:
        mine = [conditions[i][:2] for i in conditions_for(conditions, run.experiment, run.arm)]
        if not mine:
            return False
        try:
            flat = flatten_config(read_run_yaml(workdir / "runs" / run.run_id / "config.yaml") or {})
        except Exception:  # noqa: BLE001 - a config that cannot be read says nothing against the run
            return False
        return any(key in flat and not same_value(flat[key], value) for key, value in mine)

    found = skipped_in_export(workdir) if (workdir / INDEX_FILE).is_file() else unlogged_runs(workdir)
    rows = read.to_dict("records") if len(read) else []
    read_ids = {str(r["run_id"]) for r in rows}
    scales = {s for s in (run_scale(r) for r in rows) if s is not None}
    shown = {str(a) for a in spec["arms"]} if spec.get("only_listed_arms") and spec.get("arms") else None
    out = []
    for run in found:
        cells = [c for c in [(run.experiment, run.arm), *run.cells]
                 if (experiments is None or c[0] in experiments) and (shown is None or c[1] in shown)]
        if not cells or run.run_id in read_ids or (len(scales) == 1 and run.scale not in (None, *scales)):
            continue
        if conditions and other_config(run):
            continue
        out.append({"run_id": run.run_id, "experiment": cells[0][0], "arm": cells[0][1], "seed": run.seed,
                    "state": run.state, "cells": cells})
    return out


def waiting_note(waiting: list[dict], kind: str, in_export: bool) -> str:
    """"2 run(s) of this table's cells have logged nothing yet: A (pending), B (running, nothing logged yet)" of
    :func:`waiting_runs` (in an export: "are not in this export")."""
    what = "are not in this export" if in_export else "have logged nothing yet"
    named = [f"{r['run_id']} ({r['state']})" for r in waiting]
    return f"{len(waiting)} run(s) of this {kind}'s cells {what}: {listed(named)}"


# how status.json says a job that has not ended stands (its job's words; :func:`live_runs`)
LIVE_STATUS = {"running": "running", "stopping": "stopping", "submitted": "pending", "requeued": "pending"}


def live_runs(workdir: Path, run_ids) -> dict[str, str]:
    """run_id -> how each of ``run_ids`` (runs of the workspace ``workdir``) that is under way stands: "running",
    "stopping" or "pending" (queued, requeued): a job's status.json, else its registry row that is active
    (:data:`arctl.launch.states.ACTIVE`); not a run that ended (:func:`arctl.report.export.run_state`), nor one whose
    launch died before it submitted it. {} in an export (its runs log nothing more into it)."""
    import time

    from arctl.launch import states
    from arctl.launch.refresh import interrupted_launch
    from arctl.report.export import INDEX_FILE, not_ended, registry_rows

    if (workdir / INDEX_FILE).is_file():
        return {}
    rows = {r.run_id: r for r in registry_rows(workdir)}
    recorded = {rid: r.state.lower() for rid, r in rows.items() if r.state in states.TERMINAL}
    now, out = time.time(), {}
    for rid, run_dir, row, own in not_ended(workdir, run_ids, rows, recorded):
        if row is not None and interrupted_launch(row, run_dir, now):
            continue
        if own in LIVE_STATUS:
            out[rid] = LIVE_STATUS[own]
        elif row is not None and row.state in states.ACTIVE:
            out[rid] = "running" if row.state == states.RUNNING else "pending"
    return out


def evaluation_metric(glob: str) -> bool:
    """Whether ``glob`` (a report's metric glob, ``eval/*/anytime_acc``) is an evaluation metric a run logs
    (:func:`arctl.report.claims.eval_names`): a run logs it at its evaluations (every ``trainer.test_freq`` steps and
    at its last step), not at every step. A typo of one (``eval/*/final_ac``) is not."""
    from arctl.report.claims import eval_names

    return glob in _closest_keys([glob], eval_names)


def _config_count(rec: dict, key: str) -> int | None:
    """A run's config count ``key`` (``trainer.test_freq``) from its runs-table row, or None (not set, not a count)."""
    value = rec.get(CONFIG_PREFIX + key)
    try:
        return int(value) if value is not None and value == value and int(value) == value and value >= 0 else None
    except (TypeError, ValueError):
        return None


def next_evaluation(rec: dict) -> str:
    """When the run of runs-table row ``rec`` (its ``last_step``, its config's ``trainer.test_freq`` and
    ``trainer.total_steps``) evaluates next, as a report says it: "next evaluation at step 20, trainer.test_freq=20"; at
    its last step where no evaluation comes before (test_freq 0: only then)."""
    freq, total = _config_count(rec, "trainer.test_freq"), _config_count(rec, "trainer.total_steps")
    step = _step(rec.get("last_step"))
    if freq is None:
        return "next evaluation at its next trainer.test_freq step"
    at = (step // freq + 1) * freq if freq and step is not None else None
    if at is None or (total is not None and at > total):  # none before its last step: the final evaluation
        at_text = f"at its last step{f' ({total})' if total is not None else ''}"
    else:
        at_text = f"at step {at}"
    return f"next evaluation {at_text}, trainer.test_freq={freq}"


def _step(value) -> int | None:
    """A runs-table row's step (``last_step``) as an int, or None (unknown: NaN, missing)."""
    import numbers

    return int(value) if isinstance(value, numbers.Real) and value == value else None


def evaluation_wait(workdir: Path, table) -> str | None:
    """What a report whose runs (``table``, their runs-table rows) logged none of its evaluation metrics says where
    every one of them is under way (:func:`live_runs`): "the 1 run(s) there are under way and have logged no evaluation: RUN
    (running, at step 3; next evaluation at step 20, trainer.test_freq=20)"; None where one is not (it ended: a
    metric it never logged). From a hunt: a figure of a run at its first steps said "the 1 run(s) there logged none
    (did you mean train/think_len/mean?)", as of a typo."""
    recs = table.to_dict("records") if table is not None and len(table) else []
    live = live_runs(workdir, [r["run_id"] for r in recs])
    if not recs or any(str(r["run_id"]) not in live for r in recs):
        return None
    said = []
    for r in recs:
        at = f"at step {step}" if (step := _step(r.get("last_step"))) is not None else "no step logged yet"
        said.append(f"{r['run_id']} ({live[str(r['run_id'])]}, {at}; {next_evaluation(r)})")
    return f"the {len(recs)} run(s) there are under way and have logged no evaluation: {listed(said)}"


def _logged_metrics(workdir, experiments, wandb_project, cache_dir, api) -> list[str]:
    """Every metric key the runs of ``experiments`` logged (from the read's cache: the last value of each), or
    [] where they cannot be read again."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # said once, by the read of the report
            runs = load_runs(workdir, experiments=experiments, metrics=None, wandb_project=wandb_project,
                             cache_dir=cache_dir, progress=False, api=api, last_only=True)
    except Exception:  # noqa: BLE001 - a suggestion only: the error it is part of is the one to show
        return []
    h = runs.history
    return [str(m) for m in h["metric"].cat.categories] if len(h) else []


def _closest_keys(globs: list[str], logged) -> list[str]:
    """The logged keys nearest ``globs`` (a report's metric globs, ``eval/*/final_ac``), each written as a glob
    of the same form (``eval/*/final_acc``): what a typo in a spec's ``key`` or ``requires`` meant. ``logged``:
    a callable giving the runs' keys (read only here, where a report found none)."""
    import difflib
    import re

    def as_glob(key: str) -> str:
        p = parse_metric(key)
        if p is not None and p.namespace == "eval":
            return f"eval/*/{p.name}" + ("@*" if p.budget is not None else "")
        return re.sub(r"@\d+$", "@*", key)

    forms = sorted({as_glob(k) for k in logged()})
    near: list[str] = []
    for g in globs:
        near += [f for f in difflib.get_close_matches(g, forms, n=2, cutoff=0.6) if f not in near]
    return near


def finite_history(history):
    """``history`` with every non-finite value (NaN, ±inf) as NaN: the one place a report's values enter, so
    every table and figure leaves a run that logged an infinity out of a mean, as one that logged NaN. From a
    hunt: a run's +inf final accuracy made its arm's cell "inf", bold as the best, its score curve's band 100%,
    and ``--json`` null beside it."""
    import numpy as np

    if not len(history):
        return history
    values = history["value"].to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if not (bad & ~np.isnan(values)).any():
        return history
    return history.assign(value=np.where(bad, np.nan, values))


def _runs_by_experiment(table) -> dict[str, list[str]]:
    """experiment -> its run ids, of a runs table (:class:`arctl.track.runs.Runs`' ``runs``)."""
    out: dict[str, list[str]] = {}
    if len(table) and "experiment" in table.columns:
        for e, r in zip(table["experiment"].astype(str), table["run_id"].astype(str)):
            out.setdefault(e, []).append(r)
    return out


def _unreadable_notes(runs: Runs) -> list[str]:
    """The notes of ``runs`` (what reading them said) of what could not be read: a W&B file no record could be
    read from (its one note ending with :data:`NO_RECORDS`), a run folder that could not be looked into. Not the
    other notes of a W&B file (damage in a file whose other records were read; a run still running,
    :data:`NO_EXIT_RECORD`), nor a run that logged NaN: from a hunt, a report while a run trained said "1 W&B
    file(s) could not be read ... check or remove them" of the file being written, its last record not yet whole."""
    nonfinite = set(runs.nonfinite)
    return [w for w in runs.warnings
            if w.endswith(NO_RECORDS) or not (w in nonfinite or PurePath(w.split(": ", 1)[0]).suffix == ".wandb")]


def _no_exit_note_of(note: str, run_ids: set[str]) -> bool:
    """Whether ``note`` is a W&B file's "no exit record" note of a file under one of ``run_ids``' run folders
    (``runs/<run_id>/wandb/...``)."""
    if not note.endswith(NO_EXIT_RECORD):
        return False
    return any(part in run_ids for part in Path(note[: -len(NO_EXIT_RECORD)].rstrip(": ")).parts)


def _unread_note(experiment: str, run_ids: list[str], gone: set[str], kept: set[str], what: str, where: str,
                 kind: str) -> str:
    """The warning of an experiment that has runs of which the report reads none (``run_ids``), each said with
    why: not finished (in ``gone``: the left-out line names them), set aside (not in ``kept``: another run of its
    cell was read, or --where or the spec left it out), or no value of ``what`` logged yet."""
    why = {"not finished": [r for r in run_ids if r in gone],
           "set aside for another run of its cell or by --where": [r for r in run_ids if r not in gone and r not in kept],
           f"no {what} logged yet": [r for r in run_ids if r not in gone and r in kept]}
    said = "; ".join(f"{len(ids)} {reason} ({listed(ids, 3)})" for reason, ids in why.items() if ids)
    return (f"{experiment} has {len(run_ids)} run(s), none of which this {kind} reads: {said}; "
            f"it is left out (`arctl status{where}` shows its runs)")


def missing_arms(spec: dict, experiments: list[str] | None, present_experiments: set[str],
                 present_arms: set[str]) -> dict[str, list[str]]:
    """The arms the spec lists (``arms``) that no run read has: arm -> the experiments (of those read that have
    runs) whose spec defines it. With ``experiments`` (the spec's, ``--experiment``'s or the sweep's), an arm only
    experiments without any run define is not named here (the experiment is: :attr:`ReportData.missing`), nor one
    no experiment read defines (``--experiment main-grpo`` of a figure of four arms); an experiment whose spec is
    not on the search path defines every arm (the arm is named)."""
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment

    absent = [str(a) for a in spec.get("arms") or [] if str(a) not in present_arms]
    if not absent or experiments is None:
        return {a: [] for a in absent}
    defined: dict[str, list[str]] = {}
    for e in experiments:
        if e not in present_experiments:
            continue
        try:
            arms = set(load_experiment(e).arms)
        except SpecError:
            arms = set(absent)
        for a in absent:
            if a in arms:
                defined.setdefault(a, []).append(e)
    return {a: defined[a] for a in absent if a in defined}


def missing_arms_warning(spec: dict, absent: dict[str, list[str]], sweep: str | None, where_from: str,
                         command: str | None = None, where: str = "", *, runs_read=None,
                         filters: list[str] | None = None) -> str:
    """One line naming the arms of :func:`missing_arms` and the command that produces their runs (``command``
    where it is given: an export's, :func:`arctl.report.export.producing_in_export`), in the workspace
    ``where`` names (:func:`producing_command`). With ``runs_read`` (the runs table of the runs the report
    reads), the command trains runs read beside them: their scale, their seeds and the overrides they share, and
    the ``--where`` ``filters`` in effect (:func:`missing_arm_args`; from a hunt: `arctl run my-lam --arm ar-new`
    beside runs of the micro overrides at seeds 0-2 trained a 100-step run of one seed of another config)."""
    from arctl.report.specs import arm_label

    def named(a: str) -> str:
        return a if arm_label(a) == a else f"{arm_label(a)} ({a})"

    context = [sweep] if sweep else [spec["sweep"]] if spec.get("sweep") else []
    found: dict[tuple, tuple[str, list[str]]] = {}

    def args(sweeps: list[str], experiment: str | None, arm: str) -> str:
        key = (tuple(sweeps), experiment, arm)
        if key not in found:
            found[key] = missing_arm_args(runs_read, sweeps, experiment, arm, filters)
        return found[key][0]

    first = next(((exps[0] if exps else None, a) for a, exps in absent.items()), (None, ""))
    if command:
        cmd = command
    elif sweep:
        cmd = f"`arctl sweep {sweep}{args(context, *first)}{where}`"
    else:
        by_exp: dict[tuple[str, str], list[str]] = {}  # (experiment, its arguments) -> its arms
        for a, exps in absent.items():
            for e in exps or ["EXPERIMENT"]:
                by_exp.setdefault((e, args([], None if e == "EXPERIMENT" else e, a)), []).append(a)
        cmd = " and ".join(f"`arctl run {e} {' '.join(f'--arm {a}' for a in arms)}{tail}{where}`"
                           for (e, tail), arms in by_exp.items())
        if spec.get("sweep"):
            cmd += f" (or the whole sweep: `arctl sweep {spec['sweep']}{args(context, *first)}{where}`)"
    uneven = sorted({k for _, keys in found.values() for k in keys})
    unlike = (f"; but the runs read differ from their cells in {', '.join(uneven[:3])}"
              f"{' and more' if len(uneven) > 3 else ''}, in no one way that overrides give every run: add those of "
              f"the runs {'they' if len(absent) > 1 else 'it'} should match") if uneven and not command else ""
    return (f"{len(absent)} arm(s) of the spec have no runs in {where_from}: {', '.join(named(a) for a in absent)} "
            f"(left out of the {spec.get('kind') or 'report'}); produce them with {cmd}{unlike}")


@dataclass(frozen=True)
class _RunRead:
    """A run a report reads, as :func:`arctl.report.claims_render.shared_overrides` takes it (a claims view's
    names)."""

    run_id: str
    experiment: str
    arm: str
    seed: int


def missing_arm_args(runs_read, sweeps: list[str], experiment: str | None, arm: str,
                     filters: list[str] | None = None) -> tuple[str, list[str]]:
    """What a command that trains ``arm``'s missing runs (``arctl run EXPERIMENT --arm ARM``, or ``arctl sweep``
    of ``sweeps``, as ``sweeps`` compose its cells: none, the experiment alone) adds after its name, each with a
    space before it, so that its runs are read beside ``runs_read`` (the runs table of those the report reads):
    ``--scale`` where theirs is not the one the command composes, ``--seeds`` theirs (``0-2``), the overrides
    every run read shares against its cell (:func:`arctl.report.claims_render.shared_overrides`, as the claims'
    commands carry them), and each of the ``--where`` ``filters`` the arm's cell so composed does not meet (the
    runs it trains are those the same ``--where`` keeps); and the keys the runs read differ from their cells in,
    where no overrides give every run its config (the command then trains the cells as composed)."""
    import shlex

    from arctl.compose.overrides import override_key
    from arctl.config.hydra_text import override_value
    from arctl.config.ranges import seeds_text
    from arctl.report.cells import cell_composer, conditions_for, parse_where, run_scale, same_value
    from arctl.report.claims_render import shared_overrides

    if runs_read is None or not len(runs_read):
        return "", []
    recs = [r for r in runs_read.to_dict("records") if r.get("seed") is not None and r.get("seed") == r.get("seed")]
    views = [_RunRead(str(r["run_id"]), str(r["experiment"]), str(r["arm"]), int(r["seed"])) for r in recs]
    compose = cell_composer(sweeps)
    overrides, uneven = shared_overrides(views, runs_read, sweeps, compose)
    scales = {s for s in (run_scale(r) for r in recs) if s is not None}
    scale = next(iter(scales)) if len(scales) == 1 else None
    seeds = sorted({v.seed for v in views})
    out = []
    if scale and experiment and (default := compose(experiment, arm, seeds[0], None)) is not None \
            and run_scale(default, prefix="") != scale:
        out.append(f"--scale {scale}")
    if seeds:
        out.append(f"--seeds {seeds_text(seeds)}")
    texts = list(overrides)
    parsed = parse_where(filters)
    conditions = [parsed[i][:2] for i in conditions_for(parsed, experiment, arm)]
    cell = cell_composer(sweeps, texts)(experiment, arm, seeds[0] if seeds else 0, scale) \
        if conditions and experiment else None
    set_keys = {override_key(o) for o in texts}
    for key, value in conditions:
        if cell is not None and key in cell and key not in set_keys and not same_value(cell[key], value) \
                and not _another_arms_setting(compose, experiment, arm, key, value, seeds[0] if seeds else 0, scale):
            texts.append(f"{key}={override_value(value)}")
    return "".join(f" {a}" for a in [*out, *(shlex.quote(o) for o in texts)]), uneven


def _another_arms_setting(compose, experiment: str, arm: str, key: str, value, seed: int, scale: str | None) -> bool:
    """Whether ``key=value`` is what the spec of another arm of ``experiment`` than ``arm`` sets (``compose``'s
    ``set_by_spec``): a ``--where`` that picks that arm's config (its edited learning rate, its seeds at the old one
    left out), not a value for ``arm`` to train at (from a hunt: `arctl sweep evs --seeds 2,3 optim.lr=0.0005`, GRPO's
    edit, was given to train GRPO+BRPO at it)."""
    from arctl.compose.errors import SpecError
    from arctl.compose.experiment import load_experiment
    from arctl.report.cells import same_value

    try:
        others = [a for a in load_experiment(experiment).arms if a != arm]
    except SpecError:
        return False
    for other in others:
        cell = compose(experiment, other, seed, scale)
        if cell is not None and key in compose.set_by_spec(experiment, other, scale) and same_value(cell.get(key), value):
            return True
    return False


def full_support(n):
    """Where a mean over runs is drawn (a figure's points): where as many runs logged a value as at the curve's
    fullest point. A point only some of them logged (a run still running or stopped early, a NaN, an evaluation
    at other budgets) would move the curve by who is in it; it is left out of the curve and kept, with its n, in
    the figure's CSV (:func:`left_out_note`). The rule of training_curves, score_curve and cov_variance. A
    point no run has a finite value at is never drawn (a curve whose every run logged NaN has none: it drew
    nothing, yet counted every point as full, so its arm was in the legend without a line or a word)."""
    import numpy as np

    n = np.asarray(n)
    return (n == n.max()) & (n > 0) if n.size else np.zeros(0, dtype=bool)


def left_out_note(who: str, what: str, points, *, of: str, curve: str, why: str) -> str:
    """The warning of the points ``who``'s curve leaves out (:func:`full_support`): ``what`` names them (step,
    budget), ``of`` the runs averaged ("of the arm"), ``curve`` the line ("its curve"), ``why`` how a point comes
    to be."""
    points = sorted(points)
    shown = ", ".join(str(p) for p in points[:6]) + (", ..." if len(points) > 6 else "")
    return (f"{who}: {len(points)} {what}(s) ({shown}) that not every run{of} logged are left out of {curve} "
            f"({why}; the CSV has them with their n)")


def _one_scale(kept, where_from: str) -> None:
    """ReportError where the runs a report reads ran at several scales: another task or budgets under the
    same metric names (tiny's search task and tiny-running-sum both log eval/toy/*), averaged as seeds
    (from a review: a table averaged both tasks without a word)."""
    from arctl.report.cells import run_scale

    counts: dict[str, int] = {}
    key = "scale"  # an older layout's key; scale.name where the configs have it
    for rec in kept.to_dict("records"):
        if (scale := run_scale(rec)) is not None:
            counts[scale] = counts.get(scale, 0) + 1
            if run_scale({"config.scale.name": rec.get("config.scale.name")}) is not None:
                key = "scale.name"
    if len(counts) > 1:
        found = ", ".join(f"{scale} ({n} runs)" for scale, n in sorted(counts.items()))
        first = max(counts, key=counts.get)
        raise ReportError(f"the runs in {where_from} ran at several scales: {found}; one figure or table would "
                          f"average them as seeds — choose one with --where {key}={first}")


def final_values(history):
    """The last logged value of every (run, arm, metric): the final evaluation. A run read for several arms
    (:func:`read_for_served_cells`: two arms written alike under ``share_arms``) has a copy of its history under
    each and keeps a value under each, as a figure draws it under each (from a hunt: one value per (run, metric)
    left a table one of the two rows, and which one varied)."""
    if not len(history):
        return history
    keys = ["run_id", "arm", "metric"] if "arm" in history.columns else ["run_id", "metric"]
    return history.drop_duplicates(subset=keys, keep="last").reset_index(drop=True)


def first_values(history):
    """The first logged value of every (run, metric): the first evaluation (the model RL starts from). One per run,
    not per arm as :func:`final_values`: its reader (:func:`arctl.report.cov_variance.series_table`) averages runs,
    not arms, so a run read for two arms is one run there."""
    if not len(history):
        return history
    return history.drop_duplicates(subset=["run_id", "metric"], keep="first").reset_index(drop=True)


def config_list(value) -> list | None:
    """A config list of a runs-table row (a list, or its text form from a W&B config) as a list, or None (not set,
    not a list)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str) and value.lstrip().startswith("["):
        from arctl.config import safe_yaml

        try:
            value = safe_yaml.load(value)
        except (safe_yaml.YamlError, TypeError):
            return None
    return list(value) if isinstance(value, list | tuple) else None


def eval_budgets_notes(data: ReportData, metrics, arms=None) -> list[str]:
    """The warnings of a figure or table that sets side by side an eval summary of runs that differ in the config fact
    it depends on (:data:`BUDGET_FACTS`): ``anytime_acc`` their ``eval.budgets``, ``final_acc`` the largest of them,
    ``grid_anytime_acc``, ``curve_auc`` and ``acc_at_frac/*`` their ``eval.grid``; one line per fact that differs.
    ``metrics``: the keys (or globs) the report compares; ``arms``: the spec's, first in a line. Only runs that logged
    a finite value of a summary are compared on its fact; a run without the config list is not. ``eval.budgets:
    null`` is the scale's budgets and the arm's thinking budgets, and ``eval.grid: null`` ``eval.grid_size`` budgets
    up to the largest thinking budget (:func:`arctl.compose.resolve._finalize`): an arm with
    ``thinking.budgets=[1000,...,8000]`` averages 8 budgets where GRPO averages 4, and one with
    ``[1000,...,6000]`` has its final accuracy and its grid end at 6000 where GRPO's end at 8000 (from hunts: drawn
    and tabulated side by side without a word)."""
    h, table = data.history, data.runs.runs
    if not len(h) or not len(table) or not {"run_id", "arm"} <= set(table.columns):
        return []
    keys = [m for m in dict.fromkeys(map(str, h["metric"].unique()))  # each key once, not each row
            if any(fnmatch.fnmatchcase(m, g) for g in metrics)]
    notes = []
    for fact in BUDGET_FACTS:
        compared = [m for m in keys if (p := parse_metric(m)) is not None and _of_fact(p.name, fact)]
        if compared and fact.column in table.columns and (note := _fact_note(data, fact, compared, arms)):
            notes.append(note)
    return notes


def _of_fact(name: str, fact: BudgetFact) -> bool:
    return any(name == n or (n.endswith("/") and name.startswith(n)) for n in fact.names)


def _fact_note(data: ReportData, fact: BudgetFact, compared: list[str], arms) -> str | None:
    """The line of :func:`eval_budgets_notes` for ``fact`` of the runs that logged one of ``compared``, or None."""
    from arctl.report.specs import arm_label, order

    h, table = data.history, data.runs.runs
    logged = h[h["metric"].isin(compared) & h["value"].notna()]
    read = set(logged["run_id"].astype(str))
    by_arm: dict[str, list] = {}  # arm -> its runs' facts, each once
    for run, arm, value in zip(table["run_id"].astype(str), table["arm"].astype(str), table[fact.column]):
        budgets = config_list(value)
        if run in read and budgets:
            key = _budget_set(budgets)
            key = key[-1] if fact.largest else key  # sorted: the largest last
            by_arm.setdefault(arm, [])
            if key not in by_arm[arm]:
                by_arm[arm].append(key)
    facts = list(dict.fromkeys(b for sets in by_arm.values() for b in sets))
    if len(facts) < 2:
        return None
    shown = {b: _shown(b) for b in facts}
    if len(set(shown.values())) < len(facts):  # two long lists shown alike (they differ inside): each in full
        shown = {b: _shown(b, whole=True) for b in facts}
    said = "; ".join(f"{arm_label(a)} {' and '.join(shown[b] for b in by_arm[a])}" for a in order(by_arm, arms))
    names = sorted({parse_metric(m).name for m in compared})
    return (f"{', '.join(names)} {fact.says.format(s='s' if len(names) == 1 else '')} between the runs compared "
            f"({said}): {fact.what}, not one measure; compare acc@b, or give the arms {fact.same}")


LONGEST_SHOWN = 8  # a list of more budgets is shown by its size and ends (a 32-budget grid)


def _shown(fact, whole: bool = False) -> str:
    """A run's fact in a warning: its budget, its list, or a long list's size and ends."""
    if not isinstance(fact, tuple):
        return str(fact)
    if whole or len(fact) <= LONGEST_SHOWN:
        return "[" + ", ".join(map(str, fact)) + "]"
    return f"{len(fact)} budgets, {fact[0]} to {fact[-1]}"


def _budget_set(budgets: list) -> tuple:
    """A run's eval.budgets or eval.grid as a set, in order (their summaries do not depend on how the config lists
    them)."""
    try:
        return tuple(sorted(set(budgets)))
    except TypeError:  # a value that is no number (unhashable, mixed): as listed
        return tuple(map(str, budgets))

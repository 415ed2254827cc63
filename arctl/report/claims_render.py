"""``arctl report --claims``: runs → verdicts (:mod:`arctl.report.claims`) → ``claims.json``,
``claims.md`` and one self-contained ``claims.html`` (figures embedded as PNG data, no external
files or scripts), in the report's output directory."""

from __future__ import annotations

import base64
import html
import io
import math
import os
import platform
import shlex
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from arctl.config.json_text import json_text
from arctl.launch.provenance import code_history, code_version, same_code, started_other_code
from arctl.report.claims import (
    CURVE_AXES,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    INTERVAL,
    MISSING_NOTE,
    NOT_TESTABLE,
    ClaimResult,
    ClaimsSpec,
    TestResult,
    arm_curves,
    arms_tested,
    check_claims,
    load_claims,
    metric_globs,
    one_config_per_arm_seed,
    repeated_claims,
    run_views,
    runs_of_arms,
)
from arctl.report.errors import ReportError
from arctl.report.specs import arm_label
from arctl.report.style import Outputs, arm_colors, path_from, paths_from, report_rc, saving
from arctl.track.start_record import MACHINE_COLUMN, warmup_column

COLORS = {HOLDS: "#1a7f37", FAILS: "#cf222e", INCONCLUSIVE: "#9a6700", NOT_TESTABLE: "#57606a"}
CSS_CLASS = {HOLDS: "holds", FAILS: "fails", INCONCLUSIVE: "inconclusive", NOT_TESTABLE: "not-testable"}


@dataclass
class ClaimsReport:
    spec: ClaimsSpec
    results: list[ClaimResult]
    runs: list[dict]
    meta: dict
    outputs: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # arm -> {"budget"|"train": seed -> {x: accuracy}, "same_config_as": arm where one config} (claims.arm_curves)
    curves: dict = field(default_factory=dict)
    # runs of the cells of the arms tested that have not ended and logged nothing yet, or, in an export, were
    # skipped by it (:func:`arctl.report.data.waiting_runs`): run_id, experiment, arm, seed, state each
    waiting: list[dict] = field(default_factory=list)
    # a command the results say (the terminal's: the workspace as a command in this shell names it) -> the same
    # command in the files, the workspace named relative to their folder (:func:`arctl.report.style.path_from`), run
    # from there (:data:`COMMANDS_FROM`): the same bytes however --workdir was typed and wherever the workspace lies
    in_files: dict[str, str] = field(default_factory=dict)
    # ``warnings`` as the files say them (:func:`arctl.report.style.paths_from`: the workspace and the paths under it
    # relative to their folder, a command's ``--workdir`` too); None: as ``warnings``
    warnings_in_files: list[str] | None = None

    def commands(self, t: TestResult) -> list[str]:
        """Test ``t``'s commands as the files say them (run from their folder)."""
        return [self.in_files.get(c, c) for c in t.commands]

    def file_warnings(self) -> list[str]:
        """The warnings as the files say them (:attr:`warnings_in_files`)."""
        return list(self.warnings if self.warnings_in_files is None else self.warnings_in_files)

    def relative(self) -> bool:
        """Whether the files name the workspace relative to their folder (a command or a warning does): they then
        say so (:data:`COMMANDS_FROM`)."""
        return bool(self.in_files) or self.file_warnings() != list(self.warnings)

    def to_json(self, files: bool = False) -> dict:
        """claims.json's content (``files``), or ``--json``'s: its commands as the terminal says them."""
        claims = [r.to_json() for r in self.results]
        if files:
            claims = [{**c, "tests": [{**j, "commands": self.commands(t)} for j, t in zip(c["tests"], r.tests)]}
                      for c, r in zip(claims, self.results)]
        return {"kind": "claims", "meta": self.meta, "interval": INTERVAL, "summary": summary(self.results),
                "claims": claims, "runs": self.runs, "curves": self.curves,
                "outputs": [str(p) for p in self.outputs],
                "warnings": self.file_warnings() if files else self.warnings, "waiting": self.waiting}


# ---------------------------------------------------------------------------------------------
def _sweep_experiments(sweeps: list[str]) -> dict[str, list[str]]:
    from arctl.compose.sweep import load_sweep

    return {s: list(load_sweep(s).experiments) for s in sweeps}


def _sharing(sweeps: list[str]) -> set[str]:
    """The sweeps of ``sweeps`` with ``share_arms: true``."""
    from arctl.compose.sweep import load_sweep

    return {s for s in sweeps if load_sweep(s).share_arms}


def _arm_experiments() -> dict[str, list[str]]:
    """arm id → the project's experiments that define it."""
    from arctl.compose.experiment import list_experiments, load_experiment

    out: dict[str, list[str]] = {}
    for name in list_experiments():
        try:
            exp = load_experiment(name)
        except Exception:  # noqa: BLE001 - a broken spec elsewhere must not hide the others
            continue
        for arm in exp.arms:
            out.setdefault(arm, []).append(name)
    return out


def _known_arms(spec, arm_exps: dict[str, list[str]]) -> None:
    """:class:`ReportError` naming the claims file and the test whose arm no experiment defines: such a test
    could only ever say "runs missing" (from a review: a typo, ``ar-bsae``, read as a claim without runs)."""
    from arctl.compose.errors import did_you_mean

    for i, claim in enumerate(spec.claims):
        for part, tests in (("tests", claim.tests), ("preconditions", claim.preconditions)):
            for j, test in enumerate(tests):
                for arm in test.all_arms():
                    if arm not in arm_exps:
                        raise ReportError(f"{spec.path}: claims[{i}].{part}[{j}]: no experiment defines arm {arm!r}; "
                                          f"{did_you_mean(arm, arm_exps)} (`arctl show EXPERIMENT` lists its arms)")


def missing_command_for(sweeps: dict[str, list[str]], scale: str | None, sharing: Iterable[str] = (),
                        workdir: str | Path | None = None, overrides: Iterable[str] = (), named: str | None = None):
    """``command(arm, seeds)``: what produces ``arm``'s runs at ``seeds`` (None: the spec's own seeds), in
    workspace ``workdir`` (:func:`arctl.launch.workspace.workdir_arg`: named unless a bare command means it; ``named``:
    what names it instead: the files' `` --workdir W``, :attr:`ClaimsReport.in_files`),
    with ``overrides`` (``KEY=VALUE`` texts, :func:`shared_overrides`: the runs' own, so that it trains their config).
    A sweep of ``sharing`` (``share_arms: true``) that holds it: that sweep (it trains each missing
    config once and reuses the workspace's runs); else the arm alone, ``arctl run EXPERIMENT --arm
    ARM``, of the first experiment of the sweeps (else of the project) that defines it: a sweep
    without ``share_arms`` would also train its other arms, GRPO once per experiment."""
    from arctl.config.ranges import seeds_text
    from arctl.launch.workspace import workdir_arg

    arm_exps = _arm_experiments()
    scale_arg = f" --scale {scale}" if scale else ""
    workdir_text = named if named is not None else workdir_arg(workdir) if workdir is not None else ""
    sharing = set(sharing)
    where = "".join(f" {shlex.quote(o)}" for o in overrides) + workdir_text

    def command(arm: str, seeds=None) -> str:
        seeds_arg = f" --seeds {seeds_text(seeds)}" if seeds else ""
        exps = arm_exps.get(arm, [])
        for sweep, members in sweeps.items():
            if sweep in sharing and any(e in members for e in exps):
                return f"arctl sweep {sweep}{scale_arg}{seeds_arg}{where}"
        listed = [e for members in sweeps.values() for e in members if e in exps]
        if listed or (exps and not sweeps):
            return f"arctl run {(listed or exps)[0]} --arm {arm}{scale_arg}{seeds_arg}{where}"
        if exps:  # in none of the sweeps read: a run of another experiment would never be read (from a hunt: the
            # report named `arctl run ctx-16k --arm ar-uniform`, and named it again once it had run)
            other = _sweep_with(exps, sharing)
            if other is None:
                return f"(arm {arm!r} is in no experiment of sweep(s) {', '.join(sweeps)}, nor of a sweep of this project)"
            # its sweep, then a report that reads that sweep too
            return (f"arctl sweep {other}{scale_arg}{seeds_arg}{where} && arctl report --claims "
                    f"{' '.join([*sweeps, other])}{scale_arg}{workdir_text}")
        return f"(no experiment defines arm {arm!r})"

    return command


def seeds_not_under_way(command, waiting: list[dict], then: str):
    """``command(arm, seeds)`` (:func:`missing_command_for`) for the seeds of ``arm`` that no run of ``waiting``
    (:func:`arctl.report.data.waiting_runs`: runs of the report's cells that have logged nothing yet) has a job on
    (:func:`arctl.report.export.under_way`); where every one has, what to wait for instead. From a review: a pending
    seed another arm has was listed with ``arctl run ... --seeds N``, a launch that finds its run under way and does
    nothing."""
    from arctl.config.ranges import seeds_text
    from arctl.report.export import under_way as has_a_job

    under_way: dict[str, dict[int, str]] = {}
    for run in waiting:  # (an interrupted launch's run, or a folder nothing speaks for, has no job to wait for)
        if has_a_job(str(run["state"])) and run.get("seed") is not None:
            under_way.setdefault(str(run["arm"]), {})[int(run["seed"])] = str(run["run_id"])

    def wrapped(arm: str, seeds=None) -> str:
        mine = under_way.get(arm, {})
        if not seeds or not mine:
            return command(arm, seeds)
        left = [s for s in seeds if s not in mine]
        if left:
            return command(arm, left)
        return f"(arm {arm} seeds {seeds_text(list(seeds))}: under way as {', '.join(mine[s] for s in seeds)}: {then})"

    return wrapped


def _sweep_with(experiments: list[str], sharing: set[str]) -> str | None:
    """A sweep of the project with one of ``experiments``: one that shares arms first (it trains only what is
    missing), else the first; None where none has one."""
    from arctl.compose.sweep import list_sweeps, load_sweep

    found = []
    for name in list_sweeps():
        try:
            sweep = load_sweep(name)
        except Exception:  # noqa: BLE001 - a broken spec elsewhere must not hide the others
            continue
        if any(e in sweep.experiments for e in experiments):
            found.append((not sweep.share_arms, name))
    return min(found)[1] if found else None


def shared_overrides(views, runs_table, sweeps: list[str], compose) -> tuple[list[str], list[str]]:
    """What the runs ``views`` read differ in from their cells as ``compose`` (of ``sweeps``) makes them
    (:func:`arctl.report.cells.differs_from_cell`, the report's "differ from their cell" warning): the overrides
    (``KEY=VALUE`` in Hydra's grammar) every run whose cell composes shares, at one value (a sweep launched with
    them: the micro scale's) where composed with them every run's cell is its config (a key another sets as the
    runs have it, ``eval.grid`` from ``scale.budgets``, left out), else none and the keys the runs differ in
    (sorted). A command for missing seeds carries the overrides, so that it trains the config of the runs beside
    which its runs are read (from a hunt: it trained the cells as composed, runs of another config)."""
    from arctl.config.hydra_text import override_value
    from arctl.report.cells import CONFIG_PREFIX, cell_composer, differs_from_cell, run_scale, same_value

    rows = {str(r["run_id"]): r for r in runs_table.to_dict("records")} if len(runs_table) else {}
    read = [(v, rows[v.run_id]) for v in views if v.run_id in rows]
    found = [(v, rec, {k: rec[CONFIG_PREFIX + k] for k in differs_from_cell(rec, cell)}) for v, rec in read
             if (cell := compose(v.experiment, v.arm, v.seed, run_scale(rec))) is not None]
    if not any(f for _, _, f in found):
        return [], []
    first = found[0][2]
    even = [k for k in sorted(first) if all(k in f and same_value(f[k], first[k]) for _, _, f in found)]
    texts = {k: f"{k}={override_value(first[k].tolist() if hasattr(first[k], 'tolist') else first[k])}" for k in even}
    v, rec, _ = found[0]
    cell = compose(v.experiment, v.arm, v.seed, run_scale(rec))
    overrides = [texts[k] for k in even]
    for k in even:  # one another sets as the runs have it (eval.grid from scale.budgets and eval.grid_size) is left
        # out: given too, it would be read as set by hand (eval.grid_size unread beside an explicit eval.grid)
        fewer = [o for o in overrides if o != texts[k]]
        cell = cell_composer(sweeps, fewer)(v.experiment, v.arm, v.seed, run_scale(rec))
        if cell is not None and not differs_from_cell(rec, cell):
            overrides = fewer
    recompose = cell_composer(sweeps, overrides) if overrides else compose
    for v, rec, _ in found:
        cell = recompose(v.experiment, v.arm, v.seed, run_scale(rec))
        if cell is None or differs_from_cell(rec, cell):  # no overrides give every run read its config
            return [], sorted({k for _, _, f in found for k in f})
    return overrides, []


def other_configs_warning(keys: list[str]) -> str:
    """The warning of a claims report whose runs differ from their cells in ``keys`` in no one way that overrides
    of a sweep give them all (:func:`shared_overrides`): its commands for missing seeds train the cells as composed."""
    return (f"the commands for missing seeds train the cells as the report's sweep composes them, but the runs read "
            f"differ from their cells in {', '.join(keys[:3])}{' and more' if len(keys) > 3 else ''}, and in no one way "
            "that overrides give every run: runs they train are of other configs, refused beside these (add the "
            "overrides of the runs they should match to the command)")


def _provenance(run_dir: Path) -> dict:
    from arctl.launch.provenance import read_provenance

    return read_provenance(run_dir) or {}


def build_claims_report(*, sweeps: list[str] | None = None, scale: str | None = None, workdir=None,
                        out_dir: str | Path, claims_path: str | Path | None = None, progress: bool = True,
                        processes: int | None = None, where: list[str] | None = None,
                        outputs: Outputs | None = None) -> ClaimsReport:
    """Read the runs of ``sweeps`` (default: the claims file's) in ``workdir``, one per cell
    (:func:`arctl.report.cells.one_run_per_cell`: ``where`` filters, then the cell as the sweeps
    compose it), check every claim, and write ``claims.json``, ``claims.md`` and ``claims.html`` into
    ``out_dir``, together (``outputs``: the :class:`Outputs` that puts them in place, the caller's to tell
    after a Ctrl-C whether they are)."""
    from arctl.launch.workspace import workdir_arg
    from arctl.report.cells import (
        cell_composer,
        grid_keys,
        listed,
        of_scale,
        one_run_per_cell,
        unfinished,
        unfinished_warning,
        with_job_states,
    )
    from arctl.track.runs import default_workdir, load_runs

    spec = load_claims(Path(claims_path) if claims_path else None)
    _known_arms(spec, _arm_experiments())
    sweeps = list(sweeps or spec.sweeps)
    if not sweeps:
        raise ReportError("name the sweep(s) whose runs the claims read, e.g. `arctl report --claims priors ablations`")
    members = _sweep_experiments(sweeps)
    experiments = sorted({e for exps in members.values() for e in exps})
    base = Path(workdir or default_workdir())
    named = workdir_arg(base)  # every command said here names the workspace unless a bare one means it
    if not base.is_dir():
        raise ReportError(f"workspace {base} does not exist; pass --workdir DIR (or set ARCTL_HOME), or produce "
                          f"the runs with {' and '.join(f'`arctl sweep {s}{named}`' for s in sweeps)}")
    runs = load_runs(base, experiments=experiments, metrics=metric_globs(spec), progress=progress, processes=processes)
    from arctl.report.export import (
        INDEX_FILE,
        interrupted_export,
        job_states,
        producing_in_export,
        waiting_in_export,
    )

    with_job_states(runs.runs, job_states(base, runs.runs.get("run_id", [])))  # how each run's job said it ended
    compose = cell_composer(sweeps)
    runs_of_arms(runs, arms_tested(spec))  # the cells of the arms tested only: another arm's runs are not read
    one_run_per_cell(runs, where=where, compose=compose, grid_keys=grid_keys(sweeps), source=str(base))
    served_warnings: list[str] = []
    views = run_views(runs.history, runs.runs, scale=scale, compose=compose, warnings=served_warnings)
    one_config_per_arm_seed(views)
    overrides, uneven = shared_overrides(views, runs.runs, sweeps, compose)  # missing seeds: the config of the runs read
    exported = (base / INDEX_FILE).is_file()

    def missing_command(named: str | None, out_arg: str):
        """command(arm, seeds), the workspace named by ``named`` (None: :func:`workdir_arg`), an export's by ``out_arg``."""
        if not exported:
            return missing_command_for(members, scale, _sharing(sweeps), base, overrides, named=named)
        # an export launches nothing: each claim's missing runs are trained in a workspace, then exported into it
        # (from a hunt: "arctl export" alone named runs no workspace had ever trained)
        produce = missing_command_for(members, scale, _sharing(sweeps), overrides=overrides)

        def command(arm: str, seeds=None) -> str:
            return f"{produce(arm, seeds)} --workdir WORKSPACE && arctl export --out {out_arg} --workdir WORKSPACE"

        return command

    typed = shlex.quote(str(base))
    here = shlex.quote(path_from(out_dir, base))  # the workspace as the files name it (ClaimsReport.in_files)
    left_out = unfinished(runs.runs, scale=scale)
    # runs of the cells tested that logged nothing yet (pending, at their first steps, a --force rerun queued) or
    # that an export skipped: named, so that a report read mid-sweep does not read as a finished one with fewer seeds
    from arctl.report.data import waiting_note, waiting_runs

    read = runs.runs[[of_scale(r, scale) for r in runs.runs.to_dict("records")]] if len(runs.runs) else runs.runs
    waiting = waiting_runs({"arms": sorted(arms_tested(spec)), "only_listed_arms": True}, experiments, base, read,
                           where)
    in_export = producing_in_export(base)
    said = waiting_note(waiting, "claims report", bool(in_export)) if waiting else ""
    not_read = f"not read: {said}" if waiting else ""
    then = f"in their workspace: wait for them, then {in_export}" if in_export else f"`arctl status{named}`"  # data.py's
    if not views:  # nothing to check: one line naming what to run, and nothing written
        at_scale, scale_arg = (f" at scale {scale}", f" --scale {scale}") if scale else ("", "")
        # an export launches no runs: what it lacks comes from `arctl export` (from a hunt: "produce them with arctl run")
        todo = in_export or " and ".join(f"`arctl sweep {s}{scale_arg}{named}`" for s in sweeps)
        if left_out:
            also = [f"{r['run_id']} ({r['state']})" for r in waiting]
            raise ReportError(f"no finished runs of {', '.join(sweeps)}{at_scale} in {base} ({len(left_out) + len(also)} "
                              f"not finished: {listed([*left_out, *also])}): wait for them "
                              f"({waiting_in_export(base) or f'`arctl status{named}`'}), "
                              f"or produce them with {todo}")
        if waiting:  # runs there that logged nothing yet: not "produce them"
            raise ReportError(f"no runs of {', '.join(sweeps)}{at_scale} in {base} yet: "
                              f"{said}; wait for them ({then})")
        raise ReportError(f"no runs of {', '.join(sweeps)}{at_scale} in {base}: produce them with {todo}, or pass "
                          "--workdir DIR where they are")
    # each command as the terminal says it (the workspace as a command in this shell names it) -> as the files do
    in_files: dict[str, str] = {}
    in_shell = seeds_not_under_way(missing_command(None, typed), waiting, then)
    then_in_files = then.replace(f"--out {typed} ", f"--out {here} ") if in_export else f"`arctl status --workdir {here}`"
    written = seeds_not_under_way(missing_command(f" --workdir {here}", here), waiting, then_in_files)

    def command(arm: str, seeds=None) -> str:
        text = in_shell(arm, seeds)
        in_files[text] = written(arm, seeds)
        return text

    results = check_claims(spec, views, command)
    used = []
    recorded = _recorded(runs.runs)
    provenances: dict[str, dict] = {}
    for v in sorted(views, key=lambda v: (v.arm, v.seed, v.run_id)):
        prov = provenances[v.run_id] = _provenance(base / "runs" / v.run_id)
        used.append({"run_id": v.run_id, "experiment": v.experiment, "arm": v.arm, "seed": v.seed,
                     "config_hash": v.run_id.rsplit("_", 1)[-1],
                     "code_version": _run_version(prov), **recorded.get(v.run_id, _NOT_RECORDED)})
    meta = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),  # ISO 8601 UTC, as export.json's exported_at
        "host": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "code_version": _run_version(code_version()), "workspace": str(Path(base).resolve()), "sweeps": sweeps, "scale": scale,
        "claims_file": str(spec.path),
    }
    unfinished_export = interrupted_export(base)  # first: the runs are a part of what was exported
    warnings = ([unfinished_export] if unfinished_export else []) + list(runs.warnings) + served_warnings
    if uneven:  # no overrides give every run its config: the commands train the cells as composed
        warnings.append(other_configs_warning(uneven))
    if other_code := other_code_warning(provenances):
        warnings.append(other_code)
    from arctl.report.data import warmup_mix_note

    read_ids = set(runs.history["run_id"].astype(str)) if len(runs.history) else set()
    if len(runs.runs) and (mix := warmup_mix_note(runs.runs[runs.runs["run_id"].astype(str).isin(read_ids)])):
        warnings.append(mix)  # a paired test across seeds that started from different weights (from a review)
    # each warning as the files say it: its paths relative to their folder, its commands run from there (as the
    # commands for missing runs are: the same bytes however --workdir was typed, from whichever folder)
    warnings_in_files = [paths_from(out_dir, base, w) for w in warnings]
    if left_out:  # and the runs not read, in the same line (as a table's)
        also = f"; {not_read}" if not_read else ""
        warnings.append(unfinished_warning(left_out, named, waiting_in_export(base)) + also)
        warnings_in_files.append(paths_from(out_dir, base, unfinished_warning(left_out, f" --workdir {here}",
                                                                              waiting_in_export(base)) + also))
    elif not_read:
        warnings.append(f"{not_read} ({then})")
        warnings_in_files.append(paths_from(out_dir, base, f"{not_read} ({then_in_files})"))
    report = ClaimsReport(spec, results, used, meta, warnings=warnings, curves=arm_curves(views),
                          waiting=[{k: r[k] for k in ("run_id", "experiment", "arm", "seed", "state")} for r in waiting],
                          in_files=in_files, warnings_in_files=warnings_in_files)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report.outputs = [out / "claims.json", out / "claims.md", out / "claims.html"]
    # the three texts of one check, or (a Ctrl-C while the HTML's figures render) the previous three: from a
    # hunt, claims.json and .md of one run stood beside claims.html of the run before
    texts = [json_text(report.to_json(files=True), indent=1), to_markdown(report), to_html(report)]
    with outputs or Outputs() as outputs:
        for path, text in zip(report.outputs, texts):
            outputs.write_text(path, text)
    return report


_NOT_RECORDED = {"warmup_sha256": None, "warmup_accuracy": None, "machine": None}


def _recorded(runs_table) -> dict[str, dict]:
    """What each run recorded of where it started and ran (its W&B config, :mod:`arctl.track.runs`):
    the warm-up's weights sha256 and accuracy at the largest eval budget (``warmup``), and the kind of
    machine it trained on (``machine``); None where a run (or its backend) recorded none."""

    def value(rec: dict, key: str):
        v = rec.get(key)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    out = {}
    for rec in runs_table.to_dict("records") if len(runs_table) else []:
        acc = value(rec, warmup_column("accuracy"))
        out[str(rec["run_id"])] = {"warmup_sha256": value(rec, warmup_column("weights_sha256")),
                                   "warmup_accuracy": float(acc) if acc is not None else None,
                                   "machine": value(rec, MACHINE_COLUMN)}
    return out


def _warmup_text(u: dict) -> str:
    if not u.get("warmup_sha256"):
        return "not recorded"
    acc = u.get("warmup_accuracy")
    return f"{str(u['warmup_sha256'])[:12]}" + (f" (acc {acc:.3f} at b_m)" if acc is not None else "")


def _machine_text(u: dict) -> str:
    return str(u.get("machine") or "not recorded")


def _code_text(p: dict, other: dict | None = None, plugins: bool = True) -> str:
    """``arctl 0.1.0 (<commit[:12]>[-dirty][, code <sha256[:12]>])`` of one code record: the code's hash where
    the commit does not say the code (dirty, or no git), or where it is all that tells it from ``other``'s;
    then its plugins (:func:`_plugins_text`)."""
    commit, code = p.get("git_commit"), p.get("code_sha256")
    hashed = p.get("git_dirty") or not commit or (other is not None and other.get("code_sha256") != code
                                                  and _code_text(other, plugins=False) == _code_text(p, plugins=False))
    code_text = f"code {str(code)[:12]}" if code and hashed else ""
    inner = ", ".join(t for t in (f"{str(commit)[:12]}{'-dirty' if p.get('git_dirty') else ''}" if commit else "",
                                  code_text) if t)
    return (f"arctl {p.get('arctl_version', '?')}" + (f" ({inner})" if inner else "")
            + (_plugins_text(p, other) if plugins else ""))


def _plugins_text(p: dict, other: dict | None = None) -> str:
    """`` with <name> <package> <version>[ (code <sha256[:12]>)]`` per plugin of a code record (provenance.json
    ``plugins``: the run's method or backend from an installed package); the hash where the package and version
    are all ``other`` says too (an edit of an installed plugin, an editable install)."""
    def listed(q: dict | None) -> list[dict]:
        items = (q or {}).get("plugins")
        return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []

    def said(x: dict) -> str:
        return f"{x.get('name', '?')} {x.get('package') or '?'} {x.get('version') or '?'}"

    theirs = {(x.get("group"), x.get("name")): x for x in listed(other)}
    out = []
    for x in listed(p):
        twin = theirs.get((x.get("group"), x.get("name")))
        code = x.get("code_sha256")
        hashed = code and twin is not None and said(twin) == said(x) and twin.get("code_sha256") != code
        out.append(said(x) + (f" (code {str(code)[:12]})" if hashed else ""))
    return f" with {', '.join(out)}" if out else ""


def _run_version(prov: dict) -> str:
    """``arctl 0.1.0 (<commit[:12]>[-dirty])`` of a provenance record (a run's, or this process's); a run
    resumed under other code adds ``, resumed by <that code>`` each time the code changed, and an attempt whose
    job started with other code than it was submitted with (an edit while it waited in a queue) ``, attempt N
    ran <that code>``, in order (:func:`arctl.launch.provenance.code_history`)."""
    if not prov:
        return "unknown"
    history = code_history(prov)
    launched = history[0][1] if history and history[0][0] == "launched" else None
    v = _code_text(launched) if launched else "unknown"
    last = launched
    for kind, later in history[1 if launched else 0:]:
        if last is None or not same_code(later, last):
            n = later.get("attempt")
            said = "resumed by" if kind == "resumed" else (f"attempt {n} ran" if isinstance(n, int) else "its job ran")
            v += f", {said} {_code_text(later, last)}"
            last = later
    return v


def other_code_warning(provenances: dict[str, dict]) -> str | None:
    """One line where runs read together (run id -> provenance.json) ran other code than they were submitted
    with (:func:`arctl.launch.provenance.started_other_code`): how many, and one of them with both codes;
    None where none did."""
    off = {run_id: pairs for run_id, prov in provenances.items() if (pairs := started_other_code(prov))}
    if not off:
        return None
    run_id, ((submitted, started), *_) = next(iter(off.items()))
    return (f"{len(off)} of {len(provenances)} run(s) ran other code than they were launched with (their jobs "
            f"started after an edit of arctl), e.g. {run_id}: submitted with {_code_text(submitted, started)}, "
            f"started with {_code_text(started, submitted)} (the runs table names each run's code); their numbers are read together with the "
            "others'")


# ---------------------------------------------------------------------------------------------
def fmt(x, signed: bool = True) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


# where the commands of claims.md/.json/.html run (:func:`path_from`: the same bytes wherever the workspace lies)
COMMANDS_FROM = ("The commands for missing runs and the warnings name the workspace relative to this file's folder: "
                 "run the commands from there.")


def test_summary(t, commands: list[str] | None = None, numbered: dict[str, int] | None = None) -> str:
    """One line: the mean, its interval, n and what to do (``commands``: the test's, as the files say them; default
    its own, the terminal's; ``numbered``: each command's number in a list printed after a table, which the line
    names instead of the command: a table's cell folds a 600-character command mid-token, from a hunt)."""
    if t.kind == "bound":
        return t.note or "–"
    ci = f"[{fmt(t.ci_low)}, {fmt(t.ci_high)}]" if t.ci_low is not None else "no interval"
    if t.p_holm is not None and t.p_holm == t.p_holm:
        ci += f", p = {t.p_value:.3g} (Holm {t.p_holm:.3g})"
    commands = t.commands if commands is None else commands
    if numbered is not None and t.missing:
        refs = [str(numbered[c]) for c in commands if c in numbered]
        extra = f"; missing: {', '.join(t.missing)}" + (f" (command {', '.join(refs)} below)" if refs else "")
    else:
        extra = f"; missing: {', '.join(t.missing)} → `{'`, `'.join(commands)}`" if t.missing else ""
    note = f"; {t.note}" if t.note else ""
    return f"mean {fmt(t.mean)} {ci}, {t.n} seed(s){note}{extra}"


def md_cell(text) -> str:
    """``text`` as one cell of a Markdown table: its ``|`` escaped (a machine kind is "CPU | ISA | torch"; from a
    hunt: a claim title "AR | anytime beats GRPO" split its row into 11 cells, the verdict column read a title's
    part)."""
    return str(text).replace("|", "\\|")


def to_markdown(report: ClaimsReport) -> str:
    m = report.meta
    lines = [f"# The paper's claims, checked ({', '.join(m['sweeps'])}{', scale ' + m['scale'] if m['scale'] else ''})", "",
             f"{m['created']} on {m['host']} ({m['cpus']} CPUs, load {m['load_average']}); {m['code_version']}; "
             f"workspace `{m['workspace']}`; {len(report.runs)} runs; intervals: {INTERVAL}.", "",
             summary_text(report.results, len(report.runs)), "", *([COMMANDS_FROM, ""] if report.relative() else []),
             "| claim | verdict | test | per seed | mean [95% CI] | verdict | paper |", "|---|---|---|---|---|---|---|"]
    for r in report.results:
        title = f"{r.id}. {r.title}" + (f" ({r.paper})" if r.paper else "")  # no "()" where no paper is given
        for i, t in enumerate(r.tests):
            seeds = ", ".join(f"s{s}: {fmt(v.get('value'))}" if t.kind != "bound" else f"s{s}: {v['violations']}/{v['checked']}"
                              for s, v in sorted(t.per_seed.items()))
            head = (title, f"**{r.verdict}**") if i == 0 else ("", "")
            lines.append("| " + " | ".join(map(md_cell, (head[0], head[1], t.label, seeds or "–", test_summary(t, report.commands(t)),
                                                           t.verdict, t.paper or ""))) + " |")
    lines += ["", "| run | arm | seed | code version | warm-up (weights sha256) | machine |", "|---|---|---|---|---|---|"]
    lines += [f"| `{u['run_id']}` | {md_cell(u['arm'])} | {u['seed']} | {md_cell(u['code_version'])} | "
              f"{md_cell(_warmup_text(u))} | {md_cell(_machine_text(u))} |" for u in report.runs]
    if report.warnings:  # as claims.html's: a report read mid-sweep says so (the runs not read, those left out)
        lines += ["", "## Warnings", "", *(f"- {w}" for w in report.file_warnings())]
    lines.append("")
    return "\n".join(lines)


TICK_WIDTH, TICK_LINES = 48, 4  # a test's label beside its row: every label of reports/claims.yaml fits whole
# what one seed's number of a test is (``per_seed[seed]["value"]``, :mod:`arctl.report.claims`), by the test's kind
VALUE_OF = {"compare": "difference A − B", "converge": "lead at the first statistic − lead at the second"}
STAT_VALUE = "the statistic"  # a sign test's or a precondition's number: the statistic itself


def tick_label(label: str) -> str:
    """A test's label beside its row in a claim's figure: wrapped at :data:`TICK_WIDTH` characters, and cut with
    "…" past :data:`TICK_LINES` lines (from a hunt: cut at 3 lines without a mark, claim 2's converge test lost
    "of the budgets")."""
    import textwrap

    return "\n".join(textwrap.wrap(label, TICK_WIDTH, max_lines=TICK_LINES, placeholder=" …"))


def axis_label(kinds: Iterable[str], unit: str) -> str:
    """The x axis of a panel of a claim's figure whose tests are of ``kinds``, in ``unit``: what each seed's dot
    is (a compare test's paired difference A − B, not an accuracy; from a hunt: it read "accuracy: per seed")."""
    said = list(dict.fromkeys(VALUE_OF.get(k, STAT_VALUE) for k in kinds))
    return (f"{'; '.join(said)} ({unit or 'the tested number'})\n"  # two lines: claim 2's one was cut at the right
            "per seed (dots), mean (diamond), 95% interval (bar); shaded: the claimed side of 0")


@report_rc()  # drawn with matplotlib's defaults and arctl's settings, not the user's
def claim_figure(result: ClaimResult):
    """The claim's figure (a matplotlib Figure, None without a test to draw): one panel per unit of
    the tested numbers (accuracy, thinking tokens, ...: a token difference never hides an accuracy
    one), per test every seed's number (dots: :func:`axis_label` says what it is), the mean (diamond)
    and its 95% interval (bar), 0 (line) and the claimed side of 0 shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests = [t for t in result.tests if t.kind != "bound" and t.per_seed]
    if not tests:
        return None
    units = list(dict.fromkeys(t.unit for t in tests))
    panels = [[t for t in tests if t.unit == u] for u in units]
    fig, axes = plt.subplots(len(units), 1, squeeze=False, dpi=110,
                             figsize=(9, sum(0.75 * len(p) + 0.9 for p in panels)),
                             gridspec_kw={"height_ratios": [len(p) + 0.6 for p in panels]})
    for ax, unit, panel in zip(axes[:, 0], units, panels):
        rows = []
        for row, t in enumerate(panel):
            y = len(panel) - 1 - row
            vals = [v["value"] for v in t.per_seed.values() if v.get("value") is not None and math.isfinite(v["value"])]
            ax.scatter(vals, [y] * len(vals), s=14, color="#555", zorder=3)
            color = COLORS[t.verdict]
            if t.ci_low is not None:
                ax.plot([t.ci_low, t.ci_high], [y, y], color=color, lw=4, alpha=0.55, solid_capstyle="butt")
            if t.mean is not None:
                ax.scatter([t.mean], [y], marker="D", s=36, color=color, zorder=4)
            rows.append((y, t.direction))
        lo, hi = ax.get_xlim()
        lo, hi = min(lo, -abs(hi) * 0.05), max(hi, abs(lo) * 0.05)  # 0 inside, both sides visible
        for y, direction in rows:  # the claimed side of 0, per test
            ax.fill_betweenx([y - 0.42, y + 0.42], 0, hi if direction == "greater" else lo, color="#dafbe1", zorder=0)
        ax.set_xlim(lo, hi)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(panel)))
        ax.set_yticklabels([tick_label(t.label) for t in reversed(panel)], fontsize=7)
        ax.set_xlabel(axis_label((t.kind for t in panel), unit), fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    return fig


def _figure_png(result: ClaimResult) -> str | None:
    """:func:`claim_figure` as a base64 PNG (inline in claims.html)."""
    fig = claim_figure(result)
    return None if fig is None else _png(fig)


def curve_arms(curves: dict) -> dict[str, list[str]]:
    """The arms :func:`curves_figure` draws → the arms each line stands for: an arm whose runs are another's config
    (``same_config_as``, :func:`arctl.report.claims.arm_curves`) is drawn once, with that arm (from a hunt: AR-base
    and GRPO+BRPO+decoupled, the same runs, were two lines, one hidden under the other)."""
    out: dict[str, list[str]] = {}
    for arm, data in curves.items():
        out.setdefault(data.get("same_config_as") or arm, []).append(arm)
    return out


def curve_legend(arms: list[str], seeds: int) -> str:
    """The legend of one line of :func:`curves_figure`: its arms (several: one config) and its seeds."""
    names = " = ".join(arm_label(a) for a in arms)
    return f"{names} ({'one config, ' if len(arms) > 1 else ''}{seeds} seed{'s' if seeds > 1 else ''})"


@report_rc()
def curves_figure(curves: dict):
    """Beside the claims: per arm (one colour; arms of one config once, :func:`curve_arms`), accuracy against the
    thinking budget at the final evaluation and anytime accuracy over eval.budgets over training (the axes:
    :data:`arctl.report.claims.CURVE_AXES`); every seed a thin line, the mean over seeds a thick one where every seed
    has a value (a seed that collapsed shows as its own line). None without a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = tuple((part, *CURVE_AXES[part]) for part in ("budget", "train"))
    if not any(seeds for arm in curves.values() for part, *_ in panels for seeds in arm[part].values()):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    lines = curve_arms(curves)
    colors = arm_colors(list(lines))  # each arm's colour in every figure (labels.yaml's colors)
    for ax, (part, xlabel, ylabel) in zip(axes, panels):
        for drawn, names in lines.items():
            color = colors[drawn]
            by_seed: dict = {}
            for name in reversed(names):  # a seed only another name has is drawn too; the drawn arm's run first
                by_seed.update(curves[name][part])
            series = [d for d in by_seed.values() if d]
            for d in series:
                ax.plot(list(d), list(d.values()), color=color, lw=0.7, alpha=0.35)
            xs = sorted(set.intersection(*(set(d) for d in series))) if series else []  # where every seed has one
            if xs:
                mean = [float(sum(d[x] for d in series) / len(series)) for x in xs]
                ax.plot(xs, mean, color=color, lw=2.2, label=curve_legend(names, len(series)))
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle("per seed (thin) and the mean over seeds (thick)", fontsize=8)
    fig.tight_layout()
    return fig


@report_rc()
def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    saving(fig.savefig, buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1f2328}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}table{border-collapse:collapse;width:100%;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #d0d7de;padding:4px 6px;text-align:left;vertical-align:top}th{background:#f6f8fa}
.verdict{font-weight:600;padding:1px 7px;border-radius:10px;color:#fff}.holds{background:#1a7f37}.fails{background:#cf222e}
.inconclusive{background:#9a6700}.not-testable{background:#57606a}.meta{color:#57606a;font-size:.85em}code{font-size:.9em}img{max-width:100%}
table.seeds{width:auto;margin:4px 0 0;font-size:.9em;font-variant-numeric:tabular-nums}table.seeds th,table.seeds td{border:0;padding:0 10px 0 0;white-space:nowrap;background:none;font-weight:normal}table.seeds th{color:#57606a;white-space:normal;vertical-align:bottom}#runs code,table.tests code{word-break:break-all}
@media (max-width:900px){table.tests th,table.tests td{padding:3px 3px}table.seeds th,table.seeds td{padding:0 5px 0 0}}
"""


def _badge(verdict: str) -> str:
    return f'<span class="verdict {CSS_CLASS.get(verdict, "inconclusive")}">{html.escape(verdict)}</span>'


def _seeds_table(t: TestResult) -> str:
    """A test's per-seed numbers as a small table, one line per seed (a compare test: both arms' numbers
    and their difference; a bound: violations of evaluations checked); "" without seeds."""
    e = html.escape
    rows = sorted(t.per_seed.items())
    if not rows:
        return ""
    if t.kind == "bound":
        head = ["seed", "violations", "checked"]
        body = [[f"s{s}", str(v["violations"]), str(v["checked"])] for s, v in rows]
    elif t.kind == "compare" and len(t.arms) == 2:
        head = ["seed", arm_label(t.arms[0]), arm_label(t.arms[1]), "diff"]
        body = [[f"s{s}", fmt(v.get("a"), False), fmt(v.get("b"), False), fmt(v.get("value"))] for s, v in rows]
    elif t.kind == "converge":
        head = ["seed", "lead, low", "lead, high", "diff"]
        body = [[f"s{s}", fmt(v.get("lead_low")), fmt(v.get("lead_high")), fmt(v.get("value"))]
                for s, v in rows]
    else:
        head = ["seed", "value"]
        body = [[f"s{s}", fmt(v.get("value"))] for s, v in rows]
    breakable = lambda h: e(h).replace("+", "+<wbr>")  # noqa: E731 - "GRPO+BRPO+decouple" may wrap
    return ('<table class="seeds"><tr>' + "".join(f"<th>{breakable(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in body) + "</table>")


def _repeats_said(results) -> str:
    """" Claim 3 (holds) repeats the evidence of claim 1 ..." for each claim whose every test repeats an earlier one's."""
    verdicts = {r.id: r.verdict for r in results}
    said = [f"claim {cid} ({verdicts[cid]}) repeats the evidence of claim {', '.join(of)}"
            for cid, of in repeated_claims(results).items()]
    text = "; ".join(said)
    return f" {text[:1].upper()}{text[1:]} (the same configs and statistic): not an independent verdict." if said else ""


def sanity_checks(results) -> list[str]:
    """Ids of the claims whose every test is a ``bound`` test (preconditions aside): J_anytime <= J <=
    J_anytime / P_m, whose right side holds of any correct evaluation (and is vacuous at P_m = 1/32) and whose
    left side of a model no worse at its largest budget than over the budgets on average: a check of the
    evaluation and the model's shape, not evidence for or against the method."""
    return [r.id for r in results
            if any(t.kind == "bound" for t in r.tests) and all(t.kind in ("bound", "precondition") for t in r.tests)]


def summary(results) -> dict:
    """The verdicts counted over the independent pieces of evidence: a claim that repeats an earlier one's
    evidence (``repeated_claims``) and a sanity check (``sanity_checks``) are named, not counted."""
    repeated, sanity = repeated_claims(results), sanity_checks(results)
    counted = [r for r in results if r.id not in repeated and r.id not in sanity]
    return {"counts": {v: sum(r.verdict == v for r in counted) for v in (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)},
            "claims_counted": [r.id for r in counted], "repeats": repeated,
            "sanity_checks": {r.id: r.verdict for r in results if r.id in sanity}}


def summary_text(results, runs: int) -> str:
    """One paragraph: the counts of :func:`summary`, then what was left out of them and why."""
    s = summary(results)
    c = s["counts"]
    # a check that does not hold is read first: the evaluation, or the model's shape, is not what the counts assume
    first = "".join(f"Check first: claim {cid}, the bound J_anytime <= J <= J_anytime / P_m, {verdict}. "
                    for cid, verdict in s["sanity_checks"].items() if verdict != HOLDS)
    text = (f"{first}{c[HOLDS]} hold, {c[FAILS]} fail, {c[INCONCLUSIVE]} inconclusive, {c[NOT_TESTABLE]} not testable "
            f"here (of {len(s['claims_counted'])} independent claims; {runs} runs).{_repeats_said(results)}")
    for cid, verdict in s["sanity_checks"].items():
        text += (f" Claim {cid} is a check of the evaluation's bound (its right side holds of any correct evaluation, "
                 f"its left side of a model no worse at its largest budget than on average), not evidence for the "
                 f"method: {verdict}, not counted.")
    return text


def to_html(report: ClaimsReport) -> str:
    e = html.escape
    m = report.meta
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>arctl: the paper's claims, checked ({e(', '.join(m['sweeps']))})</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>The paper's claims, checked</h1>",
        f'<p class="meta" id="meta">Sweeps {e(", ".join(m["sweeps"]))}{e(", scale " + m["scale"]) if m["scale"] else ""}; '
        f"{e(m['created'])} on {e(m['host'])} ({e(str(m['cpus']))} CPUs, load average {e(str(m['load_average']))}); "
        f"{e(m['code_version'])}; workspace <code>{e(m['workspace'])}</code>; claims file <code>{e(m['claims_file'])}</code>. "
        f"Intervals: {e(INTERVAL)}, shown per test. Verdicts: within a claim the tests' paired t-test p-values are "
        "Holm-corrected (family-wise 5%); a test holds (fails) when its adjusted p is below 0.05 and its mean is on the "
        "claimed (other) side of 0, and is inconclusive otherwise, with the seeds that would give it 80% power at the "
        "observed mean and spread. A claim holds when every test holds; it is not testable here when a precondition "
        "(measured at the start of training) is not established: it fails, or its interval over independent seeds "
        "reaches 0. The summary counts each independent piece of evidence once.</p>",
        f'<p id="summary">{e(summary_text(report.results, len(report.runs)))}</p>',
        *([f'<p class="meta" id="commands">{e(COMMANDS_FROM)}</p>'] if report.relative() else []),
        '<table id="claims"><thead><tr><th>#</th><th>claim</th><th>paper</th><th>verdict</th></tr></thead><tbody>',
    ]
    for r in report.results:
        parts.append(f'<tr><td>{e(r.id)}</td><td><a href="#claim-{e(r.id)}">{e(r.title)}</a></td><td>{e(r.paper)}</td>'
                     f"<td>{_badge(r.verdict)}</td></tr>")
    parts.append("</tbody></table>")
    for r in report.results:
        parts.append(f'<section class="claim" id="claim-{e(r.id)}" data-verdict="{e(r.verdict)}">')
        parts.append(f"<h2>{e(r.id)}. {e(r.title)} {_badge(r.verdict)}</h2><p class=\"meta\">Paper: {e(r.paper)}</p>")
        parts.append("<table class=\"tests\"><thead><tr><th>test, per seed</th><th>mean</th><th>95% interval</th>"
                     "<th>seeds</th><th>verdict</th><th>paper</th><th>notes</th></tr></thead><tbody>")
        for t in r.tests:
            seeds = _seeds_table(t)
            if t.kind == "bound":
                mean, ci = (f"{int(t.mean)} violations" if t.mean is not None else "–"), "–"
            else:
                mean = fmt(t.mean)
                ci = f"[{fmt(t.ci_low)}, {fmt(t.ci_high)}]" if t.ci_low is not None else "–"
            notes = e(t.note)
            if t.missing:  # which, and the command (in place of a note that only says "runs missing")
                said = ("Missing runs: " + e(", ".join(t.missing)) + " — run " +
                        ", ".join(f"<code>{e(c)}</code>" for c in report.commands(t)))
                notes = said if t.note in ("", MISSING_NOTE) else f"{notes} {said}"
            parts.append(f'<tr class="test" data-verdict="{e(t.verdict)}"><td>{e(t.label)}{seeds}</td>'
                         f"<td>{e(mean)}</td><td>{e(ci)}</td><td>{t.n}</td><td>{_badge(t.verdict)}</td>"
                         f"<td>{e(t.paper)}</td><td>{notes}</td></tr>")
        parts.append("</tbody></table>")
        png = _figure_png(r)
        if png:
            parts.append(f'<img alt="claim {e(r.id)}: per-seed values and intervals" src="data:image/png;base64,{png}">')
        parts.append("</section>")
    fig = curves_figure(report.curves)
    if fig is not None:
        parts.append('<h2 id="curves">Curves</h2><img alt="accuracy against the thinking budget and '
                     f'{e(CURVE_AXES["train"][1])} over training, per arm and seed" src="data:image/png;base64,{_png(fig)}">')
    parts.append('<h2>Runs</h2><table id="runs"><thead><tr><th>run</th><th>experiment</th><th>arm</th><th>seed</th>'
                 "<th>config hash</th><th>code version</th><th>warm-up</th><th>machine</th></tr></thead><tbody>")
    for u in report.runs:
        parts.append(f"<tr><td><code>{e(u['run_id'])}</code></td><td>{e(u['experiment'])}</td><td>{e(u['arm'])}</td>"
                     f"<td>{e(str(u['seed']))}</td><td><code>{e(u['config_hash'])}</code></td><td>{e(u['code_version'])}</td>"
                     f"<td>{e(_warmup_text(u))}</td><td>{e(_machine_text(u))}</td></tr>")
    parts.append("</tbody></table>")
    if report.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in report.file_warnings()) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)

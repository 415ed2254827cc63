"""The paper's claims, checked: ``reports/claims.yaml`` → a verdict per claim, with intervals.

A claim is a list of tests; a test turns runs into one number per seed and asserts its sign:

- ``compare a b stat direction``: ``stat(a) − stat(b)`` per seed (paired by seed: only seeds both
  arms have), claimed ``> 0`` (greater) or ``< 0`` (less);
- ``sign arms stat direction``: ``stat`` per seed (mean over the listed arms' runs of that seed);
- ``converge a arms low high``: per seed, the lead of ``a`` over the other ``arms`` (mean of ``a − x``)
  at ``low`` minus its lead at ``high``, claimed ``> 0`` (the arms come together: the leader's lead
  shrinks). Signed, so 0 in expectation where the leads are equal: a spread (max − min over the arms)
  grows with the noise, and its difference between two bands of unequal noise was a bias, not a finding;
- ``bound arms``: every evaluation of every run satisfies ``J_anytime ≤ J ≤ J_anytime / P_m``
  (paper App. B), with ``J`` the final accuracy and ``J_anytime`` the anytime accuracy of the same
  evaluation under its uniform budget prior (``P_m = 1/m``); a count, not an interval. A budget-forced
  evaluation (dataset ``{ds}-forced``) is left out, as from every statistic.

A run's statistic is computed from the last logged value of each key (the final evaluation; the variance
diagnostics of a run whose final evaluation computed them over its grid, as the tiny backend did until 2026-12-05:
those of its last evaluation at ``eval.budgets``, :func:`diagnostics_at_eval_budgets`),
averaged over the evaluation datasets the run logged (``statistics:`` in the claims file). The
interval shown is the two-sided 95% Student-t interval of the mean over seeds (:mod:`arctl.report.stats`),
for the test alone. Verdict (:func:`correct_within_claim`): the paired t-test's two-sided p-values are
Holm-corrected over the claim's declared tests; a test **holds** (**fails**) when its adjusted p is
below 0.05 and its mean is on the claimed (other) side of 0, and is **inconclusive** otherwise (fewer
than 2 seeds, a mean of 0, or underpowered: with the seeds that would give it 80% power at the
observed mean and spread), or **not testable here** (a precondition is not established: it fails, or its
interval over independent seeds reaches 0; or the statistic's above-chance budgets fail). Seeds whose values do not spread (tied to rounding) are judged by the exact sign test
instead of the t-test (:func:`p_value`). A claim fails when any test fails, holds when every test holds, is not
testable here when no test is, and is inconclusive otherwise. Missing runs are named with the
command that produces them.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from arctl.compose.errors import did_you_mean
from arctl.compose.report_specs import (
    BUDGET,
    DATASET,
    choice_problem,
    fraction_problem,
    key_glob,
    key_problem,
    margin_problem,
    name_problem,
    names_problem,
    text_problem,
)
from arctl.config import safe_yaml
from arctl.report.cells import (
    compute_key as _compute_key,
)
from arctl.report.cells import (
    computed_items,
    differing_key,
    differs_from_cell,
    listed,
    one_config_per_arm,
    run_scale,
    same_value,
)
from arctl.report.cells import finished_run as _finished
from arctl.report.cells import of_scale as _of_scale
from arctl.report.errors import ReportError
from arctl.report.stats import holm, mean_ci95, sd_interval, seeds_for_power, t_cdf
from arctl.track.metrics_schema import (
    ACC_FRACTIONS,
    CORR_KINDS,
    CORR_PREFIX,
    FORCED_SUFFIX,
    NAME_ACC,
    NAME_ANYTIME_ACC,
    NAME_CHANCE_ACC,
    NAME_CURVE_AUC,
    NAME_FINAL_ACC,
    NAME_GRID_ANYTIME_ACC,
    NAME_THINK_LEN,
    NVAR_KINDS,
    NVAR_PREFIX,
    acc_at_frac_name,
    eval_acc,
    eval_chance_acc,
    eval_corr,
    eval_key,
    eval_nvar,
    parse_metric,
)

HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "fails", "inconclusive", "not testable here"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)
ALPHA = 0.05  # family-wise error of a claim's tests (Holm)
POWER = 0.8  # the power "seeds needed" plans for
NO_SPREAD = 1e-12  # an sd at most this share of the mean's size (at least 1) is no spread (:func:`no_spread`)
TEST_KINDS = ("compare", "sign", "converge", "bound")
STAT_KINDS = ("final", "band", "gap", "trend")
DIRECTIONS = ("greater", "less")
MAX_SEEDS_NEEDED = 1000
MISSING_NOTE = "runs missing"  # the note of a test an arm of which has no run
INTERVAL = "paired Student-t 95% interval over seeds"
# what evaluates a run at step 0, the start of training a precondition reads (precondition_result)
START_EVALUATION = "evaluate at step 0: verl.val_before_train=true on verl, trainer.test_freq > 0 on tiny"


# ---------------------------------------------------------------------------------------------
# the claims file
@dataclass(frozen=True)
class Stat:
    name: str
    kind: str
    key: str = ""
    key_a: str = ""
    key_b: str = ""
    band: str = "low"
    fraction: float = 0.25
    label: str = ""
    unit: str = ""  # what the tested number measures (accuracy, tokens, ...): the claims figure's panel
    paper_table: str | None = None
    # band only: leave out the budgets at which the test's runs (every arm and seed, pooled) are not
    # above the task's chance accuracy (``eval/{ds}/chance_acc``, 0 where not logged) by this much;
    # the band is then the lowest/highest ``fraction`` of the budgets left, the same for every run
    above_chance: float | None = None

    def keys(self) -> list[str]:
        return [k for k in (self.key, self.key_a, self.key_b) if k]


@dataclass(frozen=True)
class Test:
    kind: str
    a: str | None = None
    b: str | None = None
    arms: tuple[str, ...] = ()
    stat: str | None = None
    low: str | None = None
    high: str | None = None
    direction: str = "greater"

    def all_arms(self) -> list[str]:
        return list(dict.fromkeys([x for x in (self.a, self.b) if x] + list(self.arms)))

    def stats(self) -> list[str]:
        return [s for s in (self.stat, self.low, self.high) if s]


@dataclass(frozen=True)
class Claim:
    id: str
    title: str
    paper: str
    tests: tuple[Test, ...]
    # what must be true of the runs at the start of training (their first evaluation) for the claim
    # to be testable on them: sign tests, read with the 95% t-interval over independent seeds
    # (precondition_result)
    preconditions: tuple[Test, ...] = ()


@dataclass(frozen=True)
class ClaimsSpec:
    path: Path
    sweeps: tuple[str, ...]
    stats: dict
    claims: tuple[Claim, ...]


def _need(cond: bool, path: Path, where: str, what: str) -> None:
    if not cond:
        raise ReportError(f"{path}: {where}: {what}")


def _typed(path: Path, where: str, data: dict, known: dict) -> None:
    """Each field of ``data`` (a mapping at ``where``) is in ``known`` (name → check) and passes it."""
    for name, value in data.items():
        _need(name in known, path, where, f"unknown field {name!r}; {did_you_mean(str(name), known)}")
        if value is not None:  # `label:` left empty: not given (as in a figure spec)
            _need((problem := known[name](value)) is None, path, f"{where}.{name}", str(problem))


def _given(data: dict) -> dict:
    return {k: v for k, v in data.items() if v is not None}


def _mapping(path: Path, where: str, value, what: str) -> dict:
    _need(isinstance(value, dict), path, where, f"expected a mapping ({what}), got {type(value).__name__}")
    return value


def _items(path: Path, where: str, value, what: str) -> list:
    _need(isinstance(value, list), path, where, f"expected a list ({what}), got {type(value).__name__}")
    return value


STAT_KEY_RE = re.compile(r"^eval/\{dataset\}/[^{}@/][^{}@]*(@\{budget\})?$")


def _stat_key_problem(v) -> str | None:
    """A statistic's key: ``eval/{dataset}/<name>``, with ``@{budget}`` for a per-budget metric."""
    if problem := key_problem(v, (DATASET, BUDGET), (DATASET,)):
        return problem
    if not STAT_KEY_RE.match(v):
        return (f"{v!r} is not an evaluation key: write eval/{DATASET}/<name>, or eval/{DATASET}/<name>@{BUDGET} "
                "for a metric per budget")
    return None


def eval_names() -> list[str]:
    """The evaluation metric names (``eval/{ds}/<name>``, per budget ``<name>@{b}``) a run logs: every one
    :mod:`arctl.track.metrics_schema` builds, each as the key of a dataset ``ds`` (budget 1 for a per-budget one)."""
    plain = [NAME_ANYTIME_ACC, NAME_GRID_ANYTIME_ACC, NAME_FINAL_ACC, NAME_THINK_LEN, NAME_CHANCE_ACC, NAME_CURVE_AUC,
             *(acc_at_frac_name(f) for f in ACC_FRACTIONS)]
    return ([eval_key(n, "ds") for n in plain] + [eval_acc("ds", 1)] + [eval_corr(k, "ds", 1) for k in CORR_KINDS]
            + [eval_nvar(k, "ds", 1) for k in NVAR_KINDS])


def _unknown_metric(v: str) -> str | None:
    """A statistic's key whose metric no run logs (:func:`eval_names`): a typo would read as "the runs did not log
    what this test needs", inconclusive (from a hunt), where a figure's key says "did you mean" (the figures'
    :func:`arctl.report.data._closest_keys`, here over the schema's names instead of the runs' keys)."""
    from arctl.report.data import _closest_keys

    glob = key_glob(v)
    near = _closest_keys([glob], eval_names)
    if glob in near:
        return None
    said = " or ".join(n.replace("eval/*/", f"eval/{DATASET}/").replace("@*", f"@{BUDGET}") for n in near)
    return (f"{v!r}: no run logs this metric (the evaluation metrics: docs/metrics.md)"
            + (f"; did you mean {said}?" if said else ""))


STAT_FIELDS = {"kind": functools.partial(choice_problem, choices=STAT_KINDS), "key": _stat_key_problem,
               "key_a": _stat_key_problem, "key_b": _stat_key_problem, "band": functools.partial(choice_problem, choices=("low", "high")),
               "fraction": fraction_problem, "label": text_problem, "unit": text_problem,
               "paper_table": name_problem, "above_chance": margin_problem}
TEST_FIELDS = {"kind": functools.partial(choice_problem, choices=TEST_KINDS), "a": name_problem, "b": name_problem,
               "arms": names_problem, "stat": name_problem, "low": name_problem, "high": name_problem,
               "direction": functools.partial(choice_problem, choices=DIRECTIONS)}
CLAIM_FIELDS = {"id": text_problem, "title": text_problem, "paper": text_problem, "tests": lambda v: None,
                "preconditions": lambda v: None}


def _test(path: Path, where: str, t, stats: dict) -> Test:
    t = _mapping(path, where, t, "a test: {kind: compare, a: ..., b: ..., stat: ..., direction: ...}")
    _need(t.get("kind") is not None, path, where, f"needs a kind: one of {', '.join(TEST_KINDS)}")
    _typed(path, where, t, TEST_FIELDS)
    test = Test(**{**_given(t), "arms": tuple(t.get("arms") or ())})
    for s in test.stats():
        _need(s in stats, path, where, f"unknown statistic {s!r} (define it under statistics:)")
    return test


def load_claims(path: Path | None = None) -> ClaimsSpec:
    """Read and check a claims file (default ``reports/claims.yaml``): each mistake one
    :class:`ReportError` line naming the file and the field."""
    from arctl.compose.paths import find_spec, report_file, reports_dir

    path = Path(path) if path is not None else (report_file("claims.yaml") or reports_dir() / "claims.yaml")
    if not path.is_file():
        raise ReportError(f"no claims file {path}; set ARCTL_SPECS to the directory holding reports/claims.yaml")
    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"))
    except (safe_yaml.YamlError, UnicodeDecodeError, OSError) as err:
        raise ReportError(f"{path}: not a readable YAML file ({' '.join(str(err).split())[:200]})") from None
    _need(isinstance(data, dict) and data.get("kind") == "claims", path, "top level", "expected a mapping with kind: claims")
    top = {"kind", "name", "sweeps", "statistics", "claims"}  # the interval and its level are fixed (INTERVAL, ALPHA)
    _need(set(data) <= top, path, "top level", f"unknown field(s) {sorted(set(data) - top, key=str)}")
    _need((problem := names_problem(data.get("sweeps") or [])) is None, path, "sweeps", str(problem))
    for sweep in data.get("sweeps") or []:
        _need(find_spec("sweeps", sweep) is not None, path, "sweeps", f"unknown sweep {sweep!r} (`arctl ls sweeps` lists them)")
    stats = {}
    for name, s in _mapping(path, "statistics", data.get("statistics") or {}, "name: {kind: ..., key: ...}").items():
        where = f"statistics.{name}"
        s = _mapping(path, where, s, "{kind: final, key: ..., label: ..., unit: ...}")
        _need(s.get("kind") in STAT_KINDS, path, where, f"kind must be one of {', '.join(STAT_KINDS)}")
        _typed(path, where, s, STAT_FIELDS)
        st = Stat(name=str(name), **_given(s))
        _need(bool(st.keys()), path, where, "needs key (or key_a and key_b)")
        _need(st.above_chance is None or st.kind == "band", path, where,
              "above_chance is a margin 0 <= m < 1 of a band statistic")
        _need(st.kind != "trend" or float(st.fraction) < 0.5, path, where,  # from a review: a trend of 0 by design
              f"a trend's fraction is below 0.5: with {st.fraction:g} its high and low bands share budgets (at 0.5, "
              "wherever the budgets are odd in number)")
        per_budget = [k for k in st.keys() if k.endswith("@" + BUDGET)]
        _need(st.kind == "final" or len(per_budget) == len(st.keys()), path, where,
              f"a {st.kind} statistic reads a metric per budget: its key ends in @{BUDGET}")
        stats[str(name)] = st
    claims = []
    for i, c in enumerate(_items(path, "claims", data.get("claims") or [], "- {id: 1, title: ..., tests: [...]}")):
        where = f"claims[{i}]"
        c = _mapping(path, where, c, "{id: 1, title: ..., tests: [...]}")
        _typed(path, where, c, CLAIM_FIELDS)
        _need(bool(c.get("title")) and bool(c.get("tests")), path, where, "needs a title and tests")
        tests = []
        for j, t in enumerate(_items(path, f"{where}.tests", c["tests"], "- {kind: compare, ...}")):
            tw = f"{where}.tests[{j}]"
            test = _test(path, tw, t, stats)
            need = {"compare": test.a and test.b and test.stat, "sign": test.arms and test.stat,
                    "converge": test.a and test.arms and test.a not in test.arms and test.low and test.high,
                    "bound": test.arms}[test.kind]
            _need(bool(need), path, tw, {"compare": "needs a, b and stat", "sign": "needs arms and stat",
                                         "converge": "needs a (the arm that leads at low), the other arms, low and high",
                                         "bound": "needs arms"}[test.kind])
            # an arm compared with itself is a difference of 0 by construction: never evidence (from a hunt: read
            # as "inconclusive")
            _need(test.kind != "compare" or test.a != test.b, path, tw, f"compares arm {test.a!r} with itself: "
                  "a and b must be two arms")
            tests.append(test)
        pre = []
        for j, t in enumerate(_items(path, f"{where}.preconditions", c.get("preconditions") or [], "- {kind: sign, ...}")):
            tw = f"{where}.preconditions[{j}]"
            test = _test(path, tw, t, stats)
            _need(test.kind == "sign", path, tw, "a precondition is a sign test (kind: sign)")
            _need(bool(test.arms) and bool(test.stat), path, tw, "needs arms and a stat defined under statistics:")
            pre.append(test)
        claim_id = str(i + 1 if c.get("id") is None else c["id"])  # `id: null` is not given, as every null here
        # a report's claims are named by id (its tables, claims.json, the browser page's anchors): one id each
        _need(all(claim_id != other.id for other in claims), path, f"{where}.id",
              f"id {claim_id!r} is another claim's too: give each claim its own id")
        claims.append(Claim(claim_id, str(c["title"]), str(c.get("paper") or ""), tuple(tests), tuple(pre)))
    _need(bool(claims), path, "claims", "no claims")
    for name, st in stats.items():  # the metrics, once the file's shape is right (an error of its shape comes first)
        for field_name in ("key", "key_a", "key_b"):
            if value := getattr(st, field_name):
                _need((problem := _unknown_metric(value)) is None, path, f"statistics.{name}.{field_name}", str(problem))
    return ClaimsSpec(path, tuple(data.get("sweeps") or ()), stats, tuple(claims))


def arms_tested(spec: ClaimsSpec) -> set[str]:
    """The arms the claims' tests and preconditions read."""
    return {arm for c in spec.claims for t in (*c.tests, *c.preconditions) for arm in t.all_arms()}


def runs_of_arms(runs, arms: set[str]):
    """``runs`` (a :class:`arctl.track.runs.Runs`), in place and returned, with only the runs of ``arms`` and those
    that serve a cell of one of them (``serves``: a shared run read as that arm's): the claims decide one run per
    cell of the arms they test, not of every arm of their sweeps (from a hunt: several runs of an arm no claim
    tests were one error line, and the --where it asked for left out the arms tested)."""
    table = runs.runs
    if not len(table) or "arm" not in table.columns:
        return runs
    serves = table["serves"] if "serves" in table.columns else [None] * len(table)
    keep = [str(arm) in arms or any(a in arms for _, a in _served_cells(text)) for arm, text in zip(table["arm"], serves)]
    runs.runs = table[keep].reset_index(drop=True)
    h = runs.history
    if len(h):
        runs.history = h[h["run_id"].astype(str).isin(set(runs.runs["run_id"].astype(str)))].reset_index(drop=True)
    return runs


def metric_globs(spec: ClaimsSpec) -> list[str]:
    """Metric globs the claims read (every evaluation of the anytime/final accuracy for the bound)."""
    out = {eval_key(NAME_ANYTIME_ACC), eval_key(NAME_FINAL_ACC), eval_key(NAME_GRID_ANYTIME_ACC)}
    for st in spec.stats.values():
        for k in st.keys():
            out.add(key_glob(k))
        if st.above_chance is not None:
            out.add(eval_key(NAME_CHANCE_ACC))
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# one number per run
def _band(budgets: list[int], band: str, fraction: float) -> list[int]:
    k = max(1, math.ceil(len(budgets) * float(fraction)))
    return budgets[:k] if band == "low" else budgets[-k:]


def _key_values(final: dict[str, float], template: str) -> dict[str, dict[int | None, float]]:
    """dataset → {budget (None without one) → value} for the keys matching ``template``; a key whose
    final value is NaN (a correlation undefined at that budget in the final evaluation) is left out,
    not replaced by an earlier evaluation's value."""
    name = template.split("/", 2)[2].split("@")[0]
    out: dict[str, dict] = {}
    for key, value in final.items():
        p = parse_metric(key)
        # a budget-forced evaluation (`{ds}-forced`) is another kind of evaluation: never averaged in
        if p is None or p.namespace != "eval" or p.name != name or p.dataset.endswith(FORCED_SUFFIX):
            continue
        if (BUDGET in template) != (p.budget is not None) or not math.isfinite(value):
            continue
        out.setdefault(p.dataset, {})[p.budget] = float(value)
    return out


def chance_budgets(stat: Stat, runs: list[RunView]) -> dict[str, list[int]] | None:
    """dataset → the budgets at which the mean of ``stat.key`` over ``runs`` (their final values)
    exceeds the dataset's chance accuracy (``eval/{ds}/chance_acc``; 0 where no run logged it) by
    ``stat.above_chance``; None when the statistic keeps every budget. One budget set for all the
    runs of a test: a paired difference compares the same budgets."""
    if stat.above_chance is None:
        return None
    pooled: dict[str, dict[int, list[float]]] = {}
    chance: dict[str, float] = {}
    for run in runs:
        for ds, vals in _key_values(run.final, stat.key).items():
            for b, v in vals.items():
                if b is not None and np.isfinite(v):
                    pooled.setdefault(ds, {}).setdefault(b, []).append(v)
            c = run.final.get(eval_chance_acc(ds))
            if c is not None and np.isfinite(c):
                chance[ds] = max(chance.get(ds, 0.0), float(c))
    return {ds: sorted(b for b, vs in per_b.items() if np.mean(vs) > chance.get(ds, 0.0) + float(stat.above_chance))
            for ds, per_b in pooled.items()}


def _finite_support(stat: Stat, final: dict[str, float]) -> dict[str, set]:
    """dataset → the budgets (None for a key without one) at which the run has a finite value of every key
    of ``stat`` (both keys of a gap)."""
    maps = [_key_values(final, key) for key in stat.keys()]
    out = {}
    for ds in set.intersection(*(set(m) for m in maps)):
        budgets = set.intersection(*(set(m[ds]) for m in maps))
        if budgets:
            out[ds] = budgets
    return out


def common_support(stat: Stat, finals: list[dict[str, float]], supports: list[dict[str, set]] | None = None
                   ) -> dict[str, set]:
    """dataset → budgets at which EVERY run of ``finals`` has a finite value of ``stat``: what a paired
    difference (or a mean over arms) compares. From a review: a run that logged NaN for one benchmark was
    averaged over the others, so its seed's difference set two benchmarks against three. ``supports``: the
    runs' :func:`_finite_support`, where the caller has them."""
    if supports is None:
        supports = [_finite_support(stat, f) for f in finals]
    if not supports:
        return {}
    shared = set.intersection(*(set(sp) for sp in supports))
    out = {ds: set.intersection(*(sp[ds] for sp in supports)) for ds in shared}
    return {ds: bs for ds, bs in out.items() if bs}


def run_stat(stat: Stat, final: dict[str, float], budgets_of: dict[str, list[int]] | None = None,
             support: dict[str, set] | None = None) -> float:
    """``stat`` of one run from its last logged values ``final`` (key → value); NaN when the run
    did not log what it needs. The mean over the datasets that have it. ``budgets_of`` (dataset →
    budgets, :func:`chance_budgets`): a band over those budgets only. ``support`` (dataset → budgets,
    :func:`common_support`): only those datasets and budgets (the ones every run compared with it has)."""
    def allowed(ds: str, b) -> bool:
        return support is None or b in support.get(ds, ())

    per_ds = []
    if stat.kind == "final":
        for ds, vals in _key_values(final, stat.key).items():
            if None in vals and allowed(ds, None):
                per_ds.append(vals[None])
    elif stat.kind in ("band", "trend"):
        for ds, vals in _key_values(final, stat.key).items():
            budgets = sorted(b for b in vals if b is not None and allowed(ds, b)
                             and (budgets_of is None or b in budgets_of.get(ds, ())))
            if not budgets:
                continue
            if stat.kind == "band":
                per_ds.append(float(np.mean([vals[b] for b in _band(budgets, stat.band, stat.fraction)])))
            elif 2 * len(_band(budgets, "low", stat.fraction)) <= len(budgets):  # the bands apart: else no trend
                hi = np.mean([vals[b] for b in _band(budgets, "high", stat.fraction)])
                lo = np.mean([vals[b] for b in _band(budgets, "low", stat.fraction)])
                per_ds.append(float(hi - lo))
    elif stat.kind == "gap":
        va, vb = _key_values(final, stat.key_a), _key_values(final, stat.key_b)
        for ds in sorted(set(va) & set(vb)):
            budgets = sorted(b for b in set(va[ds]) & set(vb[ds]) if b is not None and allowed(ds, b))
            if budgets:
                chosen = _band(budgets, stat.band, stat.fraction)
                per_ds.append(float(np.mean([va[ds][b] - vb[ds][b] for b in chosen])))
    per_ds = [v for v in per_ds if np.isfinite(v)]
    return float(np.mean(per_ds)) if per_ds else float("nan")


def paired_stats(stat: Stat, finals: list[dict[str, float]], budgets_of=None) -> tuple[list[float], bool]:
    """``stat`` of each run of ``finals`` (the runs of one seed a test compares) over their
    :func:`common_support`, and whether that support leaves out a value some run has (a NaN or a metric
    another run did not log)."""
    own = [_finite_support(stat, f) for f in finals]
    support = common_support(stat, finals, own)

    def used(sup: dict[str, set]) -> dict[str, set]:  # what a band can read: within budgets_of (above chance)
        if budgets_of is None:
            return sup
        kept = {ds: {b for b in bs if b is None or b in budgets_of.get(ds, ())} for ds, bs in sup.items()}
        return {ds: bs for ds, bs in kept.items() if bs}

    narrowed = any(used(sup) != used(support) for sup in own)
    return [run_stat(stat, f, budgets_of, support) for f in finals], narrowed


# ---------------------------------------------------------------------------------------------
# results
@dataclass
class TestResult:
    kind: str
    label: str
    arms: list[str]
    stat: str | None
    direction: str
    per_seed: dict  # seed -> {"a": .., "b": .., "value": ..} (value: the tested number)
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    seeds_needed: int | None = None  # seeds for 80% power at the observed effect, Holm level (None: unknown)
    seeds_range: list | None = None  # the same at the ends of the sd's 80% interval [low, high] (None: unbounded)
    sd: float | None = None  # of the per-seed values
    p_value: float | None = None  # two-sided paired t-test of mean 0
    p_holm: float | None = None  # Holm-adjusted within the claim
    missing: list[str] = field(default_factory=list)  # arms without runs; "arm (seeds ...)": without those seeds
    commands: list[str] = field(default_factory=list)  # what produces the missing runs
    note: str = ""
    paper: str = ""  # the paper's numbers for this comparison, when it has them
    same_as: str | None = None  # "claim id: test label" of an earlier test on the same configs and statistic
    unit: str = ""  # the statistic's unit (Stat.unit): tests of one unit share a panel of the figure

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class ClaimResult:
    id: str
    title: str
    paper: str
    verdict: str
    tests: list[TestResult]

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "paper": self.paper, "verdict": self.verdict,
                "tests": [t.to_json() for t in self.tests]}


def seeds_needed(mean: float, sd: float, tests_in_claim: int = 1) -> int | None:
    """Seeds for 80% power: the smallest n whose paired t-test at the claim's Holm level for its
    first test (ALPHA / tests_in_claim) detects a true mean of ``mean`` with spread ``sd`` with
    probability >= POWER; None when no number <= MAX_SEEDS_NEEDED would (or the mean is 0)."""
    if not (np.isfinite(mean) and np.isfinite(sd)) or mean == 0:
        return None
    if sd == 0:
        return 2
    return seeds_for_power(abs(mean) / sd, POWER, ALPHA / max(1, tests_in_claim), MAX_SEEDS_NEEDED)


def interval_verdict(values: list[float], direction: str) -> tuple[float | None, float | None, float | None, str, int | None]:
    """(mean, low, high, verdict, seeds needed) of per-seed ``values`` claimed > 0 (greater) or < 0
    (less), for this test alone (95% t-interval; :func:`check_claims` corrects within a claim)."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return None, None, None, INCONCLUSIVE, None
    mean, half, n = mean_ci95(x)
    mean, half = float(mean), float(half)
    sd = float(np.std(x, ddof=1)) if len(x) >= 2 else float("nan")
    if len(x) < 2:  # no spread to judge by, no power to compute: the note says to run at least 3 seeds
        return mean, None, None, INCONCLUSIVE, None
    lo, hi = mean - half, mean + half
    if no_spread(sd, mean):  # a t-interval of width 0: judged by the sign test (correct_within_claim)
        return mean, lo, hi, INCONCLUSIVE, sign_test_seeds(1) if mean != 0 else None
    sign = 1 if direction == "greater" else -1
    if sign * lo > 0 and sign * hi > 0:
        return mean, lo, hi, HOLDS, None
    if sign * lo < 0 and sign * hi < 0:
        return mean, lo, hi, FAILS, None
    return mean, lo, hi, INCONCLUSIVE, seeds_needed(mean, sd)


def rounding(size: float) -> float:
    """How far rounding can move a computed number of this size: NO_SPREAD x max(1, |size|); a difference
    within it is 0 (:func:`no_spread`; the bound, :func:`_bound`)."""
    return NO_SPREAD * max(1.0, abs(size))


def no_spread(sd: float | None, mean: float | None) -> bool:
    """Whether the seeds' values are one value (to rounding: sd <= 1e-12 x max(1, |mean|), :func:`rounding`):
    the t statistic mean / (sd / sqrt(n)) is undefined or a rounding artefact (tied differences on an
    accuracy grid at 2-3 seeds; one run under two names), so :func:`p_value` uses the sign test."""
    return sd is not None and mean is not None and np.isfinite(sd) and sd <= rounding(mean)


def sign_test_p(above: int, below: int = 0) -> float:
    """Two-sided p-value of the exact sign test of ``above`` values above 0 and ``below`` below it (values
    at 0 left out): 2 * P(Binomial(above + below, 1/2) <= min(above, below)), at most 1; 1 with none.
    All ``n`` on one side: 2 * 0.5^n."""
    n = above + below
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(above, below) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def sign_counts(values) -> tuple[int, int]:
    """How many of the finite ``values`` are above 0 and below it; one within rounding of 0 (|v| <=
    NO_SPREAD) is neither."""
    x = [float(v) for v in values if np.isfinite(v)]
    return sum(v > NO_SPREAD for v in x), sum(v < -NO_SPREAD for v in x)


def sign_test_seeds(tests_in_claim: int = 1) -> int:
    """Seeds that one-sided agreement needs to pass the claim's Holm level for its first test
    (ALPHA / tests_in_claim) by the sign test: the smallest n with 2 * 0.5^n < that level."""
    n = 2
    while sign_test_p(n) >= ALPHA / max(1, tests_in_claim):
        n += 1
    return n


def p_value(values: list[float]) -> float:
    """Two-sided p-value of the paired t-test of mean 0 (NaN below 2 values). Where the values do not
    spread (:func:`no_spread`) the t-test is undefined (t = mean / 0 would give p = 0 from 2 tied
    seeds): the exact sign test's :func:`sign_test_p` of the values' signs instead (1 where every value
    is 0 to rounding; values of rounding size on both sides of 0 are not n seeds on one side)."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    if len(x) < 2:
        return float("nan")
    sd = float(np.std(x, ddof=1))
    if no_spread(sd, float(np.mean(x))):
        return sign_test_p(*sign_counts(x))
    t = float(np.mean(x)) / (sd / math.sqrt(len(x)))
    return 2 * (1 - t_cdf(abs(t), len(x) - 1))


def claim_verdict(tests: list[TestResult]) -> str:
    """Fails when a test fails, holds when every test holds, not testable here when no test is
    testable here, else inconclusive."""
    verdicts = [t.verdict for t in tests]
    if any(v == FAILS for v in verdicts):
        return FAILS
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if verdicts and all(v == NOT_TESTABLE for v in verdicts):
        return NOT_TESTABLE
    return INCONCLUSIVE


def correct_within_claim(tests: list[TestResult]) -> None:
    """Holm's correction over a claim's interval tests (compare, sign, converge; the bound is a
    count): a test holds (fails) when its Holm-adjusted p-value is below ALPHA and its mean is on
    the claimed (other) side of 0, and is inconclusive otherwise, with the seeds that would give it
    80% power at that level at the observed mean and spread, and the same at the ends of the sd's
    80% interval (an sd from few seeds is itself uncertain).

    The family is every interval test the claim declares: one without a p-value (runs missing,
    fewer than 2 seeds, not testable here, no spread) counts as p = 1, so a claim whose other tests
    lack runs is not judged at a laxer level than its declared tests allow."""
    family = [t for t in tests if t.kind != "bound"]
    tested = [t.n >= 2 and t.mean is not None for t in family]
    p_all = [t.p_value if ok and t.p_value is not None and t.p_value == t.p_value else 1.0
             for t, ok in zip(family, tested)]
    adjusted = holm(p_all)
    k = len(family)
    for t, ok, p_adj in zip(family, tested, adjusted):
        if not ok or t.verdict == NOT_TESTABLE:
            continue
        t.p_holm = p_adj
        sign = 1 if t.direction == "greater" else -1
        zero = abs(t.mean) <= NO_SPREAD  # 0 to rounding: no side
        on_side = not zero and sign * t.mean > 0
        above, below = sign_counts(v.get("value", float("nan")) for v in t.per_seed.values())
        if no_spread(t.sd, t.mean) and above + below:  # p is the sign test's (p_value)
            said = (f"the seeds do not spread (mean {t.mean:+.4g}), so the p-value is the exact sign test's "
                    f"({above} of {t.n} seeds above 0, {below} below: p = {sign_test_p(above, below):.3g}), "
                    f"Holm-adjusted {p_adj:.3g} over the claim's {k} test(s)")
            if p_adj < ALPHA:
                t.verdict, t.seeds_needed, t.seeds_range = (HOLDS if on_side else FAILS), None, None
                t.note = said + (f"; {t.note}" if t.note else "")
            elif on_side:
                t.verdict, t.seeds_range = INCONCLUSIVE, None
                t.seeds_needed = sign_test_seeds(k)
                t.note = (f"{said}; underpowered: {t.seeds_needed} seeds all on one side would pass"
                          + (f"; {t.note}" if t.note else ""))
            else:  # seeds on the other side would make it fail, not pass: no seed count for the claim
                t.verdict, t.seeds_needed, t.seeds_range = INCONCLUSIVE, None, None
                t.note = (f"{said}; the seeds are on the other side of 0, not yet significant: no evidence for it"
                          + (f"; {t.note}" if t.note else ""))
            continue
        if p_adj < ALPHA:
            t.verdict = HOLDS if on_side else FAILS
            t.seeds_needed, t.seeds_range = None, None
            continue
        t.verdict = INCONCLUSIVE
        # seeds to detect the observed mean: none on the other side of 0 (it would count seeds for the opposite)
        t.seeds_needed = seeds_needed(t.mean, t.sd, k) if on_side else None
        if t.sd and t.sd > 0 and on_side:
            lo_sd, hi_sd = sd_interval(t.sd, t.n, 0.8)
            t.seeds_range = [seeds_needed(t.mean, lo_sd, k), seeds_needed(t.mean, hi_sd, k)]
        where = f"Holm-adjusted p = {p_adj:.3g} over the claim's {k} test(s)"
        if zero:
            said = f"{where}; the observed mean is 0: no evidence either way"
        elif not on_side:
            said = (f"{where}; the observed mean ({t.mean:+.4g}) is on the other side of 0, within its noise: "
                    "no evidence either way")
        elif t.seeds_needed:
            rng = t.seeds_range or [None, None]
            span = f" ({rng[0] or '?'}-{rng[1] or f'>{MAX_SEEDS_NEEDED}'} over the sd's 80% interval)"
            said = (f"{where}; underpowered: about {t.seeds_needed} seeds would give 80% power at the "
                    f"observed mean and spread{span}")
        else:
            said = f"{where}; underpowered: more than {MAX_SEEDS_NEEDED} seeds at the observed mean and spread"
        # what the test said of its seeds (one left out for NaN, ...) stays: from a hunt, it was replaced
        t.note = said + (f"; {t.note}" if t.note else "")


@dataclass
class RunView:
    """What the claims read of one run."""

    run_id: str
    experiment: str
    arm: str
    seed: int
    final: dict  # metric -> last logged value
    evals: dict  # step -> {metric: value} for the anytime/final accuracy keys (the bound)
    eval_budgets: int | None  # m of the anytime accuracy's uniform prior (len of config eval.budgets)
    grid_budgets: int | None
    first: dict = field(default_factory=dict)  # metric -> value at the run's first evaluation (at first_step)
    compute_key: str | None = None  # what the run computes, names aside (arms with the same key are one config)
    # what it computes: its config columns, names aside (arctl.report.cells.computed_items); {} where unknown
    config: dict = field(default_factory=dict, repr=False, compare=False)
    # the step of the first evaluation: a precondition reads ``first`` only where it is 0, the start of training
    # (:func:`precondition_result`); None: the run logged no evaluation
    first_step: int | None = 0


def _label(arm: str) -> str:
    from arctl.report.specs import arm_label

    return arm_label(arm)


def one_config_per_arm_seed(runs: list[RunView]) -> None:
    """:class:`ReportError` (one line) where an arm has runs of other configs at one seed (a grid's points,
    a rerun with an override): the tests pair runs by arm and seed and read one of each
    (:func:`_by_arm_seed`), so the others would be dropped without a word. Runs of one config (the same arm
    run in several experiments: ``compute_key``) are one. And where an arm's runs at other seeds are runs of
    other configs (:func:`arctl.report.cells.one_config_per_arm`): a test reads them as seeds of one arm."""
    by_cell: dict[tuple, dict] = {}
    for v in runs:
        by_cell.setdefault((v.arm, int(v.seed)), {})[v.run_id] = v
    for (arm, seed), views in sorted(by_cell.items(), key=str):
        keys = {rid: v.compute_key for rid, v in views.items()}
        if len(set(keys.values())) > 1 or (len(keys) > 1 and None in keys.values()):
            # the key they differ in, as a figure's error names it (from a hunt: "choose with --where KEY=VALUE")
            key, said = differing_key([views[rid].config for rid in sorted(views)])
            raise ReportError(f"arm {arm!r} has {len(keys)} runs of other configs at seed {seed} "
                              f"({f'{said}: ' if said else ''}{', '.join(sorted(keys)[:3])}): the claims pair runs by "
                              f"arm and seed and would read only one; choose with --where {key}=VALUE")
    by_arm: dict[str, list[tuple[int, dict]]] = {}
    for v in runs:
        if v.config:  # its seeds are runs of one config (from a hunt: seed 2 at another optim.lr was tested as a seed)
            by_arm.setdefault(v.arm, []).append((int(v.seed), {**v.config, "run_id": v.run_id}))
    for arm, seeded in sorted(by_arm.items()):
        one_config_per_arm(arm, seeded, SEEDS_READ)


SEEDS_READ = "the claims read an arm's runs as its seeds"  # why one_config_per_arm refuses, in the claims' words


def _by_arm_seed(runs: list[RunView]) -> dict[str, dict[int, RunView]]:
    out: dict[str, dict[int, RunView]] = {}
    for r in sorted(runs, key=lambda r: r.run_id):  # deterministic: the first run id of an (arm, seed)
        out.setdefault(r.arm, {}).setdefault(int(r.seed), r)
    return out


def _paper_numbers(test: Test, stat: Stat) -> str:
    if not stat.paper_table or test.kind != "compare":
        return ""
    try:
        import pandas as pd

        from arctl.report.specs import paper_tables_path

        paper = pd.read_csv(paper_tables_path())
        rows = paper[paper["table"] == stat.paper_table].set_index("algorithm")
        a, b = rows.loc[_label(test.a), "Avg"], rows.loc[_label(test.b), "Avg"]
    except (OSError, KeyError, ValueError):
        return ""
    table = {"anytime": "Table 2", "final": "Table 1"}.get(stat.paper_table, stat.paper_table)
    return f"paper {table}, Avg: {a:.1f}% vs {b:.1f}% ({(a - b) / 100:+.3f})"


def evaluate_test(test: Test, spec: ClaimsSpec, runs: list[RunView], missing_command) -> TestResult:
    """One test over ``runs``; ``missing_command(arm, seeds)`` names what produces an arm's runs at
    those seeds. An arm without runs is missing (at the seeds the test's other arms have); an arm
    without some of those seeds is listed as ``"arm (seeds ...)"`` with the command for them (its
    paired seeds still count)."""
    from arctl.config.ranges import seeds_text

    by = _by_arm_seed(runs)
    arms = test.all_arms()
    missing = [a for a in arms if a not in by]
    seen = sorted(set().union(*(set(by.get(a, {})) for a in arms)))  # the seeds any arm of the test has
    short = {a: [s for s in seen if s not in by[a]] for a in arms if a in by}
    short = {a: lack for a, lack in short.items() if lack}
    commands = list(dict.fromkeys([missing_command(a, seen or None) for a in missing]
                                  + [missing_command(a, lack) for a, lack in short.items()]))
    listed = missing + [f"{a} (seeds {seeds_text(lack)})" for a, lack in short.items()]
    stat = spec.stats.get(test.stat) if test.stat else None
    label = _test_label(test, spec)
    per_seed: dict = {}
    if test.kind == "bound":
        return _bound(test, by, label, listed, commands)
    mine = [r for a in arms for r in by.get(a, {}).values()]  # the test's runs: one budget set for all
    kept = {name: chance_budgets(spec.stats[name], mine) for name in test.stats()}
    narrowed: list[int] = []  # seeds whose runs were compared on the benchmarks and budgets all of them have
    if test.kind == "compare":
        seeds = sorted(set(by.get(test.a, {})) & set(by.get(test.b, {})))
        for s in seeds:
            (va, vb), cut = paired_stats(stat, [by[test.a][s].final, by[test.b][s].final], kept[test.stat])
            if not np.isfinite(va - vb):  # no difference; each arm's own number as it is (a NaN run beside a finite one)
                va, vb = (run_stat(stat, by[x][s].final, kept[test.stat]) for x in (test.a, test.b))
                per_seed[s] = {"a": va, "b": vb, "value": float("nan")}
            else:
                per_seed[s] = {"a": va, "b": vb, "value": va - vb}
            narrowed += [s] * cut
    elif test.kind == "sign":  # the mean over every listed arm: only seeds all of them have, none while one is missing
        seeds = sorted(set.intersection(*(set(by.get(a, {})) for a in test.arms))) if not missing else []
        for s in seeds:
            vals, cut = paired_stats(stat, [by[a][s].final for a in test.arms], kept[test.stat])
            narrowed += [s] * cut
            if all(np.isfinite(vals)):
                per_seed[s] = {"value": float(np.mean(vals))}
    elif test.kind == "converge":
        lo_stat, hi_stat = spec.stats[test.low], spec.stats[test.high]
        every = test.all_arms()
        seeds = sorted(set.intersection(*(set(by.get(a, {})) for a in every))) if not missing else []
        for s in seeds:
            lows, cut_low = paired_stats(lo_stat, [by[a][s].final for a in every], kept[test.low])
            highs, cut_high = paired_stats(hi_stat, [by[a][s].final for a in every], kept[test.high])
            narrowed += [s] * (cut_low or cut_high)
            if not all(np.isfinite(lows + highs)):  # an arm without the statistic: no lead over every arm
                continue
            lead_low = float(np.mean([lows[0] - x for x in lows[1:]]))
            lead_high = float(np.mean([highs[0] - x for x in highs[1:]]))
            per_seed[s] = {"lead_low": lead_low, "lead_high": lead_high, "value": lead_low - lead_high}
    direction = "greater" if test.kind == "converge" else test.direction
    values = [v["value"] for v in per_seed.values() if np.isfinite(v["value"])]
    mean, lo, hi, verdict, need = interval_verdict(values, direction)
    sd = float(np.std(values, ddof=1)) if len(values) >= 2 else None
    note = ""
    at_chance = [n for n, k in kept.items() if k is not None and mine and not any(k.values())]
    if missing:
        note = MISSING_NOTE
    elif at_chance:
        st = spec.stats[at_chance[0]]
        verdict, need = NOT_TESTABLE, None
        note = (f"not testable here: at no evaluated budget is the mean accuracy of these runs above chance + "
                f"{st.above_chance:g} ({st.label or st.name})")
    elif not values:
        note = "the runs did not log what this test needs (are they finished? the final evaluation runs at the last step)"
    elif len(values) < 2:
        note = f"{len(values)} seed(s) with every arm of the test: run at least {need or 3}"
    unvalued = [x for x in seeds if x not in per_seed or not np.isfinite(per_seed[x]["value"])]
    if values and unvalued:  # from a review: such seeds left the count without a word
        said = (f"seed(s) {seeds_text(unvalued)} left out: a run of theirs has no finite value of the statistic "
                "(NaN: a diverged run, or a metric it did not log)")
        note = f"{note}; {said}" if note else said
    narrowed = [x for x in narrowed if x not in unvalued]
    if values and narrowed:
        said = (f"seed(s) {seeds_text(narrowed)} compared on the benchmarks and budgets every run of the seed has "
                "(a run of theirs has NaN, or no value, at others)")
        note = f"{note}; {said}" if note else said
    chosen = {n: k for n, k in kept.items() if k is not None and any(k.values())}
    if chosen and not at_chance:
        said = "; ".join(
            f"{spec.stats[n].label or n} ({ds}): budgets {', '.join(map(str, _band(bs, spec.stats[n].band, spec.stats[n].fraction)))} "
            f"of the {len(bs)} above chance + {spec.stats[n].above_chance:g}"
            for n, k in chosen.items() for ds, bs in sorted(k.items()) if bs)
        note = f"{note}; {said}" if note else said
    return TestResult(test.kind, label, arms, test.stat, direction, {int(k): v for k, v in per_seed.items()},
                      len(values), mean, lo, hi, verdict, need, None, sd, p_value(values) if len(values) >= 2 else None,
                      None, listed, commands, note, _paper_numbers(test, stat) if stat is not None else "",
                      unit=getattr(stat or spec.stats.get(test.low or ""), "unit", ""))


def _bound(test: Test, by: dict, label: str, missing: list[str], commands: list[str]) -> TestResult:
    per_seed: dict = {}
    checked = violations = 0
    worst_left = worst_right = float("inf")
    seen: set[str] = set()  # a run serving two arms (one config under two names) is checked once
    for arm in test.arms:
        for seed, run in by.get(arm, {}).items():
            if run.run_id in seen:
                continue
            seen.add(run.run_id)
            for _step, vals in sorted(run.evals.items()):
                for key_any, key_fin, m in ((NAME_ANYTIME_ACC, NAME_FINAL_ACC, run.eval_budgets),
                                            (NAME_GRID_ANYTIME_ACC, NAME_FINAL_ACC, run.grid_budgets)):
                    # a budget-forced evaluation (`{ds}-forced`: s1 forcing, not monotone in the budget) is
                    # another kind of evaluation, as in every statistic (:func:`_key_values`): not checked
                    for ds in {k.split("/")[1] for k in vals if k.endswith("/" + key_any)}:
                        if ds.endswith(FORCED_SUFFIX):
                            continue
                        j_any, j = vals.get(eval_key(key_any, ds)), vals.get(eval_key(key_fin, ds))
                        if j_any is None or j is None or not m:
                            continue
                        # a side within rounding of 0 holds: J_anytime is logged as sum(acc) / m, which on a flat
                        # curve can be an ulp above J itself (from a hunt: 3/30 at 32 budgets "failed" claim 8)
                        left, right = j - j_any, j_any * m - j
                        left, right = (0.0 if abs(x) <= rounding(size) else x for x, size in ((left, j), (right, j_any * m)))
                        checked += 1
                        bad = left < 0 or right < 0
                        violations += bad
                        worst_left, worst_right = min(worst_left, left), min(worst_right, right)
                        entry = per_seed.setdefault(int(seed), {"checked": 0, "violations": 0})
                        entry["checked"] += 1
                        entry["violations"] += int(bad)
    if checked == 0:
        verdict, note = INCONCLUSIVE, "no evaluation with both the anytime and the final accuracy"
    else:
        verdict = HOLDS if violations == 0 else FAILS
        note = (f"{checked} evaluations checked, {violations} violate it; smallest J - J_anytime = {worst_left:+.4g}, "
                f"smallest J_anytime/P_m - J = {worst_right:+.4g}. A sanity check of the logged numbers, not evidence "
                "for the method: the right side holds for any non-negative reward; the left side holds when "
                "accuracy at the largest budget is at least its mean over the budgets")
    return TestResult("bound", label, list(test.arms), None, "greater", per_seed, checked,
                      float(violations) if checked else None, None, None, verdict, None, missing=missing,
                      commands=commands, note=note)


def _test_label(test: Test, spec: ClaimsSpec) -> str:
    st = spec.stats.get(test.stat) if test.stat else None
    what = (st.label or st.name) if st else ""
    if test.kind == "compare":
        op = ">" if test.direction == "greater" else "<"
        return f"{_label(test.a)} {op} {_label(test.b)}: {what}"
    if test.kind == "sign":
        op = "> 0" if test.direction == "greater" else "< 0"
        return f"{what} {op} ({', '.join(_label(a) for a in test.arms)})"
    if test.kind == "converge":
        lo, hi = spec.stats[test.low], spec.stats[test.high]
        return (f"lead of {_label(test.a)} over {', '.join(_label(a) for a in test.arms)}: {lo.label or lo.name} "
                f"> {hi.label or hi.name}")
    return f"J_anytime <= J <= J_anytime / P_m at every evaluation ({len(test.arms)} arms)"


def precondition_result(test: Test, spec: ClaimsSpec, runs: list[RunView]) -> TestResult:
    """A precondition on the runs' first evaluation (the start of training): ``stat`` must be on the claimed
    side of 0 (a measured fact of the task, not a hypothesis). Where the seeds measured it independently
    (their numbers differ), their mean's 95% t-interval decides: on the claimed side it holds, on the other
    side it fails, across 0 it is not established (INCONCLUSIVE; the claim is not testable here either way).
    Where there is one measurement (one seed, or every seed the same number: one shared warm-up evaluated on
    the same problems), its value decides, and the note says so. Seeds whose first evaluation lacks it are
    named, and so are seeds a run of which first evaluated after training began (``first_step`` > 0: verl
    with ``verl.val_before_train=false``): a trained model's number is not the start's, so they are
    unmeasured, with the step and the setting that evaluates at step 0 (from a hunt: claim 7's precondition
    was read at step 20 and labelled the start of training)."""
    from arctl.config.ranges import seeds_text

    stat = spec.stats[test.stat]
    by = _by_arm_seed(runs)
    per_seed = {}  # as a sign test: the mean over every listed arm, on the seeds all of them have
    unmeasured = []
    late: dict[int, list[int]] = {}  # the step of a first evaluation after training began -> its seeds
    for s in sorted(set.intersection(*(set(by.get(a, {})) for a in test.arms))):
        steps = [by[a][s].first_step for a in test.arms]
        if any(step for step in steps):  # (None: no evaluation, 0: the start)
            late.setdefault(max(step or 0 for step in steps), []).append(int(s))
            continue
        vals, _ = paired_stats(stat, [by[a][s].first for a in test.arms])
        if all(np.isfinite(vals)):
            per_seed[int(s)] = {"value": float(np.mean(vals))}
        else:
            unmeasured.append(int(s))
    values = [v["value"] for v in per_seed.values()]
    mean = float(np.mean(values)) if values else None
    sign = 1 if test.direction == "greater" else -1
    verdict = INCONCLUSIVE if mean is None else (HOLDS if sign * mean > 0 else FAILS)
    label = "at the start of training: " + _test_label(test, spec)
    lacking = [a for a in test.arms if a not in by]
    at = (f"at step {next(iter(late))}" if len(late) == 1 else
          "at " + "; ".join(f"step {step} (seed(s) {seeds_text(seeds)})" for step, seeds in sorted(late.items())))
    started = "" if not late else (f"seed(s) {seeds_text(sorted(sum(late.values(), [])))} left out: their first "
                                   f"evaluation is {at}, after training began, not at its start ({START_EVALUATION})")
    note = (f"runs missing: {', '.join(lacking)}" if lacking else started or "no run logged it at its first evaluation") \
        if mean is None else f"measured {mean:+.4g} over {len(values)} seed(s)"
    low = high = None
    if len(values) == 1:
        note += " (one seed: one measurement)"
    elif len(values) > 1 and len(set(values)) == 1:  # e.g. step 0 of one shared warm-up on the same problems
        note += " (the same number on every seed: one measurement, not independent ones)"
    elif len(values) > 1:
        _, half, _ = mean_ci95(np.asarray(values))
        low, high = mean - float(half), mean + float(half)
        note += f", 95% interval [{low:+.4g}, {high:+.4g}]"
        claimed, other = (low, -high) if sign > 0 else (-high, low)  # > 0: the interval is beyond 0 on that side
        verdict = HOLDS if claimed > 0 else FAILS if other > 0 else INCONCLUSIVE
        if verdict == INCONCLUSIVE:
            note += ": not established (the interval reaches 0)"
    if unmeasured:
        note += f"; seed(s) {seeds_text(unmeasured)} left out (no finite value at the first evaluation)"
    if late and (mean is not None or lacking):
        note += f"; {started}"
    return TestResult("precondition", label, list(test.arms), test.stat, test.direction, per_seed, len(values),
                      mean, low, high, verdict, note=note, unit=stat.unit)


def check_claims(spec: ClaimsSpec, runs: list[RunView], missing_command) -> list[ClaimResult]:
    """Every claim: its preconditions (one that fails makes the claim *not testable here*, and its
    tests are still shown), its tests, Holm's correction within it, the claim's verdict."""
    out = []
    for claim in spec.claims:
        pre = [precondition_result(t, spec, runs) for t in claim.preconditions]
        tests = [evaluate_test(t, spec, runs, missing_command) for t in claim.tests]
        correct_within_claim(tests)
        # a precondition that fails, or that no run measured while the tests have runs: not testable here
        # (an unchecked precondition is not a passed one)
        measured = any(t.n for t in tests)
        failed = [p for p in pre if p.verdict != HOLDS and (p.mean is not None or measured)]
        verdict = NOT_TESTABLE if failed else claim_verdict(tests)
        said = {FAILS: "fails", INCONCLUSIVE: "is not established"}
        if failed:
            for t in tests:
                t.note = ("not testable here (precondition " + "; ".join(
                    f"{p.label} {said[p.verdict] if p.mean is not None else 'cannot be checked'}: {p.note}"
                    for p in failed)
                          + ")" + (f"; {t.note}" if t.note else ""))
        out.append(ClaimResult(claim.id, claim.title, claim.paper, verdict, pre + tests))
    _mark_repeated_evidence(out, runs)
    return out


def arm_configs(runs: list[RunView]) -> dict[str, tuple[str, ...]]:
    """Arm → the configs its runs compute (their ``compute_key``s, names aside): two arms with the same are one
    config under two names (AR-base and GRPO+BRPO+decoupled); an arm with a run without config columns has none."""
    keys: dict[str, set] = {}
    for r in runs:
        keys.setdefault(r.arm, set()).add(r.compute_key)
    return {arm: tuple(sorted(map(str, ks))) for arm, ks in keys.items() if None not in ks}


def _mark_repeated_evidence(results: list[ClaimResult], runs: list[RunView]) -> None:
    """A compare test whose two arms are the same configs as an earlier test's (e.g. AR-base and
    GRPO+BRPO+decoupled: one config under two names), on the same statistic, is the same evidence:
    it keeps its verdict and says whose evidence it repeats (``same_as``), so it is counted once."""
    arm_key = arm_configs(runs)
    seen: dict[tuple, tuple[str, TestResult]] = {}
    for result in results:
        for t in result.tests:
            if t.kind != "compare" or len(t.arms) != 2 or any(a not in arm_key for a in t.arms):
                continue
            sig = (arm_key[t.arms[0]], arm_key[t.arms[1]], t.stat, t.direction)
            # "b < a" is the test "a > b" written the other way round (the same differences, negated)
            flipped = (arm_key[t.arms[1]], arm_key[t.arms[0]], t.stat, "less" if t.direction == "greater" else "greater")
            sig = min(sig, flipped)
            if sig in seen:
                name, first = seen[sig]
                t.same_as = name
                # its own claim may judge it at another Holm level: the earlier verdict is said beside it
                there = f"{first.verdict}" + (f", Holm-adjusted p = {first.p_holm:.3g}" if first.p_holm is not None else "")
                t.note = (f"the same evidence as claim {name} (the same configs under other arm names; {there} there): "
                          "counted once" + (f"; {t.note}" if t.note else ""))
            else:
                seen[sig] = (f"{result.id}: {t.label}", t)


def repeated_claims(results: list[ClaimResult]) -> dict[str, list[str]]:
    """Claim id -> the earlier claims whose evidence each of its tests repeats (every test marked
    ``same_as``): its verdict is no independent piece of evidence, and a summary says so."""
    out: dict[str, list[str]] = {}
    for r in results:
        tests = [t for t in r.tests if t.kind not in ("bound", "precondition")]
        if tests and all(t.same_as for t in tests):
            out[r.id] = sorted({str(t.same_as).split(":", 1)[0] for t in tests})
    return out


# ---------------------------------------------------------------------------------------------
# runs from a workspace
def _count(value) -> int | None:
    """The length of a config list (a list, or its text form from a W&B config: :func:`arctl.report.data.config_list`)."""
    from arctl.report.data import config_list

    found = config_list(value)
    return None if found is None else len(found)


def diagnostics_at_eval_budgets(final: dict, rows, n_eval: int | None) -> tuple[dict, tuple[int, int | None] | None]:
    """``final`` with the variance diagnostics (``eval/{ds}/corr_*@{b}``, ``nvar/*@{b}``) of the run's last evaluation
    at ``eval.budgets`` where its last evaluation logged them at more budgets than ``n_eval`` (len eval.budgets): the
    tiny backend's final evaluation computed them over its 32-budget grid until 2026-12-05, another estimator under
    the same keys (the prior, V1's earlier budgets and BRPO's mixing follow the budget set; from a hunt, claim 7's
    tests read it while its precondition read the first evaluation's); ``rows``: the run's diagnostic rows (step,
    metric, value, budget). Returns it and (that last step, the step read instead, None where none) or None where
    nothing was replaced."""
    if rows is None or not len(rows) or not n_eval:
        return final, None
    counts = rows.groupby("step")["budget"].nunique()
    last = int(counts.index.max())
    if counts[last] <= n_eval:
        return final, None
    earlier = [int(s) for s, n in counts.items() if s < last and n <= n_eval]
    kept = {k: v for k, v in final.items() if k not in set(rows["metric"])}
    if not earlier:
        return kept, (last, None)
    at = rows[rows["step"] == max(earlier)]
    kept.update(zip(at["metric"], at["value"]))
    return kept, (last, max(earlier))


def _grid_diagnostics_warning(replaced: dict[str, tuple[int, int | None]]) -> str:
    rid, (last, step) = next(iter(sorted(replaced.items())))
    read = f"those of their last evaluation at eval.budgets (step {step} of {rid})" if step is not None else \
        "none of them (no evaluation at eval.budgets)"
    return (f"{len(replaced)} run(s) logged their last evaluation's variance diagnostics (corr_v*, nvar/*) over more "
            f"budgets than eval.budgets (a grid: a verl eval-only run's, or a tiny run's final evaluation, arctl until "
            f"2026-12-05: another estimator than every other evaluation's and the paper's; e.g. {rid} at step "
            f"{last}): the claims read {read} instead")


def run_views(history, runs_table, scale: str | None = None, compose=None,
              warnings: list[str] | None = None) -> list[RunView]:
    """:class:`RunView` per finished run of a :class:`arctl.track.runs.Runs` (``history``, ``runs``),
    keeping only runs of ``scale`` (config ``scale``) when given. A run that has not finished
    (:func:`unfinished`: running, failed, killed) is left out: its last values are an earlier
    evaluation's, not the final one's."""
    meta = {}
    if len(runs_table):
        for rec in runs_table.to_dict("records"):
            if _finished(rec):
                meta[str(rec["run_id"])] = rec
    if not len(history):
        return []
    h = history[["run_id", "step", "metric", "value"]].copy()
    h["run_id"] = h["run_id"].astype(str)
    h["metric"] = h["metric"].astype(str)
    h = h.sort_values(["run_id", "step"], kind="stable")
    last = h.drop_duplicates(["run_id", "metric"], keep="last")
    finals = {rid: dict(zip(g["metric"], g["value"])) for rid, g in last.groupby("run_id", sort=False)}
    # the start of training: every evaluation metric of the run's first evaluation step (not each
    # metric's first value: the final grid's budgets are logged only at the last step)
    ev = h[h["metric"].str.startswith("eval/")]
    first_steps = ev.groupby("run_id")["step"].min()
    head = ev[ev["step"] == ev["run_id"].map(first_steps)]
    firsts = {rid: dict(zip(g["metric"], g["value"])) for rid, g in head.groupby("run_id", sort=False)}
    first_steps = {str(rid): int(step) for rid, step in first_steps.items()}
    names = ev["metric"].str.extract(r"^eval/[^/]+/(?P<name>.+?)@(?P<b>\d+)$")
    diag = ev[names["name"].str.startswith((CORR_PREFIX, NVAR_PREFIX), na=False)].assign(budget=names["b"])
    diag_rows = dict(tuple(diag.groupby("run_id", sort=False)))
    replaced: dict[str, tuple[int, int | None]] = {}
    acc = h[h["metric"].str.endswith(tuple(f"/{n}" for n in (NAME_ANYTIME_ACC, NAME_FINAL_ACC, NAME_GRID_ANYTIME_ACC)))]
    evals: dict[str, dict] = {}
    for rid, step, metric, value in zip(acc["run_id"], acc["step"], acc["metric"], acc["value"]):
        evals.setdefault(rid, {}).setdefault(int(step), {})[metric] = float(value)
    out = []
    stale: dict[tuple, list[str]] = {}  # (experiment, arm, keys) -> the runs whose shared.json names that cell wrongly
    for rid, final in finals.items():
        rec = meta.get(rid)
        if rec is None or not _of_scale(rec, scale):
            continue
        seed = rec.get("seed")
        if seed is None or (isinstance(seed, float) and math.isnan(seed)):
            continue

        n_eval = _count(rec.get("config.eval.budgets"))
        final, swapped = diagnostics_at_eval_budgets(final, diag_rows.get(rid), n_eval)
        if swapped:
            replaced[rid] = swapped
        view = RunView(rid, str(rec.get("experiment", "")), str(rec.get("arm", "")), int(seed), final,
                       evals.get(rid, {}), n_eval,
                       _count(rec.get("config.eval.grid")), firsts.get(rid, {}), _compute_key(rec),
                       computed_items(rec), first_steps.get(rid))
        out.append(view)
        # a run shared with an arm of another name (the same config: AR-base is GRPO+BRPO+decoupled)
        # is that arm's run too, where that cell as composed now (``compose``, :func:`arctl.report.cells.
        # cell_composer`) is the run's own: a stale or edited shared.json is said, not read (from a review)
        arms = {view.arm}
        for experiment, arm in _served_cells(rec.get("serves")):
            if arm in arms:
                continue
            if compose is not None and (differ := _not_shared(rec, view, experiment, arm, compose)):
                stale.setdefault((experiment, arm, tuple(differ)), []).append(rid)
                continue
            arms.add(arm)
            out.append(replace(view, experiment=experiment, arm=arm))
    if warnings is not None:
        warnings.extend(_stale_shared_warning(cell, keys, ids) for (*cell, keys), ids in sorted(stale.items()))
        if replaced:
            warnings.append(_grid_diagnostics_warning(replaced))
    return out


def _not_shared(rec: dict, view: RunView, experiment: str, arm: str, compose) -> list[str]:
    """The keys that keep the runs-table row ``rec`` (of ``view``'s cell) from being read as the run of the
    cell ``experiment``/``arm`` its shared.json names ([] where it is): those where it differs from that
    cell as composed other than as it differs from its own cell. A run launched with an override (``arctl
    sweep paper`` with micro overrides) differs from both cells in it and is read as both, as the report
    reads every run that differs from its cell (:func:`arctl.report.cells.one_run_per_cell`: a warning
    names it); one whose own cell no longer composes as the other (an arm redefined since, an edited
    shared.json) is not that cell's run (from a hunt: 33 runs of the first kind were each said and left
    out, and claim 6 had no seed of grpo-vr-decouple)."""
    scale = run_scale(rec)
    served = compose(experiment, arm, view.seed, scale)
    differ = differs_from_cell(rec, served)
    if not differ:
        return differ
    own = compose(view.experiment, view.arm, view.seed, scale)
    if own is None:  # its own cell no longer composes: nothing says the two are one config
        return differ
    overridden = set(differs_from_cell(rec, own))
    return [k for k in differ if k not in overridden or not same_value(own.get(k), served.get(k))]


def _stale_shared_warning(cell: list[str], keys: tuple[str, ...], ids: list[str]) -> str:
    """One line for the runs whose shared.json names ``cell`` but that differ from it in ``keys`` (not read
    as its runs): the count and the first few ids, as :func:`arctl.report.cells.one_run_per_cell` says
    the runs that differ from their own cell (from a hunt: a line per run, 33 of them)."""
    experiment, arm = cell
    where = f"{', '.join(keys[:3])}{' and more' if len(keys) > 3 else ''}"
    if len(ids) == 1:
        return (f"run {ids[0]}: its shared.json says it serves {experiment}/{arm}, but its config differs from that "
                f"cell's in {where}: not read as that arm's run (run `arctl sweep` to train the cell)")
    return (f"{len(ids)} runs ({listed(ids, 4)}): their shared.json says they serve {experiment}/{arm}, but their "
            f"config differs from that cell's in {where}: not read as that arm's runs (run `arctl sweep` to train "
            "the cell)")



def _served_cells(text) -> list[tuple[str, str]]:
    """The runs table's ``serves`` ([[experiment, arm], ...] as JSON; "" or NaN for none)."""
    if not isinstance(text, str) or not text:
        return []
    try:
        cells = json.loads(text)
    except ValueError:
        return []
    return [(str(c[0]), str(c[1])) for c in cells if isinstance(c, list) and len(c) == 2]


# the axes (x, y) of what :func:`arm_curves` gives: the training curve is ``anytime_acc``, the mean over the run's
# eval.budgets, not the claims' ``grid_anytime_acc`` over the final grid (from a hunt: both read "anytime accuracy")
CURVE_AXES = {"budget": ("thinking budget (tokens)", f"accuracy at the final evaluation ({NAME_ACC}@budget)"),
              "train": ("training step", f"anytime accuracy (mean over eval.budgets: {NAME_ANYTIME_ACC})")}


def arm_curves(views: list[RunView]) -> dict[str, dict]:
    """What the report draws beside the claims, per arm and seed: ``budget`` {budget: accuracy} of the
    final evaluation and ``train`` {step: anytime accuracy over eval.budgets} of every evaluation (:data:`CURVE_AXES`),
    each the mean over the run's plain evaluation datasets (the budget-forced ``-forced`` ones are another
    evaluation). An arm whose runs are the same config as an earlier arm's (:func:`arm_configs`: AR-base and
    GRPO+BRPO+decoupled) says so, ``same_config_as`` that arm: one config, drawn once."""

    def by(items, name: str) -> dict[int, float]:
        groups: dict[int, list[float]] = {}
        for metric, value in items:
            key = parse_metric(str(metric))
            if (key is None or key.namespace != "eval" or key.name != name or key.dataset.endswith(FORCED_SUFFIX)
                    or value is None or not math.isfinite(float(value))):
                continue
            groups.setdefault(key.budget if key.budget is not None else 0, []).append(float(value))
        return {k: float(np.mean(v)) for k, v in sorted(groups.items())}

    out: dict[str, dict] = {}
    for v in sorted(views, key=lambda v: (v.arm, v.seed)):
        arm = out.setdefault(v.arm, {"budget": {}, "train": {}})
        arm["budget"][int(v.seed)] = by(v.final.items(), NAME_ACC)
        train = {int(step): by(metrics.items(), NAME_ANYTIME_ACC).get(0) for step, metrics in sorted(v.evals.items())}
        arm["train"][int(v.seed)] = {s: a for s, a in train.items() if a is not None}
    first: dict[tuple, str] = {}
    for name, config in sorted(arm_configs(views).items()):  # the first name in the curves' order is drawn
        if (drawn := first.setdefault(config, name)) != name:
            out[name]["same_config_as"] = drawn
    return out

"""Metric names: the contract between trainers (writers) and reports (readers).

Every key a trainer logs to W&B is built here, and every key a report reads is parsed here, so the
two sides cannot drift apart. The step key of all metrics is :data:`STEP_KEY`
(``define_metric("*", step_metric=STEP_KEY)``). Budgets are integer token counts inside the key
(``train/score@8000``). The full list with meanings is in docs/metrics.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from arctl.algo import settings

STEP_KEY = "trainer/global_step"
CONFIG_PREFIX = "config."
"""The runs table's columns of a run's flattened config (``config.eval.budgets``; arctl.track.runs.tidy)."""
WANDB_STEP_KEY = "_step"
"""W&B's own step counter (arctl logs it equal to :data:`STEP_KEY`); the fallback step of a run
that logged no :data:`STEP_KEY`, and the metric of a fragment's ``resume_from`` branch point."""

# training metrics (one value per policy step)
TRAIN_THINK_LEN_MEAN = "train/think_len/mean"
TRAIN_ANYTIME_SCORE = "train/anytime_score"
TRAIN_FINAL_SCORE = "train/final_score"
TRAIN_REWARD_MEAN = "train/reward/mean"
TRAIN_LOSS = "train/loss"
TRAIN_ENTROPY = "train/entropy"
PERF_STEP_TIME_S = "perf/step_time_s"
PERF_STEP_CPU_S = "perf/step_cpu_s"
PERF_SUMMARY_CACHED_TOKENS = "perf/summary_cached_tokens"
"""Mean prompt tokens served from vLLM's prefix cache per summary request (verl backend)."""
PERF_SUMMARY_CACHE_HIT = "perf/summary_prefix_cache_hit"
"""Fraction of the summary requests' prompt tokens served from the prefix cache (verl backend)."""

ADV_VAR_KINDS = settings.ADV_VAR_BASELINES
"""Advantage-variance estimators logged as ``train/adv_var/{kind}``."""
CORR_KINDS = settings.CORR_BASELINES
"""Baselines whose correlation with the return R is logged as ``eval/{ds}/corr_{kind}@{b}``."""
NVAR_KINDS = tuple(settings.NVAR_BASELINES)
"""Normalised-variance estimators logged as ``eval/{ds}/nvar/{kind}@{b}``."""

# names of the evaluation metrics: ``eval/{ds}/{name}`` or ``eval/{ds}/{name}@{b}``
# (:attr:`MetricKey.name` of a parsed key)
NAME_ACC = "acc"
NAME_ANYTIME_ACC = "anytime_acc"
NAME_GRID_ANYTIME_ACC = "grid_anytime_acc"
NAME_FINAL_ACC = "final_acc"
NAME_THINK_LEN = "think_len"
NAME_CHANCE_ACC = "chance_acc"
NAME_CURVE_AUC = "curve_auc"
ACC_AT_FRAC_PREFIX = "acc_at_frac/"
"""Prefix of the accuracy-at-a-fraction names ``acc_at_frac/{pct}`` (:func:`acc_at_frac_name`)."""
CORR_PREFIX = "corr_"
"""Prefix of the correlation names ``corr_{kind}`` (:func:`corr_name`)."""
NVAR_PREFIX = "nvar/"
"""Prefix of the normalised-variance names ``nvar/{kind}`` (:func:`nvar_name`)."""
ADV_VAR_PREFIX = "adv_var/"
"""Prefix of the advantage-variance names ``adv_var/{kind}`` (:func:`train_adv_var`)."""

_DATASET_RE = re.compile(r"^[A-Za-z0-9_.\-]+\Z")  # \Z: $ also matches before a trailing newline


def _budget(budget: int) -> int:
    if isinstance(budget, bool) or int(budget) != budget or int(budget) < 0:
        raise ValueError(f"budget must be a non-negative integer token count, got {budget!r}")
    return int(budget)


def _dataset(dataset: str) -> str:
    if not isinstance(dataset, str) or not _DATASET_RE.match(dataset):
        raise ValueError(
            f"dataset name {dataset!r} is not usable in a metric key: use letters, digits, '_', '-', '.'"
        )
    return dataset


def _kind(kind: str, allowed: tuple[str, ...], what: str) -> str:
    if kind not in allowed:
        raise ValueError(f"unknown {what} kind {kind!r}; expected one of {', '.join(allowed)}")
    return kind


def corr_name(kind: str) -> str:
    """Name of the correlation of baseline ``kind`` (one of :data:`CORR_KINDS`): ``corr_{kind}``."""
    return f"{CORR_PREFIX}{_kind(kind, CORR_KINDS, 'correlation')}"


def nvar_name(kind: str) -> str:
    """Name of the normalised variance of estimator ``kind`` (one of :data:`NVAR_KINDS`): ``nvar/{kind}``."""
    return f"{NVAR_PREFIX}{_kind(kind, NVAR_KINDS, 'normalised-variance')}"


FORCED_SUFFIX = "-forced"
"""Suffix of the dataset name under which an evaluation with s1 budget forcing is logged
(``eval/toy-forced/acc@16``; ``budget_control.forcing_extensions > 0``)."""


def forced_dataset(dataset: str) -> str:
    """The dataset name of ``dataset`` evaluated with budget forcing."""
    return _dataset(dataset) + FORCED_SUFFIX


TRAIN_METHOD_ANYTIME_SCORE = "train/method/anytime_score"
"""Under a compared method that shapes rewards (ThinkPrune, L1): the anytime score of the method's
rewards, which its advantages see (``train/anytime_score`` stays the verifier's)."""
TRAIN_METHOD_FINAL_SCORE = "train/method/final_score"
"""The same at the largest budget."""

TRAIN_THINK_LIMIT = "train/think_limit"
"""ThinkPrune's thinking limit in force at the step (``budget_control.method=thinkprune``)."""

TRAIN_KL = "train/kl"
"""With ``optim.kl_coef > 0``: the mean per-token KL estimate (``optim.kl_type``) of the policy that
sampled the step against the reference model, over the trained tokens (``arctl.algo.tree_loss.kl_mean``)."""
TRAIN_KL_LOSS = "train/kl_loss"
"""With ``optim.kl_coef > 0``: the KL term added to the loss (``arctl.algo.tree_loss.kl_loss``; verl logs
its own ``actor/kl_loss``, before the coefficient and the constant)."""

ACC_FRACTIONS = (0.25, 0.5)  # eval/{ds}/acc_at_frac/{pct} is logged at these fractions of the curve's largest budget


def frac_pct(fraction: float) -> int:
    """``fraction`` of the largest budget as the whole percent a key holds (0.25 -> 25): a number in
    (0, 1] that is a whole percent, else ValueError (two fractions must never share a key)."""
    ok = not isinstance(fraction, bool) and isinstance(fraction, (int, float)) and math.isfinite(fraction)
    pct = round(fraction * 100) if ok else 0
    if not ok or not 0 < fraction <= 1 or abs(fraction * 100 - pct) > 1e-9:
        raise ValueError(f"fraction must be a whole percent in (0, 1] (0.25, 0.5, 1, ...), got {fraction!r}")
    return pct


def acc_at_frac_name(fraction: float) -> str:
    """Name of the accuracy at ``fraction`` of the largest budget: ``acc_at_frac/{pct}``."""
    return f"{ACC_AT_FRAC_PREFIX}{frac_pct(fraction)}"


def eval_key(name: str, dataset: str = "*", budget: object = None) -> str:
    """``eval/{dataset}/{name}`` (``@{budget}`` appended unless ``budget`` is None), unchecked: with
    the default ``*`` (and ``budget="*"``) a glob such as ``eval/*/acc@*``, with ``"{dataset}"`` a
    report template such as ``eval/{dataset}/anytime_acc``. Keys to log come from the checked
    builders below (:func:`eval_acc`, ...)."""
    key = f"eval/{dataset}/{name}"
    return key if budget is None else f"{key}@{budget}"


def train_score(budget: int) -> str:
    """Mean training score at thinking budget ``budget``: ``train/score@{budget}``."""
    return f"train/score@{_budget(budget)}"


def train_method_score(budget: int) -> str:
    """Mean of a compared method's shaped rewards at ``budget``: ``train/method/score@{budget}``."""
    return f"train/method/score@{_budget(budget)}"


def train_adv_var(kind: str) -> str:
    """Variance of the advantage estimate under baseline ``kind``: ``train/adv_var/{kind}``."""
    return f"train/{ADV_VAR_PREFIX}{_kind(kind, ADV_VAR_KINDS, 'advantage-variance')}"


def eval_acc(dataset: str, budget: int) -> str:
    """Evaluation accuracy of ``dataset`` at thinking budget ``budget``: ``eval/{ds}/acc@{b}``."""
    return f"eval/{_dataset(dataset)}/{NAME_ACC}@{_budget(budget)}"


def eval_anytime_acc(dataset: str) -> str:
    """Anytime accuracy (mean accuracy over the eval budgets, eq. 1 with the eval prior)."""
    return f"eval/{_dataset(dataset)}/{NAME_ANYTIME_ACC}"


def eval_grid_anytime_acc(dataset: str) -> str:
    """Anytime accuracy over the final-evaluation grid ``eval.grid`` (paper Table 2: 32 budgets every
    250 tokens), logged only by an evaluation that covered the whole grid."""
    return f"eval/{_dataset(dataset)}/{NAME_GRID_ANYTIME_ACC}"


def eval_curve_auc(dataset: str) -> str:
    """Area under the accuracy-vs-budget curve over ``[0, b_m]`` divided by ``b_m``
    (:func:`arctl.algo.methods.curve.curve_auc`): ``eval/{ds}/curve_auc``."""
    return f"eval/{_dataset(dataset)}/{NAME_CURVE_AUC}"


def eval_acc_at_frac(dataset: str, fraction: float) -> str:
    """Accuracy at ``fraction`` of the largest budget (:func:`arctl.algo.methods.curve.accuracy_at_fraction`),
    as a whole percent: ``eval/{ds}/acc_at_frac/{pct}`` (0.5 -> ``acc_at_frac/50``)."""
    return f"eval/{_dataset(dataset)}/{acc_at_frac_name(fraction)}"


def anytime_eval_metrics(
    dataset: str, acc_by_budget: dict[int, float], eval_budgets, grid, acc_fractions=ACC_FRACTIONS
) -> dict[str, float]:
    """The summary keys of one evaluation, from its accuracy per evaluated budget.

    ``anytime_acc``: mean accuracy over ``eval_budgets`` (the training-curve metric, paper Sec. 4.2:
    budgets {2000, ..., 8000}); over every evaluated budget if none of them was evaluated; not logged
    when only some were (a mean over part of them would be another number under the same key).
    ``grid_anytime_acc``: mean over ``grid``, only when every grid budget was evaluated.
    ``final_acc``: accuracy at the largest evaluated budget.
    ``curve_auc`` and ``acc_at_frac/{pct}`` (one per fraction of ``acc_fractions``, :data:`ACC_FRACTIONS`): the score curve
    over ``grid`` (``eval_budgets`` when there is no grid), only when every budget of it was
    evaluated, so each key has one meaning at every step.
    """
    from arctl.algo.methods.curve import accuracy_at_fraction, curve_auc  # torch: only when logging

    if not acc_by_budget:
        return {}
    wanted = [int(b) for b in eval_budgets or ()]
    present = [b for b in wanted if b in acc_by_budget]
    out = {eval_final_acc(dataset): acc_by_budget[max(acc_by_budget)]}
    if len(present) in (0, len(wanted)):  # every eval budget, or none of them: then every evaluated budget
        chosen = present or sorted(acc_by_budget)
        out[eval_anytime_acc(dataset)] = sum(acc_by_budget[b] for b in chosen) / len(chosen)
    grid = [int(b) for b in grid or ()]
    if grid and all(b in acc_by_budget for b in grid):
        out[eval_grid_anytime_acc(dataset)] = sum(acc_by_budget[b] for b in grid) / len(grid)
    curve = grid or [int(b) for b in eval_budgets or ()]
    if curve and all(b in acc_by_budget for b in curve):
        acc = [acc_by_budget[b] for b in curve]
        out[eval_curve_auc(dataset)] = float(curve_auc(acc, curve))
        for f in acc_fractions or ():
            out[eval_acc_at_frac(dataset, f)] = float(accuracy_at_fraction(acc, curve, f))
    return out


def eval_final_acc(dataset: str) -> str:
    """Final accuracy: accuracy at the maximum budget."""
    return f"eval/{_dataset(dataset)}/{NAME_FINAL_ACC}"


def eval_think_len(dataset: str) -> str:
    """Average thinking length under the maximum budget."""
    return f"eval/{_dataset(dataset)}/{NAME_THINK_LEN}"


def eval_chance_acc(dataset: str) -> str:
    """The accuracy of a uniform guess over the dataset's answer space (a property of the task, logged
    where it is not ~0: a budget at which a run is not above it taught nothing; the claims' ``band``
    statistics with ``above_chance`` leave such budgets out). Absent: 0 (open-ended answers)."""
    return f"eval/{_dataset(dataset)}/{NAME_CHANCE_ACC}"


def eval_corr(kind: str, dataset: str, budget: int) -> str:
    """Correlation coefficient of baseline V1 or V2 with the return R(x, z, j_t) at ``budget``."""
    return f"eval/{_dataset(dataset)}/{corr_name(kind)}@{_budget(budget)}"


def eval_nvar(kind: str, dataset: str, budget: int) -> str:
    """Normalised variance of the advantage under estimator ``kind`` (BRPO/GRPO/V1) at ``budget``."""
    return f"eval/{_dataset(dataset)}/{nvar_name(kind)}@{_budget(budget)}"


def train_metrics(stats) -> dict[str, float]:
    """The ``train/...`` keys of one step from :class:`arctl.algo.tree_loss.BatchStats` (both
    backends log exactly these; loss, entropy and timings are added by the trainer)."""
    out = {train_score(b): float(v) for b, v in zip(stats.budgets, stats.score)}
    out[TRAIN_THINK_LEN_MEAN] = float(stats.think_len_mean)
    out[TRAIN_ANYTIME_SCORE] = float(stats.anytime_score)
    out[TRAIN_FINAL_SCORE] = float(stats.final_score)
    out[TRAIN_REWARD_MEAN] = float(stats.reward_mean)
    if stats.method_score is not None:  # a compared method shaped the rewards: its scores beside the verifier's
        out.update({train_method_score(b): float(v) for b, v in zip(stats.budgets, stats.method_score)})
        out[TRAIN_METHOD_ANYTIME_SCORE] = float(stats.method_anytime_score)
        out[TRAIN_METHOD_FINAL_SCORE] = float(stats.method_final_score)
    for kind in ADV_VAR_KINDS:
        out[train_adv_var(kind)] = float(stats.adv_var[kind])
    return out


def eval_diagnostic_metrics(dataset: str, diag) -> dict[str, float]:
    """``eval/{ds}/corr_{v1,v2}@{b}`` and ``eval/{ds}/nvar/{kind}@{b}`` from
    :class:`arctl.algo.metrics.EvalDiagnostics` (both backends log exactly these)."""
    out: dict[str, float] = {}
    for j, b in enumerate(diag.budgets):
        for kind in CORR_KINDS:
            out[eval_corr(kind, dataset, b)] = float(diag.corr[kind][j])
        for kind in NVAR_KINDS:
            out[eval_nvar(kind, dataset, b)] = float(diag.nvar[kind][j])
    return out


@dataclass(frozen=True)
class MetricKey:
    """A parsed metric key: ``eval/aime24/acc@2000`` → (eval, aime24, acc, 2000)."""

    namespace: str  # "train" | "eval" | "perf" | "trainer"
    name: str  # e.g. "acc", "anytime_acc", "corr_v1", "nvar/brpo", "score", "adv_var/brpo"
    dataset: str | None = None
    budget: int | None = None


_EVAL_RE = re.compile(r"^eval/(?P<ds>[^/]+)/(?P<name>.+?)(?:@(?P<b>\d+))?$")
_OTHER_RE = re.compile(r"^(?P<ns>train|perf|trainer)/(?P<name>.+?)(?:@(?P<b>\d+))?$")


def parse_metric(key: str) -> MetricKey | None:
    """Split a schema key into its parts; ``None`` for keys outside the schema (e.g. ``_runtime``)."""
    m = _EVAL_RE.match(key)
    if m:
        b = m.group("b")
        return MetricKey("eval", m.group("name"), m.group("ds"), int(b) if b is not None else None)
    m = _OTHER_RE.match(key)
    if m:
        b = m.group("b")
        return MetricKey(m.group("ns"), m.group("name"), None, int(b) if b is not None else None)
    return None


def eval_datasets(keys) -> list[str]:
    """Eval dataset names that occur in ``keys``, in first-seen order."""
    seen: dict[str, None] = {}
    for k in keys:
        p = parse_metric(k)
        if p is not None and p.dataset is not None:
            seen.setdefault(p.dataset, None)
    return list(seen)


def budgets_of(keys, dataset: str, name: str) -> list[int]:
    """Sorted budgets b for which ``eval/{dataset}/{name}@{b}`` is among ``keys``."""
    out = set()
    for k in keys:
        p = parse_metric(k)
        if p is not None and p.dataset == dataset and p.name == name and p.budget is not None:
            out.add(p.budget)
    return sorted(out)


def nan_means_undefined(key: str) -> bool:
    """Whether a NaN logged under ``key`` means "undefined here", not a diverged run: the correlations
    and normalised variances of the evaluation (a constant column, a group of one) and the advantage
    variances (no reached segment). A NaN or an infinity under any other key is reported when the run
    is read (:func:`arctl.track.runs.stitch.nonfinite_notes`)."""
    m = parse_metric(key)
    return m is not None and (
        (m.namespace == "eval" and m.name.startswith((CORR_PREFIX, NVAR_PREFIX)))
        or (m.namespace == "train" and m.name.startswith(ADV_VAR_PREFIX)))

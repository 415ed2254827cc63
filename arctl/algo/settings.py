"""The objective's settings: the one home of every algorithm key's type, default, range and choices.

Each settings class is one section of the run config (its keys, or the algorithm's part of them):

=====================  ===========  ===========================================================
class                  section      fields
=====================  ===========  ===========================================================
:class:`Thinking`      ``thinking`` budgets, prior, probs, baseline, lam
:class:`Summary`       ``summary``  decoupled, prior, probs, weighting, group_size, max_tokens, inserted
:class:`Reward`        ``reward``   length_penalty, alpha
:class:`Loss`          ``optim``    clip_ratio, clip_ratio_high, dual_clip, loss_norm_len, kl_coef, kl_type
:class:`BudgetControl` ``budget_control``  method, thinkprune_limits, l1_*, forcing_* (the compared
                                   methods of ``arctl.algo.methods``; not part of :class:`Objective`)
=====================  ===========  ===========================================================

Each field carries its default and what validation checks (its range or choices,
:func:`arctl.algo.ranges.checks`). The run config's schema (``arctl/config/schema.py``, registered in
Hydra's ConfigStore) is built from these classes (``schema.from_settings``: the same fields, lists for
tuples, plus the section's keys that are not the algorithm's), so there is no second class to keep in
step; both backends build an :class:`Objective` from the resolved config
(:meth:`Objective.from_config`) and hand it to :mod:`arctl.algo.tree_loss`. The conventions behind
each setting are in ``docs/algorithm.md``.

This module imports no torch: the spec layer reads it while composing configs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arctl.algo.prompts import INSERTED_STYLES
from arctl.algo.ranges import PROB, TOKENS, F, I, checks

DEFAULT_BLOCK_SIZE = 128  # FlexAttention's block of a packed tree's mask (verl.block_size; arctl.algo.tree)


# ------------------------------------------------------------------------------ choice lists
def priors() -> tuple[str, ...]:
    """Budget priors p_B (and p'_B): the names registered in :mod:`arctl.algo.priors` beside their
    formulas (``base``, ``uniform``, ``linear``), then ``custom``."""
    from arctl.algo.priors import prior_names

    return prior_names()
BASELINES = ("brpo", "v1", "v2", "none")
"""Variance-reduction terms of the thinking advantage: ``arctl.algo.advantages.thinking_baseline``."""
LENGTH_PENALTIES = ("none", "v1", "v2")
"""Reward shapings of the length-penalty arms: ``arctl.algo.rewards.length_penalty``."""
KL_TYPES = ("low_var_kl", "kl", "mse", "abs")
"""Per-token estimators of KL(policy || reference) for ``optim.kl_coef`` (verl's ``kl_loss_type`` names):
``low_var_kl`` Schulman's k3 (L1's released scripts), ``kl`` k1, ``mse`` k2, ``abs`` |k1|;
``arctl.algo.tree_loss.kl_token_penalty``."""
SUMMARY_WEIGHTINGS = ("authors", "paper")
"""Weight of a decoupled summary's advantage: ``authors`` 1 (their ``compute_summary_advantage``),
``paper`` P'_j of its budget (paper Eq. 10 read literally)."""

def control_methods() -> tuple[str, ...]:
    """Training-time budget-control methods compared against (``budget_control.method``): the names
    registered in :mod:`arctl.algo.methods.registry` (built-ins ``none``: the arm's own objective,
    ``thinkprune``: 0 reward past the round's thinking limit, ``l1``: L1/LCPO, a target length in the
    prompt and the reward of Eq. 1 or 2; then installed packages' ``arctl.methods`` entry points).
    Elastic Reasoning needs no entry: it is GRPO at one thinking budget t with a solution budget s
    (``experiments/baselines-elastic.yaml``)."""
    from arctl.algo.methods.registry import method_names

    return method_names()
L1_MODES = ("exact", "max")
"""L1 reward forms: ``exact`` (L1-Exact, Eq. 1), ``max`` (L1-Max, Eq. 2)."""
L1_ALPHA = 0.0003
"""Length-penalty slope alpha of L1's Eqs. 1-2 (paper value)."""
L1_DELTA = 0.5
"""Offset delta of L1-Max (Eq. 2, paper value)."""
L1_TARGET_RANGE = (100, 4000)
"""(n_min, n_max) of L1's target-length sampling, both included (paper value)."""

# ------------------------------------------------------------------------------ diagnosed baselines
ADV_VAR_BASELINES = ("brpo", "v2", "v1")
"""Baselines (of :data:`BASELINES`) whose thinking-advantage variance every training step reports
(:func:`arctl.algo.tree_loss.batch_stats`)."""
CORR_BASELINES = ("v1", "v2")
"""Baselines (of :data:`BASELINES`) whose per-budget correlation with the return R the evaluation
diagnostics measure (:func:`arctl.algo.metrics.baseline_correlations`, paper Fig. 2 left)."""
NVAR_BASELINES = {"brpo": "brpo", "grpo": "v2", "v1": "v1"}
"""Advantage estimators whose normalised variance ``Var(R - V) / Var(R)`` the evaluation diagnostics
measure (:func:`arctl.algo.metrics.normalized_variances`, paper Fig. 2 right), each with its
baseline V of :data:`BASELINES` (GRPO's is the group mean V2)."""

# ------------------------------------------------------------------------------ constants
AUTHORS_NORM_SUMMARIES = 16
"""Summary branches in the authors' Dr. GRPO constant (4 budgets x 4 summaries, in every script)."""
AUTHORS_NORM_PAD = 128
"""FlexAttention block padding in the authors' constant."""


def authors_loss_norm_len(max_budget: int, summary_max_tokens: int) -> int:
    """The authors' ``max_response_length``, the per-tree token constant of their Dr. GRPO loss:
    ``b_m + 16 x summary_max_tokens + 128`` (10,176 at 8k and 18,176 at 16k with 128-token
    summaries, as in their 8k and 16k scripts), the same for every arm of an experiment."""
    return int(max_budget) + AUTHORS_NORM_SUMMARIES * int(summary_max_tokens) + AUTHORS_NORM_PAD


# ------------------------------------------------------------------------------ settings
def _setting(default: Any = dataclasses.MISSING, **check: Any) -> Any:
    """A setting: its default and what validation checks (:func:`arctl.algo.ranges.checks`)."""
    return field(default=default, metadata=checks(**check))


@dataclass(frozen=True)
class Thinking:
    """Config section ``thinking``: the budget support, the prior p_B and the BRPO baseline."""

    budgets: tuple[int, ...] = _setting(items=TOKENS)  # b_1 < ... < b_m (thinking tokens; the config: the scale's)
    prior: str = _setting("uniform", choices=priors)  # p_B (set by the `prior` config group)
    probs: tuple[float, ...] | None = _setting(None, items=PROB)  # P_j for prior=custom
    baseline: str = _setting("brpo", choices=BASELINES)  # brpo (V1 and V2) | v1 | v2 | none
    lam: float = _setting(0.5, range=F(0, 1, lo_open=True))  # lambda: V1's discount of earlier budgets (Eq. 7; the authors' 2^k weights)


@dataclass(frozen=True)
class Summary:
    """Config section ``summary``: how summaries are sampled and trained."""

    decoupled: bool = True  # train every budget's summaries (GRPO per prefix) vs the final one only
    prior: str = _setting("uniform", choices=priors)  # p'_B (weighs summaries under weighting=paper)
    probs: tuple[float, ...] | None = _setting(None, items=PROB)
    weighting: str = _setting("authors", choices=SUMMARY_WEIGHTINGS)  # authors (1) | paper (P'_j, Eq. 10)
    group_size: int = _setting(4, range=I(1, 1024))  # A: summaries sampled per budget
    max_tokens: int = _setting(128, range=I(1, 10**5))  # a summary branch's cap (inserted tokens included; the config: the scale's)
    inserted: str = _setting("anytime", choices=INSERTED_STYLES)  # anytime (the authors') | think_end (Elastic's E1)


@dataclass(frozen=True)
class Reward:
    """Config section ``reward``: the length-penalty shaping of the 0/1 verifier reward."""

    length_penalty: str = _setting("none", choices=LENGTH_PENALTIES)  # none | v1 | v2
    alpha: float = _setting(0.2, range=PROB)


@dataclass(frozen=True)
class Loss:
    """The loss keys of config section ``optim``: PPO clip, the Dr. GRPO constant, the KL term."""

    clip_ratio: float = _setting(0.2, range=F(0, 1, lo_open=True, hi_open=True))  # epsilon_low
    clip_ratio_high: float = _setting(0.2, range=F(0, 10, lo_open=True, hi_open=True))  # epsilon_high (> clip_ratio: DAPO)
    dual_clip: float | None = _setting(None, range=F(1, 10**6, lo_open=True, nullable=True))  # c > 1: dual-clip PPO on negative advantages; None: plain PPO clip
    # Dr. GRPO constant, tokens per tree; None: the authors' rule b_m + 16 x summary.max_tokens + 128 (authors_loss_norm_len)
    loss_norm_len: int | None = _setting(None, range=I(1, 10**8, nullable=True))
    # KL to the reference model (the weights RL started from), summed over trained tokens and divided by the
    # same constant as the policy loss; 0: no reference model at all (every arm but L1's and Elastic's, as their scripts)
    kl_coef: float = _setting(0.0, range=F(0, 10))
    kl_type: str = _setting("low_var_kl", choices=KL_TYPES)  # the per-token estimator (KL_TYPES)


@dataclass(frozen=True)
class BudgetControl:
    """Config section ``budget_control``: the compared budget-control methods (docs/baselines.md).

    Inactive (:meth:`active` false: ``method=none`` and no budget forcing) it changes nothing a run
    computes, so it does not enter the run's identity (``arctl.launch.run_id``): the scales may set
    its values (the backends' scale profiles, ``arctl/backends/*/conf/scale/*.yaml``) without renaming existing runs."""

    method: str = _setting("none", choices=control_methods)  # none | thinkprune | l1 | a plugin's
    thinkprune_limits: tuple[int, ...] = _setting((4000, 3000, 2000), items=TOKENS)  # ThinkPrune's rounds (1.5B), equal shares of training
    # k: the whole run is round k of thinkprune_limits (the paper's rounds as runs, each from the previous
    # one's weights: trainer.init_from); None: every round in one run, equal shares of its steps
    thinkprune_round: int | None = _setting(None, range=I(1, 1000, nullable=True))
    l1_mode: str = _setting("max", choices=L1_MODES)  # exact (Eq. 1) | max (Eq. 2)
    l1_alpha: float = _setting(L1_ALPHA, range=F(0, 10))
    l1_delta: float = _setting(L1_DELTA, range=PROB)
    l1_targets: tuple[int, ...] | None = _setting(None, items=TOKENS)  # target choices; None: uniform over L1_TARGET_RANGE, at most b_m
    forcing_extensions: int = _setting(0, range=I(0, 1000))  # s1 budget forcing at evaluation: 0 off; k > 0 also evaluate with up to k cues
    forcing_cue: str = "Wait"  # the continuation cue (s1's "Wait"): what replaces an early end of thinking
    # the chosen method's own section, ``budget_control.<method>`` (a plugin method's settings type,
    # ``ControlMethod.settings``), as sorted (key, value) pairs; not a config key itself
    own: tuple[tuple[str, Any], ...] = field(default=(), metadata={"section": False})

    @property
    def active(self) -> bool:
        return self.method != "none" or int(self.forcing_extensions) > 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BudgetControl:
        """From a resolved run config; a config without the section gets the defaults (inactive).
        The chosen method's own section (``budget_control.<method>``) becomes :attr:`own`."""
        node = config.get("budget_control") if hasattr(config, "get") else None
        if not node:
            return cls()
        values = {f.name: node[f.name] for f in section_fields(cls) if f.name in node}
        own = node.get(str(values.get("method", "none")))
        if hasattr(own, "items"):
            values["own"] = tuple(sorted((str(k), _freeze(v)) for k, v in own.items()))
        return _build(cls, values)

    def to_config(self) -> dict[str, Any]:
        """The section as a config holds it (lists for tuples, the method's own keys under its name):
        :meth:`from_config` of ``{"budget_control": to_config()}`` gives this object back."""
        out = {f.name: _thaw(getattr(self, f.name)) for f in section_fields(type(self))}
        if self.own:
            out[self.method] = {k: _thaw(v) for k, v in self.own}
        return out


SECTIONS: dict[str, tuple[str, type]] = {
    "thinking": ("thinking", Thinking),
    "summary": ("summary", Summary),
    "reward": ("reward", Reward),
    "loss": ("optim", Loss),
}
"""Objective attribute -> (config section, settings class)."""


def section_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a settings class that are keys of its config section (not those marked
    ``metadata={"section": False}``, like :attr:`BudgetControl.own`)."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("section", True) is not False]


def _freeze(value: Any) -> Any:
    """Lists (also OmegaConf ListConfig) -> tuples, so settings are hashable and compare equal."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """Tuples -> lists (:func:`_freeze`'s inverse, for a config or JSON)."""
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    kwargs = {f.name: _freeze(values[f.name]) for f in dataclasses.fields(cls) if f.name in values}
    return cls(**kwargs)


@dataclass(frozen=True)
class Objective:
    """Everything :mod:`arctl.algo.tree_loss` needs to turn trees into token advantages and a loss."""

    thinking: Thinking
    summary: Summary = field(default_factory=Summary)
    reward: Reward = field(default_factory=Reward)
    loss: Loss = field(default_factory=Loss)

    @property
    def budgets(self) -> tuple[int, ...]:
        return tuple(int(b) for b in self.thinking.budgets)

    @property
    def norm_len(self) -> int:
        """Tokens per tree of the loss constant (:func:`authors_loss_norm_len` unless set)."""
        if self.loss.loss_norm_len is not None:
            return int(self.loss.loss_norm_len)
        return authors_loss_norm_len(max(self.budgets), self.summary.max_tokens)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Objective:
        """From a resolved run config (a plain dict or an OmegaConf node with the same sections)."""
        parts = {}
        for attr, (section, klass) in SECTIONS.items():
            node = config[section]
            values = {f.name: node[f.name] for f in dataclasses.fields(klass) if f.name in node}
            parts[attr] = _build(klass, values)
        return cls(**parts)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-able (lists for tuples); :meth:`from_dict` inverts it."""

        def plain(v: Any) -> Any:
            return [plain(x) for x in v] if isinstance(v, tuple) else v

        return {attr: {k: plain(v) for k, v in dataclasses.asdict(getattr(self, attr)).items()} for attr in SECTIONS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Any]]) -> Objective:
        return cls(**{attr: _build(klass, data[attr]) for attr, (_section, klass) in SECTIONS.items() if attr in data})


def loss_normaliser(n_trees: int, s: Objective) -> float:
    """The Dr. GRPO constant ``C = trees x loss_norm_len`` that the token sum of the loss is divided
    by (one per experiment: independent of the arm, the tree layout and the number of valid tokens;
    :func:`arctl.algo.tree_loss.policy_loss`)."""
    return float(n_trees) * float(s.norm_len)

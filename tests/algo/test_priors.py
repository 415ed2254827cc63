import pytest
import torch

from arctl.algo.priors import budget_prior


def test_base_puts_all_mass_on_last_budget():
    p = budget_prior("base", [2000, 4000, 6000, 8000])
    assert p.dtype == torch.float64
    assert p.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_uniform_is_one_over_m():
    assert budget_prior("uniform", [1, 2, 3, 4, 5]).tolist() == pytest.approx([0.2] * 5, abs=1e-15)


def test_linear_is_proportional_to_budget():
    # b = 2000, 4000, 6000, 8000 -> sum 20000 -> 0.1, 0.2, 0.3, 0.4
    p = budget_prior("linear", [2000, 4000, 6000, 8000])
    assert p.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4], abs=1e-15)


def test_custom_is_taken_as_given():
    p = budget_prior("custom", [10, 20, 30], [0.5, 0.25, 0.25])
    assert p.tolist() == [0.5, 0.25, 0.25]


def test_custom_probs_within_the_tolerance_are_renormalised():
    """Probabilities summing to 1 within 1e-6 are accepted and divided by their sum, so P sums to 1 (to rounding)
    and the all-correct score table scores J_anytime = 1, not more (from a mutation hunt: P x sum passed, with
    J_anytime = 1.0000018 for 0/1 rewards)."""
    from arctl.algo.objective import anytime_objective

    p = budget_prior("custom", [1000, 2000], [0.5, 0.5000009])  # sum 1.0000009: within 1e-6 of 1
    assert p.tolist() == pytest.approx([0.5 / 1.0000009, 0.5000009 / 1.0000009], rel=0, abs=1e-15)
    assert float(p.sum()) == pytest.approx(1.0, rel=0, abs=1e-15)
    assert anytime_objective(torch.ones(3, 2, dtype=torch.float64), p).item() == pytest.approx(1.0, rel=0, abs=1e-15)


def test_single_budget():
    for name in ("base", "uniform", "linear"):
        assert budget_prior(name, [8000]).tolist() == [1.0]


@pytest.mark.parametrize(
    ("name", "budgets", "probs", "match"),
    [
        ("cosine", [1, 2], None, "unknown budget prior 'cosine'"),
        ("uniform", [], None, "budgets is empty"),
        ("uniform", [2, 1], None, "strictly increasing"),
        ("uniform", [1, 1], None, "strictly increasing"),
        ("uniform", [0, 1], None, "positive integers"),
        ("uniform", [1.5, 2], None, "positive integers"),
        ("custom", [1, 2], None, "needs probs"),
        ("custom", [1, 2], [1.0], "1 entries but there are 2 budgets"),
        ("custom", [1, 2], [0.7, 0.7], "must sum to 1"),
        ("custom", [1, 2], [1.5, -0.5], ">= 0"),
        ("custom", [1, 2], [float("nan"), 1.0], "finite"),
        ("linear", [1, 2], [0.5, 0.5], "takes no probs"),
    ],
)
def test_errors_are_value_errors_with_a_clear_message(name, budgets, probs, match):
    with pytest.raises(ValueError, match=match):
        budget_prior(name, budgets, probs)


def test_a_registered_prior_is_a_config_choice_and_a_tensor(monkeypatch):
    """A prior is its rule registered under its name, beside its formula: the config's choice list
    and budget_prior both come from the registry (no second list of names)."""
    from arctl.algo import priors
    from arctl.compose import plugins
    from arctl.config.schema import field_choices

    monkeypatch.setattr(priors, "_RULES", dict(priors._RULES))
    assert "sqrt" not in field_choices(plugins.run_config())["thinking.prior"]

    @priors.register_prior("sqrt")
    def _sqrt(budgets):
        w = [b ** 0.5 for b in budgets]
        return [x / sum(w) for x in w]

    assert field_choices(plugins.run_config())["summary.prior"][-2:] == ("sqrt", "custom")
    assert budget_prior("sqrt", [1, 4]).tolist() == pytest.approx([1 / 3, 2 / 3], abs=1e-15)
    with pytest.raises(ValueError, match="already registered"):
        priors.register_prior("uniform")(_sqrt)
    with pytest.raises(ValueError, match="unknown budget prior 'cubic'; choose one of base, uniform, linear, sqrt, custom"):
        budget_prior("cubic", [1, 2])
    # a registered rule's output is checked as a custom prior's is (found by a review: a rule giving
    # [1, 1] doubled every thinking advantage; one entry broadcast silently over every budget)
    priors.register_prior("ones")(lambda budgets: [1.0] * len(budgets))
    priors.register_prior("one")(lambda budgets: [1.0])
    priors.register_prior("negative")(lambda budgets: [1.5, -0.5])
    with pytest.raises(ValueError, match=r"prior 'ones' \(a registered rule\) gave \[1.0, 1.0\]: .*sum to 1, got sum 2"):
        budget_prior("ones", [1, 2])
    with pytest.raises(ValueError, match=r"prior 'one' \(a registered rule\) gave 1 entries but there are 2 budgets"):
        budget_prior("one", [1, 2])
    with pytest.raises(ValueError, match=r">= 0"):
        budget_prior("negative", [1, 2])

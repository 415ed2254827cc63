"""A compared method from outside arctl, as a third-party package writes one (tests/plugins).

``halve``: a correct answer read from a thinking trace that was cut unfinished counts ``factor`` (its
own setting, ``budget_control.halve.factor``, 0.5 by default; a finished trace's answers keep their
reward). One object of :class:`arctl.algo.methods.registry.ControlMethod` hooks; installed by an
``arctl.methods`` entry point (``halve = "arctl_fake_method:METHOD"``) or registered in-process with
``register_method(METHOD)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arctl.algo.methods.registry import ControlMethod
from arctl.algo.ranges import PROB, checks


@dataclass(frozen=True)
class HalveSettings:
    factor: float = field(default=0.5, metadata=checks(range=PROB))  # what a cut trace's correct answer counts


class Halve(ControlMethod):
    name = "halve"
    settings = HalveSettings
    shapes_rewards = True

    def shape_rewards(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
        factor = self.options(control).factor
        return [[r * (factor if not finished or cut < think_len else 1.0) for r in row] for row, cut in zip(rows, cuts)]

    def config_problem(self, control, max_budget, total_steps):
        if control.forcing_extensions:
            return ("halve does not combine with budget forcing", "budget_control.forcing_extensions",
                    "set budget_control.forcing_extensions=0")
        return None


METHOD = Halve()

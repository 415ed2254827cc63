"""A compared method from outside arctl, as a third-party package writes one (tests/plugins).

``halve``: a correct answer read from a thinking trace that was cut unfinished counts 0.5 (a finished
trace's answers keep their reward). One object of :class:`arctl.algo.methods.registry.ControlMethod`
hooks; installed by an ``arctl.methods`` entry point (``halve = "arctl_fake_method:METHOD"``) or
registered in-process with ``register_method(METHOD)``.
"""

from __future__ import annotations

from arctl.algo.methods.registry import ControlMethod


class Halve(ControlMethod):
    name = "halve"
    shapes_rewards = True

    def shape_rewards(self, control, rows, cuts, summary_lens, think_len, finished, limit, target):
        return [[r * (0.5 if not finished or cut < think_len else 1.0) for r in row] for row, cut in zip(rows, cuts)]

    def config_problem(self, control, max_budget, total_steps):
        if control.forcing_extensions:
            return ("halve does not combine with budget forcing", "budget_control.forcing_extensions",
                    "set budget_control.forcing_extensions=0")
        return None


METHOD = Halve()

"""The optimal state-based dispatch at a seed 000 figure point, for one stated objective
(pure): minimise `all.W` subject to `hp.W <= W_HP(prioritized)` at that point.

Holding HP exactly as well off as the proposed scheme leaves, as the only question, how
much the rest gains from better criteria (the seed's future work); the gain is measured
against the best built-in state-based policy meeting the same bound (docs/reproduction.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from fogsdn.core.scenario import PolicySpec, Scenario
from fogsdn.exact.model_params import exact_prediction
from fogsdn.exact.objective import parse_constraint, parse_expr
from fogsdn.exact.optimal_policy import Baseline, baselines, optimize, prediction_figures

OBJECTIVE = "all.W"
REFERENCE = "prioritized"  # seed 000's proposed scheme, whose hp.W is the bound


@dataclass(frozen=True)
class PointOptimum:
    """The optimum at one point, the proposed scheme's figures and the best built-in."""

    bound: float  # the proposed scheme's hp.W
    proposed: dict[str, float]
    optimal: dict[str, float]
    value: float  # the optimum's all.W
    best: Baseline | None  # the best built-in meeting the bound (None: not computed)
    n_states: int
    seconds: float  # the LP, from the model to the decision table
    randomised: int

    @property
    def gain(self) -> float:
        """The optimum's all.W below the best feasible built-in's, as a share of it."""
        if self.best is None or not self.best.value:
            return math.nan
        return (self.best.value - self.value) / self.best.value

    def to_dict(self) -> dict[str, object]:
        best = None if self.best is None else {"label": self.best.label,
                                                "figures": self.best.figures,
                                                "value": self.best.value}
        return {"bound_hp_W": self.bound, "proposed": self.proposed, "optimal": self.optimal,
                "value": self.value, "best_builtin": best, "gain": self.gain,
                "states": self.n_states, "lp_seconds": self.seconds,
                "randomised": self.randomised}


def point_optimum(point: Scenario, with_baselines: bool = True) -> PointOptimum:
    """The optimum at `point` (a scenario without a sweep; its own policy is ignored)."""
    proposed_sc = point.model_copy(update={"policy": PolicySpec(name=REFERENCE), "sweep": None})
    proposed = prediction_figures(proposed_sc, exact_prediction(proposed_sc))
    objective = parse_expr(OBJECTIVE)
    cons = (parse_constraint(f"hp.W<={proposed['hp.W']!r}"),)
    t0 = time.perf_counter()
    opt = optimize(proposed_sc, objective, cons)
    seconds = time.perf_counter() - t0
    best = None
    if with_baselines:
        feasible = [b for b in baselines(proposed_sc, objective, cons) if b.feasible]
        best = min(feasible, key=lambda b: b.value)
    return PointOptimum(proposed["hp.W"], proposed, opt.figures, opt.value, best,
                        opt.n_states, seconds, opt.randomised)


__all__ = ["OBJECTIVE", "REFERENCE", "PointOptimum", "point_optimum"]

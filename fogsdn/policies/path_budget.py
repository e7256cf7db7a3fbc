"""`path_budget`: the least network power with the response time at most (1 + budget) x
the shortest path's, by a Lagrangian learner over `path_rnn`'s rules (seed 002a).

The seed's trade ("about 15 % less power for under 2 % more response time") is a
constrained goal, so this learner states it as one instead of weighting two terms: each
epoch it runs one rule (a rank, or the goal with a weight), learns what network power
that rule draws, and picks the rule with the least power plus a multiplier times its
overrun of the budget. The multiplier adapts online by dual ascent on the overrun the
epoch actually had: it rises while the paths overspend the budget and falls while they
do not, so the epochs' mean overrun is driven to zero or below (docs/learning.md,
"A constrained learner").

What a path adds to a request's response time is known without measuring it: the
configured delay of that path over the shortest one (`PathOption.delay_ms`), so the
learner computes every rule's added delay for every connection (what the rule would
have chosen), whether it ran or not. The measured response time only scales the budget
(the shortest paths' time is the measured mean less the added delay), so the measurement's
noise cannot push the learner off a plan that the configured delays say is within budget.
Power is what it must learn by trying a rule. Pure: no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from fogsdn.models.network_power import PathMenu
from fogsdn.policies.base import ClusterView, Epoch, PolicyError, Request
from fogsdn.policies.paths import RULES, PathShortest, apply_rule
from fogsdn.policies.rl import read_weights

KIND = "path_budget"
SMOOTHING = 0.5  # weight of an epoch's figure in a rule's running estimate


def overrun(added_ms: float, measured_rt_ms: float, budget: float) -> float:
    """How far a mean added delay overruns the budget, as a share of it: `added_ms`
    against `budget` x the shortest paths' response time (the measured mean less what the
    paths added). 0: on budget; -1: every connection on its shortest path."""
    shortest = max(measured_rt_ms - added_ms, 1e-9)
    return added_ms / (budget * shortest) - 1.0


def _number(params: Mapping[str, Any], key: str, default: float, low: float, high: float,
            open_low: bool = False) -> float:
    v = params.get(key, default)
    bad = isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
    if bad or not (low < v if open_low else low <= v) or v > high:
        raise PolicyError(f"policy.params.{key}: a number in {'(' if open_low else '['}"
                          f"{low:g}, {high:g}], got {v!r}")
    return float(v)


def _per_rule(table: object, name: str, key: str) -> dict[int, float]:
    """A warm start's figure per rule index; one line naming the file and key if bad."""
    bad = PolicyError(f"policy.params.weights: {name}: {key} must map rule indices "
                      f"0-{len(RULES) - 1} to finite numbers")
    if not isinstance(table, dict):
        raise bad
    try:
        out = {int(k): float(v) for k, v in table.items()}
    except (TypeError, ValueError):
        raise bad from None
    if not all(0 <= k < len(RULES) and math.isfinite(v) for k, v in out.items()):
        raise bad
    return out


@dataclass
class PathBudget(PathShortest):
    """Least network power within a response-time budget (params: budget 0.02,
    multiplier_step 0.05, explore 0.05, epoch_requests 200, seed, weights: a warm start)."""

    name: ClassVar[str] = "path_budget"  # type: ignore[misc]
    learns_from_measured_rt: ClassVar[bool] = True
    budget: float = field(init=False, default=0.02)
    multiplier: float = field(init=False, default=0.0)
    multiplier_step: float = field(init=False, default=0.05)
    explore: float = field(init=False, default=0.05)
    epoch_requests: int = field(init=False, default=200)
    power_w: dict[int, float] = field(init=False, default_factory=dict)  # rule -> learned W
    added_ms: dict[int, float] = field(init=False, default_factory=dict)  # rule -> model ms
    choice: int = field(init=False, default=0)
    decisions: int = field(init=False, default=0)
    curve: list[Epoch] = field(init=False, default_factory=list)
    multipliers: list[float] = field(init=False, default_factory=list)
    _power: list[float] = field(init=False, default_factory=list)
    _added: list[list[float]] = field(init=False, default_factory=list)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        p: dict[str, object] = dict(self.spec.params)
        if "weights" in p:
            name = str(p["weights"])
            p = warm_start(name) | p
            self.power_w = _per_rule(p.get("power_w", {}), name, "power_w")
            self.added_ms = _per_rule(p.get("added_ms", {}), name, "added_ms")
        self.budget = _number(p, "budget", 0.02, 0.0, 1.0, open_low=True)
        self.multiplier_step = _number(p, "multiplier_step", 0.05, 0.0, 1e3)
        self.multiplier = _number(p, "multiplier", 0.0, 0.0, 1e6)
        self.explore = _number(p, "explore", 0.05, 0.0, 1.0)
        self.epoch_requests = int(_number(p, "epoch_requests", 200, 1, 1e6))
        self._rng = random.Random(int(_number(p, "seed", 0, 0, 2**31)))
        self._added = [[] for _ in RULES]
        self.choice = self._next()

    def learning_curve(self) -> Sequence[Epoch]:
        return self.curve

    def _chosen_added(self) -> float:
        xs = self._added[self.choice]
        return math.fsum(xs) / len(xs) if xs else 0.0

    def _next(self, overruns: Mapping[int, float] | None = None) -> int:
        """The rule for the next epoch: least power plus the multiplier times the overrun;
        now and then (explore) a rule whose overrun is not above the budget."""
        overruns = overruns or {}
        feasible = [r for r in range(len(RULES)) if overruns.get(r, -1.0) <= 0.0]
        if self.power_w and feasible and self._rng.random() < self.explore:
            return self._rng.choice(feasible)
        p_ref = max([*self.power_w.values(), 1e-9])
        return min(range(len(RULES)), key=lambda r: (
            self.power_w.get(r, 0.0) / p_ref + self.multiplier * overruns.get(r, -1.0), r))

    def _close(self, view: ClusterView) -> None:
        rts = [n.measured_rt_ms for n in view.nodes if n.measured_rt_ms is not None]
        if not rts or not self._power:
            return
        rt = math.fsum(rts) / len(rts)
        # the rule's power from the epoch's second half: in the first, the ports the
        # previous rule woke are still held awake (`port_hold_s`)
        settled = self._power[len(self._power) // 2:]
        power = math.fsum(settled) / len(settled)
        chosen_added = self._chosen_added()
        shortest_rt = rt - chosen_added
        # every rule's added delay this epoch, on the same connections
        for r, xs in enumerate(self._added):
            if xs:
                a = math.fsum(xs) / len(xs)
                self.added_ms[r] = a if r not in self.added_ms else (
                    SMOOTHING * a + (1 - SMOOTHING) * self.added_ms[r])
        old = self.power_w.get(self.choice)
        self.power_w[self.choice] = power if old is None else (
            SMOOTHING * power + (1 - SMOOTHING) * old)
        ran = overrun(chosen_added, rt, self.budget)
        # dual ascent on the overrun the epoch had
        self.multiplier = max(0.0, self.multiplier + self.multiplier_step * ran)
        self.multipliers.append(self.multiplier)
        p_ref = max(self.power_w.values())
        overruns = {r: overrun(a, shortest_rt + a, self.budget)
                    for r, a in self.added_ms.items()}
        self.curve.append(Epoch(self.decisions, RULES[self.choice], rt, power,
                                power / p_ref + self.multiplier * ran))
        self._power.clear()
        self._added = [[] for _ in RULES]
        self.choice = self._next(overruns)

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        if self.decisions and self.decisions % self.epoch_requests == 0:
            self._close(view)
        self.decisions += 1
        self._power.append(menu.network_w)
        shortest = menu.options[0].delay_ms
        chosen = 0
        for r, rule in enumerate(RULES):  # what every rule would add on this connection
            pick = apply_rule(rule, view, node, menu)
            self._added[r].append(max(0.0, menu.options[pick].delay_ms - shortest))
            if r == self.choice:
                chosen = pick
        return chosen


def warm_start(name: str) -> dict[str, object]:
    """The params a saved `path_budget` carries (what `saved_path_budget` wrote)."""
    data = read_weights(name, KIND)
    if data.get("rules") != list(RULES):
        raise PolicyError(f"policy.params.weights: {name}: its rules {data.get('rules')} "
                          f"are not path_budget's {list(RULES)}")
    keep = ("budget", "multiplier_step", "multiplier", "epoch_requests", "power_w", "added_ms")
    return {k: data[k] for k in keep if k in data}


class SavedPathBudget(TypedDict):
    """`saved_path_budget`: the weights file `warm_start` reads."""

    kind: str  # KIND
    rules: list[str]  # RULES, in order
    budget: float
    multiplier_step: float
    multiplier: float
    epoch_requests: int
    power_w: dict[str, float]  # rule index -> W
    added_ms: dict[str, float]  # rule index -> model ms
    meta: dict[str, object]  # how it was trained (the trainer's own)


def saved_path_budget(policy: PathBudget, meta: dict[str, object]) -> SavedPathBudget:
    """What a warm start loads: the learned power and added delay per rule, the multiplier."""
    return {"kind": KIND, "rules": list(RULES), "budget": policy.budget,
            "multiplier_step": policy.multiplier_step, "multiplier": policy.multiplier,
            "epoch_requests": policy.epoch_requests,
            "power_w": {str(k): v for k, v in sorted(policy.power_w.items())},
            "added_ms": {str(k): v for k, v in sorted(policy.added_ms.items())}, "meta": meta}


__all__ = ["KIND", "PathBudget", "overrun", "saved_path_budget", "warm_start"]

"""Seed 002a's learner as the full paper describes it (Fröhlich/Gelenbe et al., as cited
in the seed): a random neural network with one neuron per candidate path, choosing the
path of every request, rewarded per request by the cognitive packet network's rule.

`path_rnn` (fogsdn/policies/paths.py) is ours: global rules held for an epoch of
connections and rewarded by epoch means. Here, as in Gelenbe's cognitive packet network,
each decision point (the client's edge switch) keeps one RNN per destination (the
serving node), one neuron per outgoing path; every request goes on the most excited
path (or, with `params.explore`, a random one), and when it comes back its reward
R = 1 / G_r updates that RNN (`fogsdn.models.rnn_learner`). G_r is one of:

- `rt_plus_energy` (the paper's form, default): the request's response time in real
  ms plus its own network energy in mJ (`fogsdn.models.request_goal.RequestGoal`);
- `weighted` (our form, per request): A RT_r / mean RT + (1 - A) P_r / mean P, P_r the
  network's estimated power with this path, the means over the requests so far.

Only the simulator reports completions (`Policy.answered`); live, the controller does not
yet, so this policy would not learn there (docs/seed002a-claims.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from fogsdn.models.network_power import PathMenu, PathOption
from fogsdn.models.request_goal import GoalError, RequestGoal
from fogsdn.models.rnn_learner import RnnLearner
from fogsdn.policies.base import ClusterView, Epoch, PolicyError, Request
from fogsdn.policies.paths import _PathPolicy

GOALS = ("rt_plus_energy", "weighted")
Key = tuple[str, str]  # (the client's edge switch, the serving node): one RNN each
_MAX_PENDING = 100_000  # requests decided but not answered (blocked ones never are)


@dataclass
class PathCpn(_PathPolicy):
    name: ClassVar[str] = "path_cpn"
    learns_per_request: ClassVar[bool] = True
    learns_from_measured_rt: ClassVar[bool] = True
    learners: dict[Key, RnnLearner] = field(init=False, default_factory=dict)
    goal: RequestGoal = field(init=False)
    goal_kind: str = field(init=False, default="rt_plus_energy")
    rt_weight: float = field(init=False, default=0.5)
    explore: float = field(init=False, default=0.05)
    seed: int = field(init=False, default=0)
    epoch_requests: int = field(init=False, default=200)
    decisions: int = field(init=False, default=0)
    curve: list[Epoch] = field(init=False, default_factory=list)
    # id(the chosen option) -> its RNN, neuron and the network's power with it
    _pending: dict[int, tuple[Key, int, float]] = field(init=False, default_factory=dict)
    _means: list[float] = field(init=False, default_factory=lambda: [0.0, 0.0, 0.0])
    _ranks: list[int] = field(init=False, default_factory=list)
    _power: list[float] = field(init=False, default_factory=list)
    _rts: list[float] = field(init=False, default_factory=list)
    _goals: list[float] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        p = dict(self.spec.params)
        self.goal_kind = str(p.get("goal", "rt_plus_energy"))
        if self.goal_kind not in GOALS:
            raise PolicyError(f"policy.params.goal: one of {', '.join(GOALS)}, "
                              f"got {self.goal_kind!r}")
        self.explore, self.seed = float(p.get("explore", 0.05)), int(p.get("seed", 0))
        if not 0.0 <= self.explore <= 1.0:
            raise PolicyError(f"policy.params.explore: must be in [0, 1], got {self.explore!r}")
        self.rt_weight = float(p.get("rt_weight", 0.5))
        if not 0.0 <= self.rt_weight <= 1.0:
            raise PolicyError(f"policy.params.rt_weight: must be in [0, 1], got {self.rt_weight!r}")
        self.epoch_requests = int(p.get("epoch_requests", 200))
        if self.epoch_requests < 1:
            raise PolicyError("policy.params.epoch_requests: must be >= 1")
        try:
            self.goal = RequestGoal.from_params(p)
        except GoalError as err:
            raise PolicyError(str(err)) from None

    def learner(self, key: Key, n: int) -> RnnLearner:
        """The RNN of one decision point and destination, made at its first request."""
        if key not in self.learners:
            self.learners[key] = RnnLearner(n, explore=self.explore,
                                            seed=self.seed + len(self.learners))
        return self.learners[key]

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        if self.decisions and self.decisions % self.epoch_requests == 0:
            self._close()
        self.decisions += 1
        self._power.append(menu.network_w)
        if len(menu.options) < 2:
            self._ranks.append(0)
            return 0
        key = (menu.options[0].switches[0] if menu.options[0].switches else "", node)
        i = self.learner(key, len(menu.options)).choose()
        if len(self._pending) >= _MAX_PENDING:
            self._pending.clear()
        self._pending[id(menu.options[i])] = (key, i, menu.network_w + menu.options[i].wake_w)
        self._ranks.append(i)
        return i

    def reward_goal(self, response_ms: float, path: PathOption, power_w: float) -> float:
        """G_r of one answered request (lower is better)."""
        if self.goal_kind == "rt_plus_energy":
            return self.goal.value(response_ms, self.goal.energy_mj(path))
        n, rt_sum, p_sum = self._means
        self._means = [n + 1, rt_sum + response_ms, p_sum + power_w]
        rt_ref, p_ref = (rt_sum + response_ms) / (n + 1), (p_sum + power_w) / (n + 1)
        return (self.rt_weight * (response_ms / rt_ref if rt_ref > 0 else 1.0)
                + (1.0 - self.rt_weight) * (power_w / p_ref if p_ref > 0 else 1.0))

    def answered(self, client: str, node: str, path: PathOption | None,
                 response_ms: float) -> None:
        got = self._pending.pop(id(path), None) if path is not None else None
        if got is None or path is None:
            return
        key, i, power_w = got
        g = self.reward_goal(response_ms, path, power_w)
        self.learners[key].learn(i, 1.0 / g if g > 0 and math.isfinite(g) else 0.0)
        self._rts.append(response_ms)
        self._goals.append(g)

    def _close(self) -> None:
        """One point of the curve: the epoch's path shares by rank, answered requests'
        mean response time and goal, the mean estimated network power."""
        n = len(self._ranks)
        top = max(self._ranks, default=0)
        shares = "/".join(f"{self._ranks.count(r) / n:.2f}" for r in range(top + 1)) if n else ""
        self.curve.append(Epoch(self.decisions, f"paths {shares}", mean(self._rts),
                                mean(self._power), mean(self._goals)))
        for xs in (self._ranks, self._power, self._rts, self._goals):
            xs.clear()

    def learning_curve(self) -> Sequence[Epoch]:
        return self.curve


def mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else math.nan


__all__ = ["GOALS", "PathCpn"]

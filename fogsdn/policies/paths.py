"""Path-choosing policies (seed 002a): the node as `least_loaded` picks it, and a path per
connection among the k shortest (`fogsdn.controller.path_choice`), by one rule each; the rules
and `path_rnn`'s reward are in docs/learning.md, "Seed 002a: paths as the action".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypedDict

from fogsdn.core.summary import json_object
from fogsdn.models.network_power import PathMenu
from fogsdn.models.request_goal import GoalError, RequestGoal
from fogsdn.models.rnn_learner import LearnerJson, RnnLearner, learner_from_json, learner_to_json
from fogsdn.policies.base import ClusterView, Epoch, PolicyError, Request
from fogsdn.policies.greedy import LeastLoaded, expected_sojourn_ms
from fogsdn.policies.rl import read_weights

# path_rnn's neurons: "rank r" sends every connection on its r-th shortest path (one
# action consolidates the whole network); "a x" picks by the goal with weight x
RT_REFS = ("first", "shortest")  # path_rnn's params.rt_ref
# path_rnn's params.goal: ours (A RT/RT_ref + (1 - A) P/P_ref of the epoch's means) or the
# paper's form on the epoch's means (response time in real ms plus each request's own
# network energy in mJ, fogsdn.models.request_goal)
EPOCH_GOALS = ("weighted", "rt_plus_energy")
RULES: tuple[str, ...] = ("rank 0", "rank 1", "rank 2", "a 0.9", "a 0.75", "a 0.5", "a 0.25", "a 0")


def apply_rule(rule: str, view: ClusterView, node: str, menu: PathMenu) -> int:
    kind, value = rule.split()
    if kind == "rank":
        return min(int(value), len(menu.options) - 1)
    return goal_choice(view, node, menu, float(value))


def shortest_rt_ms(view: ClusterView, node: str, menu: PathMenu) -> float:
    """RT_0: what a request to `node` is expected to take on the shortest path now."""
    return expected_sojourn_ms(view.node(node)) + menu.options[0].delay_ms


def goal_choice(view: ClusterView, node: str, menu: PathMenu, rt_weight: float) -> int:
    """The option with the least G_i = a RT_i / RT_0 + (1 - a) (P + wake_i) / P."""
    sojourn = expected_sojourn_ms(view.node(node))
    rt0 = shortest_rt_ms(view, node, menu)
    p_ref = menu.network_w if menu.network_w > 0 else max([o.wake_w for o in menu.options] + [1.0])

    def g(i: int) -> float:
        o = menu.options[i]
        rt = (sojourn + o.delay_ms) / rt0 if rt0 > 0 else 1.0
        return rt_weight * rt + (1.0 - rt_weight) * (menu.network_w + o.wake_w) / p_ref

    return min(range(len(menu.options)), key=g)


@dataclass
class _PathPolicy(LeastLoaded):
    chooses_paths: ClassVar[bool] = True
    state_based: ClassVar[bool | None] = False


@dataclass
class PathShortest(_PathPolicy):
    name: ClassVar[str] = "path_shortest"


@dataclass
class PathRank(_PathPolicy):
    """Every connection on its `params.rank`-th shortest path (or the last there is)."""

    name: ClassVar[str] = "path_rank"

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        return apply_rule(f"rank {int(self.spec.params.get('rank', 0))}", view, node, menu)


@dataclass
class PathFewestSwitches(_PathPolicy):
    name: ClassVar[str] = "path_fewest_switches"

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        opts = menu.options
        return min(range(len(opts)),
                   key=lambda i: (round(opts[i].wake_w, 9), len(opts[i].switches),
                                  opts[i].delay_ms))


@dataclass
class PathGoal(_PathPolicy):
    name: ClassVar[str] = "path_goal"

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        return goal_choice(view, node, menu, float(self.spec.params.get("rt_weight", 0.5)))


@dataclass
class PathRnn(_PathPolicy):
    name: ClassVar[str] = "path_rnn"
    learns_from_measured_rt: ClassVar[bool] = True
    learner: RnnLearner = field(init=False)
    choice: int = field(init=False, default=0)
    decisions: int = field(init=False, default=0)
    curve: list[Epoch] = field(init=False, default_factory=list)
    epoch_requests: int = field(init=False, default=200)
    rt_weight: float = field(init=False, default=0.5)
    rt_ref: str = field(init=False, default="first")
    goal_kind: str = field(init=False, default="weighted")
    goal: RequestGoal = field(init=False)
    _energy: list[float] = field(init=False, default_factory=list)
    _power: list[float] = field(init=False, default_factory=list)
    _rt0: list[float] = field(init=False, default_factory=list)
    _ref: tuple[float, float] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        p = dict(self.spec.params)
        explore, seed = float(p.get("explore", 0.1)), int(p.get("seed", 0))
        if not 0.0 <= explore <= 1.0:
            raise PolicyError(f"policy.params.explore: must be in [0, 1], got {explore!r}")
        if "weights" in p:
            self.learner, trained = trained_learner(str(p["weights"]), explore, seed)
            p = trained | p
        else:
            self.learner = RnnLearner(len(RULES), explore=explore, seed=seed)
        self.epoch_requests = int(p.get("epoch_requests", 200))
        self.rt_weight = float(p.get("rt_weight", 0.5))
        self.rt_ref = str(p.get("rt_ref", "first"))
        if self.rt_ref not in RT_REFS:
            raise PolicyError(f"policy.params.rt_ref: one of {', '.join(RT_REFS)}, "
                              f"got {self.rt_ref!r}")
        self.goal_kind = str(p.get("goal", "weighted"))
        if self.goal_kind not in EPOCH_GOALS:
            raise PolicyError(f"policy.params.goal: one of {', '.join(EPOCH_GOALS)}, "
                              f"got {self.goal_kind!r}")
        try:
            self.goal = RequestGoal.from_params(p)
        except GoalError as err:
            raise PolicyError(str(err)) from None
        self.choice = self.learner.choose()

    def _close(self, view: ClusterView) -> None:
        rts = [n.measured_rt_ms for n in view.nodes if n.measured_rt_ms is not None]
        if not rts or not self._power:
            return
        rt, power = sum(rts) / len(rts), sum(self._power) / len(self._power)
        rt0 = sum(self._rt0) / len(self._rt0) if self._rt0 else 0.0
        energy = sum(self._energy) / len(self._energy) if self._energy else 0.0
        self._power.clear()
        self._rt0.clear()
        self._energy.clear()
        rt_term = rt / rt0 if rt0 > 0 else rt
        if self._ref is None:
            self._ref = (rt_term, power if power > 0 else 1.0)
        if self.goal_kind == "rt_plus_energy":
            g = self.goal.value(rt, energy)
        else:
            g = (self.rt_weight * rt_term / self._ref[0]
                 + (1.0 - self.rt_weight) * power / self._ref[1])
        self.curve.append(Epoch(self.decisions, RULES[self.choice], rt, power, g))
        self.learner.learn(self.choice, 1.0 / g if g > 0 and math.isfinite(g) else 0.0)
        self.choice = self.learner.choose()

    def learning_curve(self) -> Sequence[Epoch]:
        return self.curve

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        if self.decisions and self.decisions % self.epoch_requests == 0:
            self._close(view)
        self.decisions += 1
        self._power.append(menu.network_w)
        if self.rt_ref == "shortest":
            self._rt0.append(shortest_rt_ms(view, node, menu))
        i = apply_rule(RULES[self.choice], view, node, menu)
        if self.goal_kind == "rt_plus_energy":
            self._energy.append(self.goal.energy_mj(menu.options[i]))
        return i


def trained_learner(name: str, explore: float, seed: int
                    ) -> tuple[RnnLearner, dict[str, float | int | str]]:
    """The learner `saved_path_rnn` wrote, its threshold cleared (another run's scale
    would reward at random), and the reward params it was trained under."""
    data = read_weights(name, "path_rnn")
    if data.get("rules") != list(RULES):
        raise PolicyError(f"policy.params.weights: {name}: its rules {data.get('rules')} "
                          f"are not path_rnn's {list(RULES)}")
    try:
        saved = dict(json_object(data["learner"], "learner"), explore=explore, seed=seed,
                     threshold=None)
        learner = learner_from_json(saved, len(RULES))
    except (KeyError, TypeError, ValueError) as err:
        raise PolicyError(f"policy.params.weights: {name}: bad learner ({err})") from None
    trained: dict[str, float | int | str] = {}
    for k in ("rt_ref", "rt_weight", "epoch_requests"):
        if k in data:
            v = data[k]
            if not isinstance(v, float | int | str):
                raise PolicyError(f"policy.params.weights: {name}: {k}: a number or a name, "
                                  f"got {v!r}")
            trained[k] = v
    return learner, trained


def warm_start_file(scenario_name: str, kind: str = "path_rnn") -> str:
    """Where `train_agent.py --agent path_rnn|path_budget` saves a scenario's learner
    (root-relative)."""
    return f"fogsdn/agents/weights/{kind}_{scenario_name}.json"


class SavedPathRnn(TypedDict):
    """`saved_path_rnn`: the weights file `trained_learner` reads."""

    kind: Literal["path_rnn"]
    rules: list[str]  # RULES, in order
    learner: LearnerJson
    rt_ref: str
    rt_weight: float
    epoch_requests: int
    meta: dict[str, object]  # how it was trained (the trainer's own)


def saved_path_rnn(policy: PathRnn, meta: dict[str, object]) -> SavedPathRnn:
    """What `trained_learner` loads: the learner after training, with what it was trained on."""
    return {"kind": "path_rnn", "rules": list(RULES), "learner": learner_to_json(policy.learner),
            "rt_ref": policy.rt_ref, "rt_weight": policy.rt_weight,
            "epoch_requests": policy.epoch_requests, "meta": meta}


__all__ = ["EPOCH_GOALS", "RT_REFS", "RULES", "PathFewestSwitches", "PathGoal", "PathRank",
           "PathRnn", "PathShortest", "apply_rule", "goal_choice", "saved_path_rnn",
           "shortest_rt_ms", "trained_learner", "warm_start_file"]

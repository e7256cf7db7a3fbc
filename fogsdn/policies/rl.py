"""Learned agents as ordinary policies (issue 9): `rl_dqn` and `rl_rnn`, pure but for
reading their weights file once (`policy.params.weights`, relative to the project root).

Each flow waits only for one weighted choice; the agent thinks once per epoch
(docs/learning.md, "Agents as policies").
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypedDict

import numpy as np
import numpy.typing as npt

from fogsdn.core.scenario import TaskClass
from fogsdn.core.summary import json_float, json_int, json_list, json_object
from fogsdn.models.rnn_learner import RnnLearner, learner_from_json
from fogsdn.policies.base import ClusterView, Policy, PolicyError, Request, RouteTable
from fogsdn.policies.observe import EpochObserver, Obs, ObservationLayout, weighted_choice

ROOT = Path(__file__).resolve().parents[2]


def weights_path(name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() else ROOT / p


def read_weights(name: str, kind: str) -> dict[str, object]:
    """The saved agent `name` of `kind` (a JSON object naming its kind); one line naming
    the file on any problem reading it."""
    path = weights_path(name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PolicyError(f"policy.params.weights: cannot read {path}: {err}") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise PolicyError(f"policy.params.weights: {path} is not a saved {kind} agent")
    return data


class AgentState(TypedDict):
    """`describe()`: the agent's menu entry now, its decisions so far, each node's weight."""

    choice: int | None
    decisions: int
    weights: dict[str, float]


@dataclass
class _EpochAgent(Policy):
    """Per-flow weighted choice; new weights from `think` every `epoch_requests` flows."""

    proactive: ClassVar[bool] = False
    state_based: ClassVar[bool | None] = False
    kind: ClassVar[str] = ""
    default_file: ClassVar[str] = ""
    layout: ObservationLayout = field(init=False)
    menu: tuple[tuple[float, ...], ...] = field(init=False)
    epoch_requests: int = field(init=False)
    observer: EpochObserver = field(init=False)
    weights: tuple[float, ...] = field(init=False)
    choice: int | None = field(init=False, default=None)
    decisions: int = field(init=False, default=0)
    epochs: list[tuple[int, tuple[float, ...]]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        name = str(self.spec.params.get("weights", self.default_file))
        data = read_weights(name, self.kind)
        try:
            self.layout = ObservationLayout.from_json(json_object(data["layout"], "layout"))
            self.menu = tuple(tuple(json_float(w) for w in json_list(entry, "menu"))
                              for entry in json_list(data["menu"], "menu"))
            self.epoch_requests = json_int(self.spec.params.get("epoch_requests",
                                                                data["epoch_requests"]))
        except (KeyError, TypeError, ValueError) as err:
            raise PolicyError(f"policy.params.weights: {name}: bad field ({err})") from None
        if self.epoch_requests < 1 or not self.menu or any(
                len(e) != len(self.layout.nodes) for e in self.menu):
            raise PolicyError(f"policy.params.weights: {name}: menu or epoch does not fit "
                              f"{len(self.layout.nodes)} nodes")
        self.observer = EpochObserver(self.layout)
        self.weights = tuple(1.0 for _ in self.layout.nodes)
        self.load(data)

    def load(self, data: dict[str, object]) -> None:
        """Read the agent's own parameters."""

    def think(self, obs: Obs, estimate: dict[str, float]) -> int:
        """The menu entry for the next epoch."""
        raise NotImplementedError

    def describe(self) -> AgentState:
        """Its menu entry, each node's weight and its decisions so far (for the run view)."""
        return {"choice": self.choice, "decisions": self.decisions,
                "weights": dict(zip(self.layout.nodes, self.weights, strict=True))}

    def _check(self, view: ClusterView) -> None:
        names = tuple(n.name for n in view.nodes)
        if names != self.layout.nodes:
            raise PolicyError(f"trained on nodes {list(self.layout.nodes)}, the cluster has "
                              f"{list(names)}")

    def routes(self, view: ClusterView) -> RouteTable:
        self._check(view)
        target = {view.nodes[weighted_choice(view, self.weights)].name: 1.0}
        return {TaskClass.HP: target, TaskClass.LP: target}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if self.decisions == 0:
            self._check(view)
        elif self.decisions % self.epoch_requests == 0:
            obs, estimate = self.observer.close()
            self.choice = self.think(obs, estimate)
            self.weights = self.menu[self.choice]
            self.epochs.append((self.decisions, self.weights))
        k = weighted_choice(view, self.weights)
        self.observer.record(view, k)
        self.decisions += 1
        return view.nodes[k].name


@dataclass
class RlDqn(_EpochAgent):
    name: ClassVar[str] = "rl_dqn"
    kind: ClassVar[str] = "dqn"
    default_file: ClassVar[str] = "fogsdn/agents/weights/dqn_multipath_power.json"
    layers: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = field(
        init=False, default_factory=list)

    def load(self, data: dict[str, object]) -> None:
        try:
            layers = [json_object(lay, "layers") for lay in json_list(data["layers"], "layers")]
            self.layers = [(np.asarray(lay["w"], dtype=np.float64),
                            np.asarray(lay["b"], dtype=np.float64)) for lay in layers]
        except (KeyError, TypeError, ValueError) as err:
            raise PolicyError(f"policy.params.weights: bad layers ({err})") from None
        if not self.layers or self.layers[0][0].shape[1] != self.layout.size \
                or self.layers[-1][0].shape[0] != len(self.menu):
            raise PolicyError("policy.params.weights: the network's shape does not fit its "
                              f"layout ({self.layout.size} inputs, {len(self.menu)} actions)")

    def q_values(self, obs: Obs) -> npt.NDArray[np.float64]:
        """Linear layers with ReLU between them (torch's nn.Linear: y = W x + b)."""
        x = obs.astype(np.float64)
        for i, (w, b) in enumerate(self.layers):
            x = w @ x + b
            if i < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        return x

    def think(self, obs: Obs, estimate: dict[str, float]) -> int:
        return int(np.argmax(self.q_values(obs)))


@dataclass
class RlRnn(_EpochAgent):
    name: ClassVar[str] = "rl_rnn"
    kind: ClassVar[str] = "rnn"
    default_file: ClassVar[str] = "fogsdn/agents/weights/rnn_multipath_power.json"
    learner: RnnLearner = field(init=False)
    rt_weight: float = field(init=False, default=0.5)

    def load(self, data: dict[str, object]) -> None:
        try:
            self.rt_weight = json_float(self.spec.params.get("rt_weight", data["rt_weight"]))
            self.learner = learner_from_json(json_object(data["learner"], "learner"),
                                             len(self.menu))
        except (KeyError, TypeError, ValueError) as err:
            raise PolicyError(f"policy.params.weights: bad learner ({err})") from None

    def think(self, obs: Obs, estimate: dict[str, float]) -> int:
        if self.choice is not None and estimate["flows"] > 0:
            g = goal(self.rt_weight, estimate["response_ms"], estimate["power_w"], self.layout)
            self.learner.learn(self.choice, 1.0 / g if g > 0 else 0.0)
        return self.learner.choose()


def goal(rt_weight: float, response_ms: float, power_w: float, layout: ObservationLayout) -> float:
    """Seed 002a's G = a RT / RT_ref + (1 - a) P / P_ref."""
    return (rt_weight * response_ms / layout.rt_ref_ms
            + (1.0 - rt_weight) * power_w / layout.p_ref_w)


__all__ = ["RlDqn", "RlRnn", "goal", "read_weights", "weights_path"]

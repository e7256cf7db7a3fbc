"""The policy a live env steps (issue 9): per-flow weighted choice, weights from outside.

The env and the controller's process talk through an exchange folder
(`policy.params.exchange`: layout.json, action.json, obs.json, replaced atomically); the
policy never waits for the env (docs/learning.md, "The live env").
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.scenario import TaskClass
from fogsdn.policies.base import ClusterView, Policy, PolicyError, Request, RouteTable
from fogsdn.policies.observe import EpochObserver, ObservationLayout, weighted_choice


@dataclass
class ExchangePolicy(Policy):
    name: ClassVar[str] = "rl_live"
    proactive: ClassVar[bool] = False
    state_based: ClassVar[bool | None] = False
    folder: Path = field(init=False)
    observer: EpochObserver = field(init=False)
    epoch_requests: int = field(init=False)
    weights: tuple[float, ...] = field(init=False)
    decisions: int = field(init=False, default=0)
    epoch: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.folder = Path(str(self.spec.params.get("exchange", "")))
        try:
            layout = ObservationLayout.from_json(
                json.loads((self.folder / "layout.json").read_text()))
        except (OSError, ValueError) as err:
            raise PolicyError(f"policy.params.exchange: no layout in {self.folder}: {err}"
                              ) from None
        self.epoch_requests = int(self.spec.params.get("epoch_requests", 50))
        if self.epoch_requests < 1:
            raise PolicyError("policy.params.epoch_requests: must be >= 1")
        self.observer = EpochObserver(layout)
        self.weights = tuple(1.0 for _ in layout.nodes)

    def routes(self, view: ClusterView) -> RouteTable:
        target = {view.nodes[weighted_choice(view, self.weights)].name: 1.0}
        return {TaskClass.HP: target, TaskClass.LP: target}

    def _read_action(self) -> None:
        try:
            got = json.loads((self.folder / "action.json").read_text())["weights"]
        except (OSError, ValueError, KeyError, TypeError):
            return  # none yet, or being replaced: keep the last weights
        if isinstance(got, list) and len(got) == len(self.weights):
            self.weights = tuple(max(0.0, float(w)) for w in got)

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if self.decisions % self.epoch_requests == 0:
            if self.decisions > 0:
                obs, estimate = self.observer.close()
                self.epoch += 1
                write_json_atomic(self.folder / "obs.json", {
                    "epoch": self.epoch, "obs": [float(x) for x in obs], "estimate": estimate})
            self._read_action()
        k = weighted_choice(view, self.weights)
        self.observer.record(view, k)
        self.decisions += 1
        return view.nodes[k].name

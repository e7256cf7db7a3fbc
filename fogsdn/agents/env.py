"""A Gymnasium environment over the simulator: route weights per decision epoch (issue 9).

The action, observation, reward and stepping are described in docs/learning.md, "The
environment"; the live controller runs the same per-flow rule (fogsdn/policies/rl.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from fogsdn.core.latency import request_network
from fogsdn.core.scenario import Scenario
from fogsdn.core.workload import client_names
from fogsdn.models.power_model import server_power_w, switch_power_w
from fogsdn.policies.base import (
    ClusterView,
    Policy,
    Request,
    RouteTable,
    node_view,
    safe_routes,
)
from fogsdn.policies.greedy import servers
from fogsdn.policies.observe import (
    EpochObserver,
    Obs,
    ObservationLayout,
    layout_of,
    switch_activity,
    weighted_choice,
)
from fogsdn.policies.rl import goal
from fogsdn.sim.engine import Simulator
from fogsdn.sim.rows import OK, Row


@dataclass
class EpisodeLog:
    """One training episode's means (the learning curve's row)."""

    episode: int
    steps: int
    mean_reward: float
    response_ms: float
    power_w: float

    @staticmethod
    def record(curve: list[EpisodeLog], rewards: list[float], infos: list[dict[str, Any]],
               progress: Callable[[EpisodeLog], None] | None) -> None:
        """Every trainer's end of an episode: its row onto `curve` and to `progress`, its
        `rewards` and step `infos` emptied for the next."""
        log = EpisodeLog(len(curve), len(rewards), float(np.mean(rewards)),
                         float(np.mean([i["response_ms"] for i in infos])),
                         float(np.mean([i["power_w"] for i in infos])))
        curve.append(log)
        if progress is not None:
            progress(log)
        rewards.clear()
        infos.clear()


@dataclass
class _Epoch:
    """What one decision epoch measured."""

    start_ms: float
    end_ms: float
    sent: list[int]
    rows: list[Row]
    finished: bool = False


@dataclass
class _EpochPolicy(Policy):
    """The simulator's policy while an env steps it: samples the current weights, counting
    where each request went and what the controller would have observed."""

    name: ClassVar[str] = "rl_env"
    proactive: ClassVar[bool] = False
    node_names: tuple[str, ...] = ()
    observer: EpochObserver | None = None
    weights: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    sent: list[int] = field(default_factory=list)

    def routes(self, view: ClusterView) -> RouteTable:
        return safe_routes(view)

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        k = weighted_choice(view, list(self.weights))
        self.sent[k] += 1
        if self.observer is not None:
            self.observer.record(view, k)
        return self.node_names[k]


class RoutingEnvBase(gym.Env[Obs, npt.NDArray[np.float32]]):
    """What the simulated and the live env share: the goal's weight, the observer's
    layout, and the spaces (a weight per node; the layout's observation)."""

    metadata: dict[str, list[str]] = {"render_modes": []}  # noqa: RUF012 (Gymnasium declares it an instance attribute)

    def __init__(self, scenario: Scenario, epoch_requests: int, epochs: int,
                 rt_weight: float | None) -> None:
        if epoch_requests < 1 or epochs < 1:
            raise ValueError("epoch_requests and epochs must be >= 1")
        self.rt_weight = scenario.goal.rt_weight if rt_weight is None else rt_weight
        if not 0.0 <= self.rt_weight <= 1.0:
            raise ValueError(f"rt_weight: must be in [0, 1], got {rt_weight!r}")
        self.scenario, self.epoch_requests, self.epochs = scenario, epoch_requests, epochs
        self.layout: ObservationLayout = layout_of(scenario)
        self.action_space = spaces.Box(0.0, 1.0, shape=(len(self.layout.nodes),), dtype=np.float32)
        self.observation_space = spaces.Box(0.0, np.inf, shape=(self.layout.size,),
                                            dtype=np.float32)


class SimRoutingEnv(RoutingEnvBase):
    """Route weights per decision epoch over a stepped `fogsdn.sim.engine.Simulator` (see the
    module doc)."""

    def __init__(self, scenario: Scenario, *, epoch_requests: int = 100, epochs: int = 50,
                 rt_weight: float | None = None) -> None:
        super().__init__(scenario, epoch_requests, epochs, rt_weight)
        self.nodes = self.layout.nodes
        self.servers = tuple(servers(node_view(n, True)) for n in scenario.nodes)
        network = request_network(scenario)
        clients = client_names(scenario)
        # (client index, node index) -> mean network time of the path
        self.net_ms = {(c, k): network.mean_ms(cn, n)
                       for c, cn in enumerate(clients) for k, n in enumerate(self.nodes)}
        self._policy: _EpochPolicy | None = None
        self._sim: Simulator | None = None
        self._rows: list[Row] = []  # what the simulator settled since the last epoch
        self._epoch_start_ms = 0.0
        self._steps = 0

    def _next_epoch(self) -> _Epoch:
        """Step the simulator to the first arrival of the next epoch (or its end)."""
        assert self._sim is not None and self._policy is not None
        try:
            done = self._sim.step(requests=self._steps * self.epoch_requests)
        except Exception as err:
            raise RuntimeError(f"simulation failed: {err}") from err
        end_ms = self._sim.next_arrival_ms  # inf once the run has ended
        epoch = _Epoch(self._epoch_start_ms, end_ms, self._policy.sent, self._rows[:],
                       done is not None)
        self._rows.clear()
        self._policy.sent = [0] * len(self.nodes)
        self._epoch_start_ms = end_ms
        return epoch

    # -- the Gymnasium API ----------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        run_seed = int(self.np_random.integers(0, 2**31 - 1)) if seed is None else seed
        scenario = self.scenario.model_copy(update={"seed": run_seed})
        policy = _EpochPolicy(node_names=self.nodes, weights=np.ones(len(self.nodes)),
                              observer=EpochObserver(self.layout), sent=[0] * len(self.nodes))
        self._policy = policy
        self._rows.clear()
        # one request past the last epoch: the run waits before it, at the last epoch's end
        self._sim = Simulator(scenario, self._rows.extend,
                              requests=self.epoch_requests * self.epochs + 1, policy=policy,
                              flush_rows=1)
        self._epoch_start_ms = 0.0
        self._steps = 0
        epoch = self._next_epoch()  # the first arrival: nothing measured yet
        obs, _ = self._measure(epoch)
        return obs, {}

    def step(self, action: npt.NDArray[np.float32]
             ) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self._policy is None:
            raise RuntimeError("call reset() before step()")
        self._policy.weights = np.clip(
            np.asarray(action, dtype=np.float64).reshape(len(self.nodes)), 0.0, 1.0)
        self._steps += 1
        epoch = self._next_epoch()
        obs, info = self._measure(epoch)
        g = goal(self.rt_weight, info["response_ms"], info["power_w"], self.layout)
        reward = 1.0 / g if g > 0 else 0.0
        truncated = self._steps >= self.epochs or epoch.finished
        return obs, reward, False, truncated, info

    def close(self) -> None:
        self._sim = None
        self._policy = None

    def _measure(self, epoch: _Epoch) -> tuple[Obs, dict[str, Any]]:
        """The observation (what the controller sees) and what the simulator measured."""
        assert self._policy is not None and self._policy.observer is not None
        obs, estimate = self._policy.observer.close()
        nn = len(self.nodes)
        span = epoch.end_ms - epoch.start_ms
        span = span if math.isfinite(span) and span > 0 else 0.0
        busy = [0.0] * nn
        responses = []
        for r in epoch.rows:
            if r[1] == OK:
                busy[r[7]] += r[8]
                responses.append(r[0] - r[6] + self.net_ms[r[3], r[7]])
            else:
                responses.append(self.scenario.timeout_ms)
        util = [min(1.0, b / (span * c)) if span > 0 else 0.0
                for b, c in zip(busy, self.servers, strict=True)]
        power = sum(server_power_w(n.power, u) for n, u in zip(self.scenario.nodes, util,
                                                                strict=True))
        active = switch_activity(self.layout, epoch.sent)
        power += sum(switch_power_w(self.layout.switch_power, active[s], ports, 0.0)
                     for s, ports in self.layout.switch_ports.items())
        rt = float(np.mean(responses)) if responses else 0.0
        return obs, {"response_ms": rt, "power_w": power, "utilization": util,
                     "completed": len(responses), "estimate": estimate}

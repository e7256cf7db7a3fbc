"""A small DQN agent over the env's route weights (needs the `rl` extra: torch).

DQN needs a finite action set, so the agent chooses among a menu of weight vectors
(`weight_menu`); otherwise standard DQN (Mnih et al. 2015), seeded, in simulated time.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from fogsdn.agents.env import EpisodeLog, SimRoutingEnv
from fogsdn.policies.observe import ObservationLayout

__all__ = ["DEMOTE_LEVELS", "DqnAgent", "DqnConfig", "train_dqn", "weight_menu"]

# preference levels a node can be demoted to (`observe.weighted_choice`; docs/learning.md)
DEMOTE_LEVELS: tuple[float, ...] = (0.97, 0.94, 0.9, 0.8, 0.6)


def weight_menu(n: int, levels: tuple[float, ...] = ()) -> tuple[tuple[float, ...], ...]:
    """Each node alone, each pair evenly, all evenly (one entry when n == 1); then for
    each level and node, that node at the level and every other at 1."""
    alone = [tuple(1.0 if i == k else 0.0 for i in range(n)) for k in range(n)]
    pairs = [tuple(1.0 if i in pair else 0.0 for i in range(n))
             for pair in itertools.combinations(range(n), 2)] if n > 2 else []
    everyone = [tuple(1.0 for _ in range(n))] if n > 1 else []
    demoted = [tuple(level if i == k else 1.0 for i in range(n))
               for level in levels for k in range(n)] if n > 1 else []
    return tuple(alone + pairs + everyone + demoted)


def q_network(obs_dim: int, actions: int, hidden: int = 64) -> nn.Sequential:
    return nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, actions))


@dataclass
class DqnConfig:
    steps: int = 3000
    gamma: float = 0.9
    lr: float = 1e-3
    batch: int = 64
    buffer: int = 10_000
    warmup: int = 200
    target_every: int = 200
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_decay_steps: int = 2000
    hidden: int = 64
    seed: int = 0
    levels: tuple[float, ...] = ()  # weight_menu's demotion levels


@dataclass
class DqnAgent:
    """A trained Q-network and the weight menu its outputs index."""

    menu: tuple[tuple[float, ...], ...]
    net: nn.Sequential
    curve: list[EpisodeLog] = field(default_factory=list)

    def action(self, obs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The route weights the greedy policy picks for this observation."""
        with torch.no_grad():
            k = int(self.net(torch.as_tensor(obs).unsqueeze(0)).argmax(dim=1).item())
        return np.asarray(self.menu[k], dtype=np.float32)

    def save(self, path: Path, meta: dict[str, object]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": self.net.state_dict(), "menu": self.menu,
                    "obs_dim": self.net[0].in_features, "hidden": self.net[0].out_features,
                    "meta": meta}, path)

    def export(self, path: Path, layout: ObservationLayout, epoch_requests: int,
               meta: dict[str, object]) -> None:
        """The network as plain JSON (layers, menu, the observer's layout) for
        `fogsdn.policies.rl.RlDqn`, which decides with numpy and needs no torch."""
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        layers = [{"w": m.weight.detach().numpy().astype(float).round(7).tolist(),
                   "b": m.bias.detach().numpy().astype(float).round(7).tolist()}
                  for m in linears]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"kind": "dqn", "menu": [list(w) for w in self.menu],
                                    "layers": layers, "layout": layout.to_json(),
                                    "epoch_requests": epoch_requests, "meta": meta}))

    @classmethod
    def load(cls, path: Path) -> DqnAgent:
        saved = torch.load(path, weights_only=True)  # tensors and plain containers only
        menu = tuple(tuple(w) for w in saved["menu"])
        net = q_network(saved["obs_dim"], len(menu), saved["hidden"])
        net.load_state_dict(saved["state_dict"])
        net.eval()
        return cls(menu, net)


def train_dqn(env: SimRoutingEnv, config: DqnConfig,
              progress: Callable[[EpisodeLog], None] | None = None) -> DqnAgent:
    """Train on `env` for `config.steps` decision epochs; episodes reseed from config.seed."""
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    menu = weight_menu(len(env.nodes), config.levels)
    obs_dim = int(env.observation_space.shape[0])  # type: ignore[index]
    net = q_network(obs_dim, len(menu), config.hidden)
    target = q_network(obs_dim, len(menu), config.hidden)
    target.load_state_dict(net.state_dict())
    optimiser = torch.optim.Adam(net.parameters(), lr=config.lr)
    replay: deque[tuple[npt.NDArray[np.float32], int, float, npt.NDArray[np.float32], bool]] = \
        deque(maxlen=config.buffer)
    agent = DqnAgent(menu, net)
    obs, _ = env.reset(seed=config.seed)
    rewards: list[float] = []
    infos: list[dict[str, Any]] = []
    for step in range(config.steps):
        frac = min(1.0, step / max(1, config.epsilon_decay_steps))
        epsilon = config.epsilon_start + frac * (config.epsilon_end - config.epsilon_start)
        if rng.random() < epsilon:
            k = rng.randrange(len(menu))
        else:
            with torch.no_grad():
                k = int(net(torch.as_tensor(obs).unsqueeze(0)).argmax(dim=1).item())
        next_obs, reward, terminated, truncated, info = env.step(
            np.asarray(menu[k], dtype=np.float32))
        replay.append((obs, k, reward, next_obs, terminated))
        rewards.append(reward)
        infos.append(info)
        obs = next_obs
        if len(replay) >= max(config.warmup, config.batch):
            batch = rng.sample(list(replay), config.batch)
            o = torch.as_tensor(np.stack([b[0] for b in batch]))
            a = torch.as_tensor([b[1] for b in batch])
            r = torch.as_tensor([b[2] for b in batch], dtype=torch.float32)
            o2 = torch.as_tensor(np.stack([b[3] for b in batch]))
            done = torch.as_tensor([b[4] for b in batch], dtype=torch.float32)
            q = net(o).gather(1, a.unsqueeze(1)).squeeze(1)
            with torch.no_grad():
                y = r + config.gamma * (1.0 - done) * target(o2).max(dim=1).values
            loss = nn.functional.smooth_l1_loss(q, y)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        if step % config.target_every == 0:
            target.load_state_dict(net.state_dict())
        if terminated or truncated:
            EpisodeLog.record(agent.curve, rewards, infos, progress)
            obs, _ = env.reset(seed=config.seed + len(agent.curve))
    net.eval()
    return agent

"""The seed's own learner (seed 002a): a random neural network trained by reinforcement (pure).

Gelenbe's random neural network with one neuron per choice, the most excited one chosen,
and the cognitive packet network's reward-and-punishment rule with renormalised firing
rates; the equations and the rule are in docs/learning.md.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from fogsdn.core.summary import json_float, json_int

Matrix = npt.NDArray[np.float64]


class RnnError(ValueError):
    """A parameter or input the learner cannot use; the message names it."""


def excitation(w_plus: Matrix, w_minus: Matrix, ext_plus: npt.NDArray[np.float64],
               ext_minus: npt.NDArray[np.float64], q0: npt.NDArray[np.float64] | None = None,
               tol: float = 1e-10, max_iter: int = 10_000) -> npt.NDArray[np.float64]:
    """The stationary excitation probabilities q, by fixed-point iteration (RnnError when
    it has not settled within `max_iter` sweeps)."""
    rates = w_plus.sum(axis=1) + w_minus.sum(axis=1)
    q = np.full(len(rates), 0.5) if q0 is None else q0.copy()
    for _ in range(max_iter):
        numerator = ext_plus + q @ w_plus
        denominator = rates + ext_minus + q @ w_minus
        new = np.minimum(1.0, numerator / denominator)
        if float(np.max(np.abs(new - q))) < tol:
            return new
        q = new
    raise RnnError(f"excitation did not converge in {max_iter} iterations")


@dataclass
class RnnLearner:
    """A random neural network choosing among `n` options, trained by reward and punishment.

    `alpha` in [0, 1) weighs the threshold's history; `explore` is the probability of a
    uniformly random choice (0: always the most excited neuron); `seed` fixes that draw
    and the tie-break. `ext_plus` / `ext_minus` are every neuron's external arrival rates.
    """

    n: int
    alpha: float = 0.8
    initial_weight: float = 0.5
    ext_plus: float = 0.1
    ext_minus: float = 0.05
    explore: float = 0.0
    seed: int = 0
    w_plus: Matrix = field(init=False, repr=False)
    w_minus: Matrix = field(init=False, repr=False)
    threshold: float | None = field(init=False, default=None)
    q: npt.NDArray[np.float64] = field(init=False, repr=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n < 2:
            raise RnnError(f"n: need at least 2 options, got {self.n}")
        if not 0.0 <= self.alpha < 1.0:
            raise RnnError(f"alpha: must be in [0, 1), got {self.alpha!r}")
        if not 0.0 <= self.explore <= 1.0:
            raise RnnError(f"explore: must be in [0, 1], got {self.explore!r}")
        if not (self.initial_weight > 0 and self.ext_plus > 0 and self.ext_minus >= 0):
            raise RnnError("initial_weight and ext_plus must be > 0, ext_minus >= 0")
        off_diagonal = 1.0 - np.eye(self.n)
        self.w_plus = self.initial_weight * off_diagonal
        self.w_minus = self.initial_weight * off_diagonal
        self._rng = random.Random(self.seed)
        self.q = self._solve()

    def firing_rates(self) -> npt.NDArray[np.float64]:
        """r_i = sum_j W+[i][j] + W-[i][j]; learning keeps these constant."""
        return self.w_plus.sum(axis=1) + self.w_minus.sum(axis=1)

    def _solve(self) -> npt.NDArray[np.float64]:
        q0 = getattr(self, "q", None)
        return excitation(self.w_plus, self.w_minus, np.full(self.n, self.ext_plus),
                          np.full(self.n, self.ext_minus), q0)

    def best(self) -> int:
        """The most excited neuron (ties to the lowest index)."""
        return int(np.argmax(self.q))

    def choose(self) -> int:
        """The option to try next: the most excited neuron, or with `explore` a random one."""
        if self.explore > 0 and self._rng.random() < self.explore:
            return self._rng.randrange(self.n)
        return self.best()

    def learn(self, chosen: int, reward: float) -> None:
        """Update the weights for the reward that option `chosen` earned, then q and T."""
        if not 0 <= chosen < self.n:
            raise RnnError(f"chosen: option {chosen} is not in 0..{self.n - 1}")
        if not (math.isfinite(reward) and reward >= 0):
            raise RnnError(f"reward: must be finite and >= 0, got {reward!r}")
        if self.threshold is None:  # nothing to compare the first reward with
            self.threshold = reward
            return
        rates = self.firing_rates()
        boost, damp = (self.w_plus, self.w_minus) if reward >= self.threshold \
            else (self.w_minus, self.w_plus)
        rest = np.arange(self.n) != chosen  # every neuron i but the chosen j
        boost[rest, chosen] += reward
        if self.n > 2:  # W[i][m] for m not in {i, j}: off the diagonal of the rest's block
            damp[np.ix_(rest, rest)] += reward / (self.n - 2) * (1.0 - np.eye(self.n - 1))
        new_rates = self.firing_rates()
        scale = (rates / new_rates)[:, None]
        self.w_plus *= scale
        self.w_minus *= scale
        self.threshold = self.alpha * self.threshold + (1.0 - self.alpha) * reward
        self.q = self._solve()


class LearnerJson(TypedDict):
    """`learner_to_json`: an `RnnLearner`'s parameters, weights (n x n) and threshold."""

    n: int
    alpha: float
    explore: float
    seed: int
    ext_plus: float
    ext_minus: float
    w_plus: list[list[float]]
    w_minus: list[list[float]]
    threshold: float | None


def learner_to_json(learner: RnnLearner) -> LearnerJson:
    """The learner as plain JSON (weights, threshold, parameters): what a trained agent saves."""
    return {"n": learner.n, "alpha": learner.alpha, "explore": learner.explore,
            "seed": learner.seed, "ext_plus": learner.ext_plus, "ext_minus": learner.ext_minus,
            "w_plus": learner.w_plus.tolist(), "w_minus": learner.w_minus.tolist(),
            "threshold": learner.threshold}


def learner_from_json(d: Mapping[str, object], n: int) -> RnnLearner:
    """A learner saved by `learner_to_json`, for `n` options; RnnError if it does not fit
    (KeyError, TypeError, ValueError for a field that is missing or not a number)."""
    learner = RnnLearner(json_int(d["n"]), alpha=json_float(d["alpha"]),
                         explore=json_float(d["explore"]), seed=json_int(d["seed"]),
                         ext_plus=json_float(d["ext_plus"]), ext_minus=json_float(d["ext_minus"]))
    if learner.n != n:
        raise RnnError(f"learner has {learner.n} neurons for {n} menu entries")
    learner.w_plus = np.asarray(d["w_plus"], dtype=np.float64).reshape(n, n)
    learner.w_minus = np.asarray(d["w_minus"], dtype=np.float64).reshape(n, n)
    learner.threshold = None if d["threshold"] is None else json_float(d["threshold"])
    learner.q = learner._solve()
    return learner

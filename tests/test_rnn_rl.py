"""The seed's random-neural-network learner: bandits, a switch of the best arm, invariants."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from fogsdn.models.rnn_learner import RnnError, RnnLearner, excitation

BEFORE = (1.0, 1.5, 1.2, 0.8)  # mean reward per arm; arm 1 is best
AFTER = (1.0, 0.8, 1.2, 1.6)  # after the switch, arm 3 is best


def play(learner: RnnLearner, means: tuple[float, ...], steps: int, rng: random.Random
         ) -> list[int]:
    picks = []
    for _ in range(steps):
        arm = learner.choose()
        picks.append(arm)
        learner.learn(arm, max(0.0, rng.gauss(means[arm], 0.2)))
    return picks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_converges_to_the_best_arm_of_a_stationary_bandit(seed: int) -> None:
    learner, rng = RnnLearner(4, seed=seed), random.Random(seed)
    play(learner, BEFORE, 1000, rng)
    late = Counter(play(learner, BEFORE, 500, rng))
    assert late.most_common(1)[0][0] == 1
    assert late[1] / 500 > 0.5  # uniform choice would give 0.25


@pytest.mark.parametrize("seed", [0, 3])
def test_tracks_a_switch_of_the_best_arm(seed: int) -> None:
    learner, rng = RnnLearner(4, seed=seed, explore=0.05), random.Random(seed)
    play(learner, BEFORE, 1500, rng)
    play(learner, AFTER, 1000, rng)
    late = Counter(play(learner, AFTER, 500, rng))
    assert late.most_common(1)[0][0] == 3
    assert late[3] / 500 > 0.5


def test_weights_stay_non_negative_and_firing_rates_constant() -> None:
    learner, rng = RnnLearner(5, seed=7, explore=0.2), random.Random(7)
    rates = learner.firing_rates().copy()
    for _ in range(300):
        arm = learner.choose()
        learner.learn(arm, rng.uniform(0.0, 3.0))
        assert (learner.w_plus >= 0).all() and (learner.w_minus >= 0).all()
        assert np.allclose(learner.firing_rates(), rates)
        assert np.all(np.diag(learner.w_plus) == 0) and np.all(np.diag(learner.w_minus) == 0)


def test_reward_excites_and_punishment_inhibits_the_chosen_neuron() -> None:
    learner = RnnLearner(3)
    learner.learn(0, 1.0)  # sets the threshold only
    q_before = learner.q[0]
    learner.learn(0, 2.0)  # above the threshold: reward
    assert learner.q[0] > q_before and learner.best() == 0
    assert learner.threshold == pytest.approx(0.8 * 1.0 + 0.2 * 2.0)
    q_rewarded = learner.q[0]
    learner.learn(0, 0.5)  # below: punishment
    assert learner.q[0] < q_rewarded


def test_two_options_learn_without_the_other_neurons_share() -> None:
    learner, rng = RnnLearner(2, seed=1), random.Random(1)
    play(learner, (0.5, 1.5), 500, rng)
    assert Counter(play(learner, (0.5, 1.5), 200, rng)).most_common(1)[0][0] == 1


def test_excitation_solves_the_fixed_point() -> None:
    rng = np.random.default_rng(3)
    w_plus, w_minus = rng.uniform(0, 1, (4, 4)), rng.uniform(0, 1, (4, 4))
    np.fill_diagonal(w_plus, 0)
    np.fill_diagonal(w_minus, 0)
    lam_plus, lam_minus = np.full(4, 0.3), np.full(4, 0.1)
    q = excitation(w_plus, w_minus, lam_plus, lam_minus)
    rates = w_plus.sum(axis=1) + w_minus.sum(axis=1)
    expected = (lam_plus + q @ w_plus) / (rates + lam_minus + q @ w_minus)
    assert np.allclose(q, np.minimum(1.0, expected), atol=1e-9)
    assert ((q >= 0) & (q <= 1)).all()


def test_deterministic_for_a_seed() -> None:
    a = play(RnnLearner(4, seed=5, explore=0.1), BEFORE, 300, random.Random(5))
    b = play(RnnLearner(4, seed=5, explore=0.1), BEFORE, 300, random.Random(5))
    assert a == b


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"n": 1}, "n"), ({"n": 3, "alpha": 1.0}, "alpha"), ({"n": 3, "explore": 2.0}, "explore")])
def test_bad_parameters_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(RnnError, match=field):
        RnnLearner(**kwargs)  # type: ignore[arg-type]


def test_bad_inputs_name_the_cause() -> None:
    learner = RnnLearner(3)
    with pytest.raises(RnnError, match="chosen"):
        learner.learn(3, 1.0)
    with pytest.raises(RnnError, match="reward"):
        learner.learn(0, float("nan"))

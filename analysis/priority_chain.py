"""Seed 000's FN under preemptive HP priority, exactly (issue 22).

With exponential service and preempt-resume, the FN serves whatever it holds at rate
mu whatever the order, so its total count (and every class's blocking: capacity
counts both) is the FIFO chain's. Per class it is not: the FN's state becomes
(a, h, l), HP and LP held, served HP first. A tagged HP finds h HP ahead and no one
can pass it (an LP never, a later HP queues behind), so its response is Erlang(h+1,
mu). A tagged LP waits for the h HP and l LP ahead and for every HP that arrives
before it is done (each preempts it); HP arrivals are blocked when the FN is full,
which counts the LP that came after it, so its chain is (a, h, ahead, behind).
That is exact under `drain` and `drop`, where the FN's counts are a chain of their own;
a handoff moves tasks into the FN and is outside this model. Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from analysis import linsolve
from analysis.response_time import AbsorbingChain, ErlangMixture, TransientChain

# the FN disciplines the closed chain has; fifo is `analysis.ctmc`'s own
DISCIPLINES_F: tuple[str, ...] = ("fifo", "priority_preemptive")


def _generator(rows: list[int], cols: list[int], vals: list[float], n: int) -> sp.csr_matrix:
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    Q.sum_duplicates()
    return Q


def fn_class_stationary(lam_hp: np.ndarray, lam_lp: np.ndarray, mu: float, cap: int,
                        avail: tuple[int, ...], eta: float, xi: float) -> np.ndarray:
    """P(a, h, l) of the FN under preemptive priority, as an array [2, cap+1, cap+1].

    `lam_hp[a]`, `lam_lp[a]`: each class's arrival rate to the FN in availability a;
    `avail`: the availability states the chain visits (A = 0 leaves at eta, U = 1
    returns at xi, where both are visited)."""
    states = [(a, h, m) for a in avail for h in range(cap + 1) for m in range(cap + 1 - h)]
    index = {s: i for i, s in enumerate(states)}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def add(i: int, to: tuple[int, int, int], rate: float) -> None:
        if rate > 0:
            rows.append(i)
            cols.append(index[to])
            vals.append(rate)

    both = len(avail) == 2
    for i, (a, h, m) in enumerate(states):
        if h + m < cap:
            add(i, (a, h + 1, m), lam_hp[a])
            add(i, (a, h, m + 1), lam_lp[a])
        if h > 0:
            add(i, (a, h - 1, m), mu)
        elif m > 0:
            add(i, (a, h, m - 1), mu)
        if both:
            add(i, (1 - a, h, m), eta if a == 0 else xi)
    Q = _generator(rows, cols, vals, len(states))
    out = np.asarray(Q.sum(axis=1)).ravel()
    pi, _ = linsolve.checked_stationary((Q - sp.diags(out)).tocsr())  # state 0: empty
    p = np.zeros((2, cap + 1, cap + 1))
    for (a, h, m), v in zip(states, pi, strict=True):
        p[a, h, m] = v
    return p


def hp_component(p_ahl: np.ndarray, route_hp: np.ndarray, mu: float) -> ErlangMixture | None:
    """A tagged HP at the FN: h HP ahead, Erlang(h+1, mu); weights per arrival."""
    cap = p_ahl.shape[1] - 1
    w = np.zeros(cap)
    for a in (0, 1):
        for h in range(cap):
            w[h] += route_hp[a] * p_ahl[a, h, : cap - h].sum()
    return ErlangMixture(w, mu) if w.sum() > 0 else None


def lp_component(p_ahl: np.ndarray, route_lp: np.ndarray, lam_hp: np.ndarray,
                 lam_lp: np.ndarray, mu: float, avail: tuple[int, ...], eta: float,
                 xi: float) -> AbsorbingChain | None:
    """A tagged LP at the FN, followed through (a, h, ahead, behind) until it is served."""
    cap = p_ahl.shape[1] - 1
    states = [(a, h, m, b) for a in avail for h in range(cap) for m in range(cap - h)
              for b in range(cap - h - m)]  # h + m + b + 1 <= cap: the tagged one counts
    n = len(states)
    index = {s: i for i, s in enumerate(states)}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    done = np.zeros(n)
    v0 = np.zeros(n)
    both = len(avail) == 2

    def add(i: int, to: tuple[int, int, int, int], rate: float) -> None:
        if rate > 0:
            rows.append(i)
            cols.append(index[to])
            vals.append(rate)

    for i, (a, h, m, b) in enumerate(states):
        if b == 0 and route_lp[a] > 0:
            v0[i] = route_lp[a] * p_ahl[a, h, m]
        if h + m + b + 1 < cap:
            add(i, (a, h + 1, m, b), lam_hp[a])
            add(i, (a, h, m, b + 1), lam_lp[a])
        if h > 0:
            add(i, (a, h - 1, m, b), mu)
        elif m > 0:
            add(i, (a, h, m - 1, b), mu)
        else:
            done[i] = mu
        if both:
            add(i, (1 - a, h, m, b), eta if a == 0 else xi)
    if v0.sum() <= 0:
        return None
    T = _generator(rows, cols, vals, n)
    out = np.asarray(T.sum(axis=1)).ravel() + done
    chain = TransientChain(T, out, done, np.zeros(n))
    return AbsorbingChain(chain, v0)


def fn_class_components(lam_hp: np.ndarray, lam_lp: np.ndarray, route_hp: np.ndarray,
                        route_lp: np.ndarray, mu: float, cap: int, avail: tuple[int, ...],
                        eta: float, xi: float
                        ) -> tuple[ErlangMixture | None, AbsorbingChain | None]:
    """The FN's part of each class's response under preemptive priority: (HP, LP).

    `lam_*[a]` are the class's rates into the FN, `route_*[a]` the share of the class's
    arrivals sent there (per arrival weights), both per availability a."""
    p = fn_class_stationary(lam_hp, lam_lp, mu, cap, avail, eta, xi)
    return (hp_component(p, route_hp, mu),
            lp_component(p, route_lp, lam_hp, lam_lp, mu, avail, eta, xi))


__all__ = ["DISCIPLINES_F", "fn_class_components", "fn_class_stationary", "hp_component",
           "lp_component"]

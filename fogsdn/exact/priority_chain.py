"""Seed 000's FN under a class discipline, exactly (issue 22).

Every discipline here is work-conserving with exponential service, so the FN's total
count and every class's blocking are the FIFO chain's; per class they are not, and a
tagged request is followed through the discipline's own state (docs/model.md, "The FN
under a class discipline"). Exact under `drain` and `drop`; a handoff moves tasks into
the FN and is outside this model. Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fogsdn.exact import linsolve
from fogsdn.exact.response_time import AbsorbingChain, Component, ErlangMixture, TransientChain

# the FN disciplines the closed chain has; fifo is `fogsdn.exact.ctmc`'s own
DISCIPLINES_F: tuple[str, ...] = ("fifo", "round_robin", "priority", "priority_preemptive")
HP, LP = 0, 1


def next_class(discipline: str, last: int, hp_waiting: bool, lp_waiting: bool) -> int | None:
    """The class a non-preemptive discipline serves after a completion of class `last`
    (None: nothing waits); `ClassQueue._pick`'s rule."""
    if not hp_waiting and not lp_waiting:
        return None
    if not lp_waiting:
        return HP
    if not hp_waiting:
        return LP
    if discipline == "round_robin":
        return LP if last == HP else HP
    return HP  # priority


class _Rates:
    """A chain's rates gathered one transition at a time (zero rates skipped), from state
    `i` to a state (looked up in `index`) or to a state number; then as a matrix."""

    def __init__(self, index: dict[tuple[int, ...], int], n: int) -> None:
        self.index, self.n = index, n
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []

    def add(self, i: int, to: int | tuple[int, ...], rate: float) -> None:
        if rate > 0:
            self.rows.append(i)
            self.cols.append(to if isinstance(to, int) else self.index[to])
            self.vals.append(rate)

    def matrix(self) -> sp.csr_matrix:
        """The off-diagonal rates (duplicates summed)."""
        Q = sp.csr_matrix((self.vals, (self.rows, self.cols)), shape=(self.n, self.n))
        Q.sum_duplicates()
        return Q

    def stationary(self) -> np.ndarray:
        """The stationary vector of the chain these rates make (state 0: empty)."""
        return linsolve.checked_stationary(linsolve.rates_generator(self.matrix()))[0]

    def absorbing(self, done: np.ndarray, v0: np.ndarray) -> AbsorbingChain:
        """A tagged request that starts with weights `v0` and is served at rates `done`."""
        T = self.matrix()
        out = np.asarray(T.sum(axis=1)).ravel() + done
        return AbsorbingChain(TransientChain(T, out, done, np.zeros(self.n)), v0)


def fn_class_stationary(lam_hp: np.ndarray, lam_lp: np.ndarray, mu: float, cap: int,
                        avail: tuple[int, ...], eta: float, xi: float) -> np.ndarray:
    """P(a, h, l) of the FN under preemptive priority, as an array [2, cap+1, cap+1].

    `lam_hp[a]`, `lam_lp[a]`: each class's arrival rate to the FN in availability a;
    `avail`: the availability states the chain visits (A = 0 leaves at eta, U = 1
    returns at xi, where both are visited)."""
    states = [(a, h, m) for a in avail for h in range(cap + 1) for m in range(cap + 1 - h)]
    rates = _Rates({s: i for i, s in enumerate(states)}, len(states))
    add = rates.add
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
    p = np.zeros((2, cap + 1, cap + 1))
    p[tuple(np.array(states).T)] = rates.stationary()
    return p


def fn_class_service_stationary(lam_hp: np.ndarray, lam_lp: np.ndarray, mu: float, cap: int,
                                avail: tuple[int, ...], eta: float, xi: float,
                                discipline: str) -> np.ndarray:
    """P(a, h, l, s) of the FN under a non-preemptive class discipline, as an array
    [2, cap+1, cap+1, 2]; s is the class in service (HP on the empty state)."""
    states = [(a, h, m, c) for a in avail for h in range(cap + 1) for m in range(cap + 1 - h)
              for c in (HP, LP)
              if (h == m == 0 and c == HP) or (c == HP and h > 0) or (c == LP and m > 0)]
    rates = _Rates({st: i for i, st in enumerate(states)}, len(states))
    add = rates.add
    both = len(avail) == 2
    for i, (a, h, m, c) in enumerate(states):
        if h + m < cap:
            empty = h + m == 0
            add(i, (a, h + 1, m, HP if empty else c), lam_hp[a])
            add(i, (a, h, m + 1, LP if empty else c), lam_lp[a])
        if h + m > 0:
            h2, m2 = h - (c == HP), m - (c == LP)
            nxt = next_class(discipline, c, h2 > 0, m2 > 0)
            add(i, (a, h2, m2, HP if nxt is None else nxt), mu)
        if both:
            add(i, (1 - a, h, m, c), eta if a == 0 else xi)
    p = np.zeros((2, cap + 1, cap + 1, 2))
    p[tuple(np.array(states).T)] = rates.stationary()
    return p


def tagged_component(p_ahls: np.ndarray, cls: int, route: np.ndarray, lam_hp: np.ndarray,
                     lam_lp: np.ndarray, mu: float, avail: tuple[int, ...], eta: float,
                     xi: float, discipline: str) -> AbsorbingChain | None:
    """A tagged request of class `cls` (X; Y the other) at the FN under a non-preemptive
    discipline: (a, X waiting ahead, Y held, X behind, class in service) while it waits,
    then one state for its own service. X behind never goes first, but counts for
    capacity (it blocks later arrivals that would)."""
    cap = p_ahls.shape[1] - 1
    x, y = cls, 1 - cls
    lam_x = lam_hp if x == HP else lam_lp
    lam_y = lam_lp if x == HP else lam_hp
    states = [(a, xa, yy, xb, c) for a in avail for c in (x, y) for xa in range(cap)
              for yy in range(cap - xa) for xb in range(cap - xa - yy)
              if (c == y and yy >= 1 and xa + yy + xb + 1 <= cap)
              or (c == x and xa + 1 + yy + xb + 1 <= cap)]
    n = len(states) + 1
    serving = n - 1  # the tagged one in service: done at rate mu
    index: dict[tuple[int, ...], int] = {st: i for i, st in enumerate(states)}
    rates = _Rates(index, n)
    add = rates.add
    done = np.zeros(n)
    done[serving] = mu
    v0 = np.zeros(n)
    both = len(avail) == 2

    def after(a: int, xa: int, yy: int, xb: int, last: int) -> int:
        """Where a completion of class `last` leaves it (Y held `yy`, X ahead `xa`)."""
        hp_wait, lp_wait = (True, yy > 0) if x == HP else (yy > 0, True)
        nxt = next_class(discipline, last, hp_wait, lp_wait)
        if nxt == y:
            return index[(a, xa, yy, xb, y)]
        return index[(a, xa - 1, yy, xb, x)] if xa > 0 else serving

    for i, (a, xa, yy, xb, c) in enumerate(states):
        total = xa + (c == x) + yy + xb + 1
        if total < cap:
            add(i, index[(a, xa, yy, xb + 1, c)], lam_x[a])
            add(i, index[(a, xa, yy + 1, xb, c)], lam_y[a])
        if c == x:
            add(i, after(a, xa, yy, xb, x), mu)
        else:
            add(i, after(a, xa, yy - 1, xb, y), mu)
        if both:
            add(i, index[(1 - a, xa, yy, xb, c)], eta if a == 0 else xi)
    for a in avail:  # PASTA: an arrival finds (a, h, l, s) with room
        if route[a] <= 0:
            continue
        for h in range(cap + 1):
            for m in range(cap - h):
                nx, ny = (h, m) if x == HP else (m, h)
                for c in (HP, LP):
                    w = route[a] * p_ahls[a, h, m, c]
                    if w <= 0:
                        continue
                    if h + m == 0:
                        v0[serving] += w
                    elif c == x:
                        v0[index[(a, nx - 1, ny, 0, x)]] += w
                    else:
                        v0[index[(a, nx, ny, 0, y)]] += w
    return rates.absorbing(done, v0) if v0.sum() > 0 else None


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
    rates = _Rates({s: i for i, s in enumerate(states)}, n)
    add = rates.add
    done = np.zeros(n)
    v0 = np.zeros(n)
    both = len(avail) == 2
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
    return rates.absorbing(done, v0) if v0.sum() > 0 else None


def fn_class_components(lam_hp: np.ndarray, lam_lp: np.ndarray, route_hp: np.ndarray,
                        route_lp: np.ndarray, mu: float, cap: int, avail: tuple[int, ...],
                        eta: float, xi: float, discipline: str = "priority_preemptive"
                        ) -> tuple[Component | None, Component | None]:
    """The FN's part of each class's response under `discipline`: (HP, LP). Per
    availability a, `lam_*[a]` is the class's rate into the FN, `route_*[a]` its share."""
    if discipline == "priority_preemptive":
        p = fn_class_stationary(lam_hp, lam_lp, mu, cap, avail, eta, xi)
        return (hp_component(p, route_hp, mu),
                lp_component(p, route_lp, lam_hp, lam_lp, mu, avail, eta, xi))
    if discipline not in ("round_robin", "priority"):
        raise ValueError(f"no class chain for discipline {discipline!r}")
    q = fn_class_service_stationary(lam_hp, lam_lp, mu, cap, avail, eta, xi, discipline)
    return tuple(  # type: ignore[return-value]
        tagged_component(q, c, route, lam_hp, lam_lp, mu, avail, eta, xi, discipline)
        for c, route in ((HP, route_hp), (LP, route_lp)))


__all__ = ["DISCIPLINES_F", "fn_class_components", "fn_class_service_stationary",
           "fn_class_stationary", "hp_component", "lp_component", "next_class",
           "tagged_component"]

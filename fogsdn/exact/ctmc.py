"""Exact CTMC of seed 000: one static FN and one opportunistic FN (OFN) that comes and goes.

The state is (a, n_F, n_O); the seed's own chain counts one node per state and is wrong
(docs/model.md). Under `drain` and `drop` the chain is exactly lumpable onto (a, n_F) and
(a, n_O); `handoff` couples the nodes and needs the joint chain. Pure: no I/O.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from fogsdn.exact import linsolve
from fogsdn.exact.class_prediction import CLASSES, ClassPair, ClassPrediction, ModelError
from fogsdn.exact.linsolve import (
    GTH_MAX_FLOPS,
    A,
    Chain,
    U,
    checked_sparse,
    gth_levels,
    joint_method,
)
from fogsdn.exact.priority_chain import DISCIPLINES_F, fn_class_components
from fogsdn.exact.response_time import ClassResponse, Component, ErlangMixture
from fogsdn.exact.two_node_handoff import HandoffChain

Scheme = Literal["proposed", "nodiff", "basic"]
Leave = Literal["drain", "handoff", "drop"]
ServersKind = Literal["single", "multi"]
Method = Literal["auto", "lumped", "joint", "gth", "sparse"]

SCHEMES: tuple[str, ...] = ("proposed", "nodiff", "basic")
LEAVES: tuple[str, ...] = ("drain", "handoff", "drop")
SERVERS: tuple[str, ...] = ("single", "multi")


@dataclass(frozen=True)
class ModelParams:
    """Everything the chain depends on; rates per model ms, capacities in requests.

    `servers_*`: `single` (one FIFO server) or `multi` (C servers, no waiting room).
    `initial_available`: the OFN's state when eta = xi = 0. `discipline_f`: the FN's
    order (`fogsdn.exact.priority_chain`).
    """

    scheme: Scheme
    lam_hp: float
    lam_lp: float
    mu_f: float
    mu_of: float
    cap_f: int
    cap_o: int
    eta: float
    xi: float
    alpha: float = 0.5
    leave: Leave = "drain"
    servers_f: ServersKind = "single"
    servers_o: ServersKind = "single"
    deadline: float = 30.0
    initial_available: bool = True
    discipline_f: str = "fifo"

    def __post_init__(self) -> None:
        validate(self)

    @property
    def lam(self) -> float:
        return self.lam_hp + self.lam_lp

    @property
    def has_ofn(self) -> bool:
        return self.scheme != "basic"

    def n_states(self) -> int:
        """Size of the joint chain (recurrent availability states only)."""
        nf, no = self.cap_f + 1, (self.cap_o + 1) if self.has_ofn else 1
        return sum(nf * (no if (a == A or self.leave == "drain") else 1)
                   for a in availability_states(self))


def _finite_nonneg(name: str, x: float) -> None:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        raise ModelError(f"{name} must be a finite number, got {x!r}")
    if x < 0:
        raise ModelError(f"{name} must be >= 0, got {x}")


def validate(p: ModelParams) -> None:
    """Raise ModelError for parameters no chain can have (one line, names the field)."""
    if p.scheme not in SCHEMES:
        raise ModelError(f"scheme must be one of {', '.join(SCHEMES)}, got {p.scheme!r}")
    if p.leave not in LEAVES:
        raise ModelError(f"leave must be one of {', '.join(LEAVES)}, got {p.leave!r}")
    for name in ("servers_f", "servers_o"):
        if getattr(p, name) not in SERVERS:
            raise ModelError(f"{name} must be single or multi, got {getattr(p, name)!r}")
    for name in ("lam_hp", "lam_lp", "mu_f", "mu_of", "eta", "xi", "alpha", "deadline"):
        _finite_nonneg(name, getattr(p, name))
    if p.lam <= 0:
        raise ModelError("lam_hp + lam_lp must be positive")
    if p.mu_f <= 0:
        raise ModelError(f"mu_f must be > 0, got {p.mu_f}")
    if not 0.0 <= p.alpha <= 1.0:
        raise ModelError(f"alpha must be in [0, 1], got {p.alpha}")
    if p.deadline <= 0:
        raise ModelError(f"deadline must be > 0, got {p.deadline}")
    for name in ("cap_f", "cap_o"):
        v = getattr(p, name)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ModelError(f"{name} must be an integer, got {v!r}")
    if p.cap_f < 1:
        raise ModelError(f"cap_f must be >= 1, got {p.cap_f}")
    if p.scheme != "basic":
        if p.cap_o < 1:
            raise ModelError(f"cap_o must be >= 1 for scheme {p.scheme}, got {p.cap_o}")
        if p.mu_of <= 0:
            raise ModelError(f"mu_of must be > 0 for scheme {p.scheme}, got {p.mu_of}")
    elif p.cap_o < 0:
        raise ModelError(f"cap_o must be >= 0, got {p.cap_o}")
    if p.discipline_f not in DISCIPLINES_F:
        raise ModelError(f"discipline_f must be one of {', '.join(DISCIPLINES_F)}, "
                         f"got {p.discipline_f!r}")
    if p.discipline_f != "fifo":
        if p.servers_f != "single":
            raise ModelError(f"discipline_f {p.discipline_f} needs servers_f single")
        if p.leave == "handoff" and p.has_ofn and len(availability_states(p)) == 2:
            raise ModelError(f"discipline_f {p.discipline_f}: a handoff moves tasks into "
                             "the FN; the model has it under drain and drop")


# -- rates ---------------------------------------------------------------------------


def p_available(p: ModelParams) -> float:
    """Long-run share of time the OFN is in range (A)."""
    if p.eta == 0 and p.xi == 0:
        return 1.0 if p.initial_available else 0.0
    if p.eta == 0:
        return 1.0
    if p.xi == 0:
        return 0.0
    return p.xi / (p.eta + p.xi)


def availability_states(p: ModelParams) -> tuple[int, ...]:
    """The availability states the chain keeps visiting (the other is transient)."""
    if not p.has_ofn:
        return (A,)  # one dummy phase: nothing depends on availability
    pa = p_available(p)
    if pa == 1.0:
        return (A,)
    if pa == 0.0:
        return (U,)
    return (A, U)


def routing(p: ModelParams, cls: str) -> tuple[np.ndarray, np.ndarray]:
    """Probability that a `cls` arrival is sent to the FN / the OFN, per availability."""
    if cls not in CLASSES:
        raise ModelError(f"class must be hp or lp, got {cls!r}")
    if p.scheme == "basic" or (p.scheme == "proposed" and cls == "hp"):
        return np.array([1.0, 1.0]), np.array([0.0, 0.0])
    if p.scheme == "proposed":  # LP to the OFN while it is there
        return np.array([0.0, 1.0]), np.array([1.0, 0.0])
    return np.array([p.alpha, 1.0]), np.array([1.0 - p.alpha, 0.0])


def arrival_rates(p: ModelParams) -> tuple[np.ndarray, np.ndarray]:
    """Arrival rate to the FN and to the OFN, per availability (index A, U)."""
    lf = np.zeros(2)
    lo = np.zeros(2)
    for cls, lam in (("hp", p.lam_hp), ("lp", p.lam_lp)):
        rf, ro = routing(p, cls)
        lf += lam * rf
        lo += lam * ro
    return lf, lo


def service_rates(mu: float, cap: int, kind: str) -> np.ndarray:
    """Completion rate with n requests held, n = 0..cap."""
    n = np.arange(cap + 1, dtype=float)
    return mu * n if kind == "multi" else mu * (n >= 1)


# -- state space and generator --------------------------------------------------------


def build_chain(p: ModelParams, cap_f: int, cap_o: int, levels: Literal["fn", "ofn"]) -> Chain:
    """The chain over (a, n_F <= cap_f, n_O <= cap_o), its levels numbered by n_F or n_O.

    cap_o = 0 gives the lumped FN chain (drain, drop), cap_f = 0 the lumped OFN chain
    (any leave mode: a handoff with no room at the FN is a drop).
    """
    avail = availability_states(p)
    lf, lo = arrival_rates(p)
    sf = service_rates(p.mu_f, cap_f, p.servers_f)
    so = service_rates(p.mu_of, cap_o, p.servers_o) if cap_o > 0 else np.zeros(1)
    both = len(avail) == 2

    aa, kk, nn = [], [], []
    for a in avail:
        n_max = cap_o if (a == A or p.leave == "drain") else 0
        k_grid, n_grid = np.meshgrid(np.arange(cap_f + 1), np.arange(n_max + 1), indexing="ij")
        aa.append(np.full(k_grid.size, a))
        kk.append(k_grid.ravel())
        nn.append(n_grid.ravel())
    a_s, k_s, n_s = np.concatenate(aa), np.concatenate(kk), np.concatenate(nn)
    level = k_s if levels == "fn" else n_s
    # within a level: availability, then the other count
    other = n_s if levels == "fn" else k_s
    order = np.lexsort((other, a_s, level))
    a_s, k_s, n_s, level = a_s[order], k_s[order], n_s[order], level[order]
    size = a_s.size
    index = np.full((2, cap_f + 1, cap_o + 1), -1, dtype=np.int64)
    index[a_s, k_s, n_s] = np.arange(size)

    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []

    def add(mask: np.ndarray, a2: np.ndarray, k2: np.ndarray, n2: np.ndarray,
            rate: np.ndarray) -> None:
        src = np.nonzero(mask & (rate > 0))[0]
        if src.size == 0:
            return
        dst = index[a2[src], k2[src], n2[src]]
        assert (dst >= 0).all(), "transition out of the state space"
        rows.append(src)
        cols.append(dst)
        vals.append(rate[src])

    add(k_s < cap_f, a_s, k_s + 1, n_s, lf[a_s])  # FN arrival
    add(k_s >= 1, a_s, k_s - 1, n_s, sf[k_s])  # FN completion
    if cap_o > 0:
        add((a_s == A) & (n_s < cap_o), a_s, k_s, n_s + 1, lo[a_s])  # OFN arrival
        add(n_s >= 1, a_s, k_s, n_s - 1, so[n_s])  # OFN completion (drain: in U too)
    if both:
        is_a = a_s == A
        # drain keeps the OFN's requests, drop loses them, handoff moves them to the FN
        k_to = np.minimum(k_s + n_s, cap_f) if p.leave == "handoff" else k_s
        n_to = n_s if p.leave == "drain" else np.zeros_like(n_s)
        add(is_a, np.full(size, U), k_to, n_to, np.full(size, p.eta))
        add(~is_a, np.full(size, A), k_s, n_s, np.full(size, p.xi))
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    v = np.concatenate(vals) if vals else np.zeros(0)
    Q = sp.csr_matrix((v, (r, c)), shape=(size, size))
    Q.sum_duplicates()
    n_levels = int(level.max()) + 1
    starts = np.searchsorted(level, np.arange(n_levels + 1))
    hub = levels == "ofn" and p.leave != "drain" and both
    return Chain(Q=Q, a=a_s, k=k_s, n=n_s, starts=starts, hub=hub)


@dataclass(frozen=True)
class Stationary:
    """Stationary probabilities the metrics need: `p_fn[a, k]` = P(a, n_F = k),
    `p_ofn[a, n]` = P(a, n_O = n), and (handoff only) `joint_a[k, n]` = P(A, k, n)."""

    p_fn: np.ndarray
    p_ofn: np.ndarray
    joint_a: np.ndarray | None
    method: str
    n_states: int


def lumpable(p: ModelParams) -> bool:
    """True when (a, n_F) and (a, n_O) are Markov chains on their own: only a handoff
    (with churn) moves requests between the nodes."""
    return p.leave != "handoff" or len(availability_states(p)) < 2 or not p.has_ofn


def _marginals(chain: Chain, pi: np.ndarray, cap_f: int, cap_o: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pf = np.zeros((2, cap_f + 1))
    po = np.zeros((2, cap_o + 1))
    ja = np.zeros((cap_f + 1, cap_o + 1))
    np.add.at(pf, (chain.a, chain.k), pi)
    np.add.at(po, (chain.a, chain.n), pi)
    m = chain.a == A
    np.add.at(ja, (chain.k[m], chain.n[m]), pi[m])
    return pf, po, ja


def gth_flops(p: ModelParams, by: str) -> float:
    """Rough cost of level reduction of the joint chain with levels numbered `by`."""
    n = p.n_states()
    cap_o = p.cap_o if p.has_ofn else 0
    levels = (p.cap_f if by == "fn" else cap_o) + 1
    phases = n / levels
    width = 5 if (by == "ofn" and not lumpable(p)) else 3
    return n * 2 * phases * width * phases


def solve_stationary(p: ModelParams, method: Method = "auto") -> Stationary:
    """Stationary distribution by the cheapest exact route for these parameters.

    `lumped`: the two per-node chains; `gth` / `sparse`: the joint chain by level
    reduction / sparse solves; `joint`: the cheaper by `joint_method`, an LU answer
    failing its check redone by GTH where that fits; `auto`: lumped where exact.
    """
    cap_o = p.cap_o if p.has_ofn else 0
    n_states = p.n_states()
    if method == "auto":
        method = "lumped" if lumpable(p) else "joint"
    by: Literal["fn", "ofn"] = "ofn" if (not lumpable(p) or p.cap_f < cap_o) else "fn"
    checked = method == "joint"
    if method == "joint":
        method = joint_method(n_states, gth_flops(p, by))
    if method == "lumped":
        if not lumpable(p):
            raise ModelError("handoff with churn couples the nodes: use the joint chain")
        cf = build_chain(p, p.cap_f, 0, "fn")
        pf, _, _ = _marginals(cf, gth_levels(cf), p.cap_f, 0)
        if cap_o > 0:
            co = build_chain(p, 0, cap_o, "ofn")
            _, po, _ = _marginals(co, gth_levels(co), 0, cap_o)
        else:
            po = pf.sum(axis=1, keepdims=True)
        return Stationary(pf, po, None, "lumped", n_states)
    if method not in ("gth", "sparse"):
        raise ModelError(f"unknown method {method!r}")
    # levels of fewer phases reduce faster; handoff jumps need levels by n_O
    chain = build_chain(p, p.cap_f, cap_o, by)
    route: str = method
    if method == "gth":
        pi = gth_levels(chain)
    else:
        pi, err, route = checked_sparse(chain)
        if checked and err > linsolve.STATIONARY_TOL and gth_flops(p, by) <= GTH_MAX_FLOPS:
            pi, route = gth_levels(chain), "gth"
    pf, po, ja = _marginals(chain, pi, p.cap_f, cap_o)
    return Stationary(pf, po, None if lumpable(p) else ja, route, n_states)


# -- per-class metrics ----------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _priority_fn(p: ModelParams) -> tuple[Component | None, Component | None]:
    """The FN's part of the HP and the LP response under its class discipline."""
    (hp_f, _), (lp_f, _) = routing(p, "hp"), routing(p, "lp")
    return fn_class_components(p.lam_hp * hp_f, p.lam_lp * lp_f, hp_f, lp_f, p.mu_f,
                               p.cap_f, availability_states(p), p.eta, p.xi, p.discipline_f)


def class_response(p: ModelParams, st: Stationary, cls: str) -> ClassResponse:
    """Where an arrival of `cls` goes (PASTA) and what happens to it there."""
    rf, ro = routing(p, cls)
    cf = p.cap_f
    wf = rf @ st.p_fn  # per k: P(sent to FN and finds k there)
    comps: list[Component] = []
    blocking = float(wf[cf])  # the FN's total count: the same under every discipline
    multi_f = p.servers_f == "multi"
    if wf[:cf].sum() > 0 and p.discipline_f != "fifo":
        fn_comp = _priority_fn(p)[CLASSES.index(cls)]
        if fn_comp is not None:
            comps.append(fn_comp)
    elif wf[:cf].sum() > 0:
        w = np.array([wf[:cf].sum()]) if multi_f else wf[:cf]
        comps.append(ErlangMixture(w, p.mu_f))
    if p.has_ofn and ro[A] > 0:
        co = p.cap_o
        wo = ro[A] * st.p_ofn[A]
        blocking += float(wo[co])
        multi_o = p.servers_o == "multi"
        churn = len(availability_states(p)) == 2
        if wo[:co].sum() > 0:
            if p.leave == "handoff" and churn:
                assert st.joint_a is not None
                comps.append(HandoffChain(
                    weights=ro[A] * st.joint_a[:, :co],
                    lam_f=float(arrival_rates(p)[0][A]),
                    serv_f=service_rates(p.mu_f, cf, p.servers_f),
                    mu_f=p.mu_f, mu_o=p.mu_of, eta=p.eta,
                    multi_f=multi_f, multi_o=multi_o,
                ))
            else:
                kill = p.eta if (p.leave == "drop" and churn) else 0.0
                w = np.array([wo[:co].sum()]) if multi_o else wo[:co]
                comps.append(ErlangMixture(w, p.mu_of, kill))
    return ClassResponse(comps, blocking)


@dataclass(frozen=True)
class Prediction(ClassPair):
    """The model's answer for one parameter set."""

    params: ModelParams
    stationary: Stationary
    hp: ClassPrediction
    lp: ClassPrediction

    @property
    def p_available(self) -> float:
        return p_available(self.params)

    @property
    def mean_fn(self) -> float:
        pf = self.stationary.p_fn
        return float(pf.sum(axis=0) @ np.arange(pf.shape[1]))

    @property
    def mean_ofn(self) -> float:
        po = self.stationary.p_ofn
        return float(po.sum(axis=0) @ np.arange(po.shape[1])) if self.params.has_ofn else 0.0

    def _common(self) -> dict[str, object]:
        return {"p_available": self.p_available, "mean_fn": self.mean_fn,
                "mean_ofn": self.mean_ofn,
                "model": {"chain": "closed", "scheme": self.params.scheme,
                          "states": self.stationary.n_states,
                          "method": self.stationary.method}}


def predict(params: ModelParams, method: Method = "auto") -> Prediction:
    """Exact stationary metrics of both classes (distributions computed lazily)."""
    st = solve_stationary(params, method)
    lam = {"hp": params.lam_hp, "lp": params.lam_lp}
    hp, lp = (ClassPrediction(c, lam[c], class_response(params, st, c), params.deadline)
              for c in CLASSES)
    return Prediction(params, st, hp, lp)

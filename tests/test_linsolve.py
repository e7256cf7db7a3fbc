"""How the exact model picks and checks its stationary solve: the cost rule, each
route against GTH, and the fallback when an LU answer loses digits."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fogsdn.exact import ctmc, joint_chain, linsolve
from fogsdn.exact.ctmc import ModelParams, build_chain, solve_stationary
from fogsdn.exact.linsolve import GTH_MAX_FLOPS, generator, gth_levels, joint_method, nd_order


def params(seed: int, leave: str = "handoff", load: float = 1.0, cf: int = 14,
           co: int = 8) -> ModelParams:
    rng = np.random.default_rng(seed)
    lam = load * rng.uniform(0.1, 0.6, size=2)
    return ModelParams("nodiff", float(lam[0]), float(lam[1]), float(rng.uniform(0.5, 1.5)),
                       float(rng.uniform(0.2, 0.8)), cf, co, float(rng.uniform(0.1, 1.0)),
                       float(rng.uniform(0.1, 1.0)), alpha=float(rng.uniform(0.2, 0.8)),
                       leave=leave)  # type: ignore[arg-type]


def max_rel(a: np.ndarray, ref: np.ndarray) -> float:
    pos = ref > 0
    return float(np.max(np.abs(a[pos] - ref[pos]) / ref[pos]))


# -- the choice rule (pure, on made-up costs) ----------------------------------------


def test_joint_method_takes_the_cheaper_estimate() -> None:
    # GTH 1 us/state and no flop cost against an LU of 1 s fixed: GTH
    assert joint_method(1000, 1e6, gth_per_state=1e-6, gth_per_flop=0.0,
                        lu_fixed=1.0, lu_per_state=0.0) == "gth"
    # the same sizes with GTH at 1 ms/state: the LU
    assert joint_method(1000, 1e6, gth_per_state=1e-3, gth_per_flop=0.0,
                        lu_fixed=1.0, lu_per_state=0.0) == "sparse"
    # flops count: a chain of few states but wide levels goes to the LU
    assert joint_method(100, 1e9, gth_per_state=0.0, gth_per_flop=1e-9,
                        lu_fixed=0.5, lu_per_state=0.0) == "sparse"


def test_joint_method_never_gth_above_its_flop_budget() -> None:
    assert joint_method(10, 2 * GTH_MAX_FLOPS, gth_per_state=0.0, gth_per_flop=0.0,
                        lu_fixed=1.0, lu_per_state=1.0) == "sparse"


def test_measured_constants_pick_the_lu_where_it_was_faster() -> None:
    # bench_analytic --solvers: at 77 and 5,252 states GTH took 3x and 20x the LU's time
    for cf, co in ((10, 5), (100, 50)):
        p = ModelParams("proposed", 0.3, 0.5, 1.0, 0.3, cf, co, 1 / 3, 1 / 3,
                        leave="handoff")
        assert joint_method(p.n_states(), ctmc.gth_flops(p, "ofn")) == "sparse"


# -- each route against GTH ------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("leave", ["drain", "handoff"])
def test_lu_routes_match_gth_entry_by_entry(seed: int, leave: str) -> None:
    p = params(seed, leave)
    chain = build_chain(p, p.cap_f, p.cap_o, "ofn")
    G = generator(chain)
    ref = gth_levels(chain)
    for order in (None, nd_order(chain)):  # minimum degree; nested dissection
        pi, err = linsolve.checked_stationary(G, order)
        assert err < linsolve.STATIONARY_TOL
        assert max_rel(pi, ref) < 1e-11
        assert np.abs(pi @ G).max() < 1e-15
    got = solve_stationary(p, "joint")
    assert got.method == "sparse"
    want = solve_stationary(p, "gth")
    assert np.allclose(got.p_fn, want.p_fn, rtol=1e-11, atol=0)
    assert np.allclose(got.p_ofn, want.p_ofn, rtol=1e-11, atol=0)


@pytest.mark.parametrize("seed", [4, 5])
def test_policy_joint_stationary_matches_dense_gth(seed: int) -> None:
    p = params(seed, "handoff", cf=10, co=6)
    Q = build_chain(p, p.cap_f, p.cap_o, "ofn").Q
    pi, method = joint_chain.joint_stationary(Q)
    assert method == "sparse"
    assert max_rel(pi, linsolve.gth_dense(Q.toarray())) < 1e-11


# -- the check and the fallback ----------------------------------------------------


def overloaded() -> ModelParams:
    """Arrivals at 1.8 against service 1.3: the empty state (the pin) has P ~ 1e-15."""
    return ModelParams("proposed", 0.9, 0.9, 1.0, 0.3, 60, 30, 1 / 3, 1 / 3,
                       leave="handoff")


def test_check_sees_digits_lost_by_pinning_an_unlikely_state() -> None:
    p = overloaded()
    chain = build_chain(p, p.cap_f, p.cap_o, "ofn")
    G = generator(chain)
    ref = gth_levels(chain)
    pinned0 = linsolve.pinned_stationary(G.T.tocsc(), 0)
    # the norm of the residual hides it; the entrywise check does not
    assert np.abs(pinned0 @ G).max() < 1e-12
    assert max_rel(pinned0, ref) > 1e-4
    assert linsolve.stationary_error(G, pinned0) > 1e-4
    # pinned again at the likeliest state, the LU is exact entry by entry
    pi, err = linsolve.checked_stationary(G)
    assert err < linsolve.STATIONARY_TOL
    assert max_rel(pi, ref) < 1e-11


def test_failed_check_falls_back_to_gth(monkeypatch: pytest.MonkeyPatch) -> None:
    p = params(6, "handoff")
    monkeypatch.setattr(linsolve, "STATIONARY_TOL", -1.0)  # every LU answer "bad"
    st = solve_stationary(p, "joint")
    assert st.method == "gth"
    ref = solve_stationary(p, "gth")
    assert np.array_equal(st.p_fn, ref.p_fn)
    # an explicit request for the LU is not second-guessed
    assert solve_stationary(p, "sparse").method == "sparse"
    Q = build_chain(p, p.cap_f, p.cap_o, "ofn").Q
    assert joint_chain.joint_stationary(Q)[1] == "gth"


def test_stationary_error_is_rounding_for_an_exact_vector() -> None:
    # two-state chain: pi = (b, a) / (a + b)
    a, b = 3.0, 1e-9
    G = sp.csr_matrix(np.array([[-a, a], [b, -b]]))
    pi = np.array([b, a]) / (a + b)
    assert linsolve.stationary_error(G, pi) < 1e-15
    assert linsolve.stationary_error(G, pi * np.array([1.0, 1.0 + 1e-6])) > 1e-7


# -- the two-level iterative solve of large chains ----------------------------------


@pytest.mark.parametrize("leave", ["drain", "handoff"])
def test_two_level_matches_gth_in_absolute_terms(leave: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    p = params(7, leave, cf=40, co=20)
    chain = build_chain(p, p.cap_f, p.cap_o, "ofn")
    G = generator(chain)
    ref = gth_levels(chain)
    groups, order = linsolve.coarse_grid(chain)
    assert groups.max() + 1 < G.shape[0] / 3  # 2 x 2 grid points, both availabilities
    got = linsolve.two_level_stationary(G, groups, order)
    assert got is not None
    pi, iterations = got
    assert 0 < iterations < linsolve.TWO_LEVEL_MAXITER
    assert np.abs(pi - ref).max() < 1e-12
    assert np.abs(pi @ G).max() < 1e-13
    assert abs(float(pi @ chain.n) - float(ref @ chain.n)) < 1e-10
    # the route is taken from TWO_LEVEL_MIN_STATES on, and named; not for chains with
    # jumps into level 0 (handoff), where it was measured slower than the LU
    monkeypatch.setattr(linsolve, "TWO_LEVEL_MIN_STATES", 100)
    st = solve_stationary(p, "sparse")
    assert chain.hub == (leave == "handoff")
    assert st.method == ("sparse" if chain.hub else "two-level")
    want = solve_stationary(p, "gth")
    assert np.abs(st.p_fn - want.p_fn).max() < 1e-12


def test_two_level_that_does_not_converge_falls_back_to_the_lu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    p = params(8, "drain", cf=30, co=16)
    monkeypatch.setattr(linsolve, "TWO_LEVEL_MIN_STATES", 100)
    monkeypatch.setattr(linsolve, "TWO_LEVEL_RTOL", 1e-30)  # unreachable
    monkeypatch.setattr(linsolve, "TWO_LEVEL_MAXITER", 2)
    chain = build_chain(p, p.cap_f, p.cap_o, "ofn")
    assert linsolve.two_level_stationary(generator(chain), *linsolve.coarse_grid(chain)) is None
    st = solve_stationary(p, "sparse")
    assert st.method == "sparse"
    want = solve_stationary(p, "gth")
    assert np.allclose(st.p_fn, want.p_fn, rtol=1e-11, atol=0)


def test_two_level_refuses_an_aggregate_of_state_0_alone() -> None:
    p = params(9, "drain")
    chain = build_chain(p, p.cap_f, p.cap_o, "ofn")
    groups = np.ones(chain.Q.shape[0], dtype=np.int64)
    groups[0] = 0  # aggregate 0 empties when state 0 is pinned
    assert linsolve.two_level_stationary(generator(chain), groups) is None

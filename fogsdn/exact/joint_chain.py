"""The joint chain of a policy: the availability of each OFN and the count at each node,
in mixed radix, with its generator built from the policy's answers and its stationary
vector (a checked sparse LU, GTH where the LU lost digits, BiCGSTAB when large; pure)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fogsdn.core.scenario import LeaveMode, Role
from fogsdn.exact import linsolve
from fogsdn.exact.linsolve import gth_dense, joint_method
from fogsdn.exact.policy_chain_model import PolicyModel, service_rate
from fogsdn.exact.policy_probe import PolicyOracle

# Chains above this many states (joint states, plus the tagged chains' unknowns under
# handoff) are refused: about a minute here (docs/model.md).
MAX_STATES = 200_000
# Dense GTH (O(N^3)) is tried up to this many states, where the cost model picks it or
# the sparse LU's check fails.
GTH_MAX_STATES = 1_500


class StateSpaceTooLarge(ValueError):
    """More states than this machine solves in under a minute; the message gives both."""


def too_large_message(n: int, limit: int = MAX_STATES) -> str:
    return (f"{n:,} states: above the {limit:,} this machine solves in under a minute "
            "(scripts/bench_analytic.py --policy-chain)")


@dataclass
class JointChain:
    """The joint state space in mixed radix over the nodes' local phases."""

    strides: np.ndarray
    avail: np.ndarray  # [N, K] bool
    count: np.ndarray  # [N, K] int
    phase: np.ndarray  # [N, K] local phase index
    tables: list[dict[tuple[bool, int], int]]  # per node: (available, count) -> phase
    routes: np.ndarray  # [2, N, K] class c's probability of node k in state s
    Q: sp.csr_matrix  # off-diagonal rates

    @property
    def size(self) -> int:
        return int(self.avail.shape[0])


def enumerate_states(m: PolicyModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                              list[dict[tuple[bool, int], int]]]:
    """(strides, avail, count, phase, tables) of every joint state, in mixed radix."""
    K = len(m.nodes)
    ph = [m.phases(k) for k in range(K)]
    dims = tuple(len(p) for p in ph)
    n = math.prod(dims)
    strides = np.array([math.prod(dims[k + 1:]) for k in range(K)], dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    phase = np.stack([(idx // strides[k]) % dims[k] for k in range(K)], axis=1)
    pa = [np.array([a for a, _ in p]) for p in ph]
    pc = [np.array([c for _, c in p]) for p in ph]
    avail = np.stack([pa[k][phase[:, k]] for k in range(K)], axis=1)
    count = np.stack([pc[k][phase[:, k]] for k in range(K)], axis=1)
    tables = [{st: i for i, st in enumerate(p)} for p in ph]
    return strides, avail, count, phase, tables


def _targets(strides: np.ndarray, phase: np.ndarray, tables: list[dict[tuple[bool, int], int]],
             k: int, fn: Callable[[bool, int], tuple[bool, int] | None]) -> np.ndarray:
    """Per state, the state after node k's (available, count) becomes `fn` of it (-1: the
    event cannot happen there)."""
    local = np.full(len(tables[k]), -1, dtype=np.int64)
    for (a, c), i in tables[k].items():
        got = fn(a, c)
        if got is not None and got in tables[k]:
            local[i] = tables[k][got]
    pk = phase[:, k]
    dst = local[pk]
    return np.where(dst >= 0, np.arange(pk.size, dtype=np.int64) + (dst - pk) * strides[k], -1)


def arrival_targets(m: PolicyModel, strides: np.ndarray, phase: np.ndarray,
                    tables: list[dict[tuple[bool, int], int]]) -> np.ndarray:
    """[N, K]: the state after a request sent to node k in state s is accepted there, or
    -1 where node k blocks it (down, or full): the one place the chain says so."""
    out = np.full(phase.shape, -1, dtype=np.int64)
    for k, node in enumerate(m.nodes):

        def arrive(a: bool, c: int, cap: int = node.capacity) -> tuple[bool, int] | None:
            return (a, c + 1) if a and c < cap else None

        out[:, k] = _targets(strides, phase, tables, k, arrive)
    return out


def transitions(m: PolicyModel, strides: np.ndarray, avail: np.ndarray, count: np.ndarray,
                phase: np.ndarray, tables: list[dict[tuple[bool, int], int]], routes: np.ndarray,
                skip_ofn_events: int | None = None
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(source, destination, rate) arrays of every transition of the joint chain;
    `skip_ofn_events=i` leaves out OFN i's completions and leave (a tagged chain's own)."""
    s = np.arange(avail.shape[0], dtype=np.int64)
    lam = np.asarray(m.lam)
    drain = m.leave is LeaveMode.DRAIN
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    arrived = arrival_targets(m, strides, phase, tables)
    for k, node in enumerate(m.nodes):
        rate = lam @ routes[:, :, k]
        dst = arrived[:, k]
        ok = (dst >= 0) & (rate > 0)
        out.append((s[ok], dst[ok], rate[ok]))
        if k != skip_ofn_events:
            rate = service_rate(node, count[:, k])
            dst = _targets(strides, phase, tables, k, lambda a, c: (a, c - 1) if c >= 1 else None)
            ok = (dst >= 0) & (rate > 0)
            out.append((s[ok], dst[ok], rate[ok]))
        if node.role is not Role.OFN or not m.churns:
            continue
        dst = _targets(strides, phase, tables, k, lambda a, c: (True, c) if not a else None)
        ok = dst >= 0
        out.append((s[ok], dst[ok], np.full(int(ok.sum()), m.xi)))
        if k == skip_ofn_events:
            continue
        dst = _targets(strides, phase, tables, k,
                       lambda a, c: (False, c if drain else 0) if a else None)
        ok = dst >= 0
        target = dst[ok]
        if m.leave is LeaveMode.HANDOFF:
            f = m.handoff_target
            moved = np.minimum(count[ok, f] + count[ok, k], m.nodes[f].capacity)
            # FN phases are the counts themselves
            target = target + (moved - count[ok, f]) * strides[f]
        out.append((s[ok], target, np.full(int(ok.sum()), m.eta)))
    return out


def rate_matrix(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n: int) -> sp.csr_matrix:
    """`transitions`' (source, destination, rate) parts as one n x n matrix, duplicates
    summed (self-loops kept)."""
    r, c, v = (np.concatenate([p[i] for p in parts]) for i in range(3))
    Q = sp.csr_matrix((v, (r, c)), shape=(n, n))
    Q.sum_duplicates()
    return Q


def build_joint(m: PolicyModel, oracle: PolicyOracle) -> JointChain:
    strides, avail, count, phase, tables = enumerate_states(m)
    routes = np.stack([oracle.route(a, c) for a, c in zip(avail, count, strict=True)], axis=1)
    oracle.recheck(avail, count, routes)
    Q = rate_matrix(transitions(m, strides, avail, count, phase, tables, routes), len(avail))
    Q.setdiag(0.0)
    Q.eliminate_zeros()
    return JointChain(strides, avail, count, phase, tables, routes, Q)


def joint_stationary(Q: sp.csr_matrix) -> tuple[np.ndarray, str]:
    """Stationary vector of a chain in which every state reaches state 0: up to
    linsolve.DIRECT_MAX states a checked LU or dense GTH by the cost model; above, BiCGSTAB.
    """
    N = Q.shape[0]
    dense_flops = 2.0 * N**3 / 3.0
    if N <= GTH_MAX_STATES and joint_method(N, dense_flops) == "gth":
        return gth_dense(Q.toarray()), "gth"
    G = linsolve.rates_generator(Q)
    if N <= linsolve.DIRECT_MAX:
        pi, err = linsolve.checked_stationary(G)
        if err > linsolve.STATIONARY_TOL and N <= GTH_MAX_STATES:
            return gth_dense(Q.toarray()), "gth"
        return pi, "sparse"
    At = G.T.tocsc()
    B = At[1:, 1:].tocsc()
    rhs = -np.asarray(At[1:, 0].toarray()).ravel()
    pi = np.concatenate([[1.0], np.maximum(linsolve.Solver(B).solve(rhs), 0.0)])  # pinned at 0
    return pi / pi.sum(), "bicgstab"

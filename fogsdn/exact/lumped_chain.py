"""Per-node chains of a policy whose routing depends on availability only, without
handoff: each node's count with the availability vector is a Markov chain of its own
(exactly lumpable), solved by level reduction at any size (pure)."""

from __future__ import annotations

from itertools import product

import numpy as np
import scipy.sparse as sp

from fogsdn.core.scenario import LeaveMode
from fogsdn.exact.linsolve import Chain, gth_dense, gth_levels
from fogsdn.exact.policy_chain_model import PolicyModel, service_rate


def avail_vectors(m: PolicyModel) -> list[tuple[bool, ...]]:
    return list(product(m.availability_set(), repeat=len(m.ofns)))


def lumped_node(m: PolicyModel, k: int, routes_by_avail: dict[tuple[bool, ...], np.ndarray]
                ) -> np.ndarray:
    """P(availability vector, n_k) by level reduction over n_k; rows follow
    `avail_vectors(m)`."""
    vecs = avail_vectors(m)
    node = m.nodes[k]
    ofns = m.ofns
    mine = ofns.index(k) if k in ofns else -1
    P = len(vecs)
    C = node.capacity
    lam = np.asarray(m.lam)
    # state = level n * P + phase v; an OFN out of range holds nothing unless it drains
    valid = np.ones((C + 1, P), dtype=bool)
    if mine >= 0 and m.leave is not LeaveMode.DRAIN:
        for v, vec in enumerate(vecs):
            if not vec[mine]:
                valid[1:, v] = False
    order = np.flatnonzero(valid.ravel())
    index = np.full(valid.size, -1, dtype=np.int64)
    index[order] = np.arange(order.size)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def add(n: int, v: int, n2: int, v2: int, rate: float) -> None:
        if rate > 0:
            rows.append(int(index[n * P + v]))
            cols.append(int(index[n2 * P + v2]))
            vals.append(rate)

    vpos = {vec: i for i, vec in enumerate(vecs)}
    for v, vec in enumerate(vecs):
        up_k = mine < 0 or vec[mine]
        arr = float(lam @ routes_by_avail[vec][:, k]) if up_k else 0.0
        for n in range(C + 1):
            if not valid[n, v]:
                continue
            if n < C:
                add(n, v, n + 1, v, arr)
            if n >= 1:
                add(n, v, n - 1, v, float(service_rate(node, np.array(n))))
            if not m.churns:
                continue
            for j in range(len(ofns)):
                flip = list(vec)
                flip[j] = not vec[j]
                v2 = vpos[tuple(flip)]
                if vec[j]:
                    n2 = 0 if (j == mine and m.leave is not LeaveMode.DRAIN) else n
                    add(n, v, n2, v2, m.eta)
                else:
                    add(n, v, n, v2, m.xi)
    size = order.size
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(size, size))
    Q.sum_duplicates()
    lev = order // P
    starts = np.searchsorted(lev, np.arange(C + 2))
    hub = mine >= 0 and m.leave is not LeaveMode.DRAIN and m.churns
    chain = Chain(Q=Q, a=np.zeros(size, dtype=np.int64), k=lev, n=np.zeros(size, dtype=np.int64),
                  starts=starts, hub=hub)
    pi = gth_levels(chain) if C >= 1 else gth_dense(Q.toarray())
    out = np.zeros((P, C + 1))
    out[order % P, lev] = pi
    return out

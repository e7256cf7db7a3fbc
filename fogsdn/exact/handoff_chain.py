"""The tagged request under handoff: a request accepted by an OFN followed with the
whole state of the joint chain, since where it ends depends on everyone's counts
(pure)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fogsdn.exact.class_prediction import CLASSES
from fogsdn.exact.joint_chain import JointChain, rate_matrix, transitions
from fogsdn.exact.policy_chain_model import PolicyModel
from fogsdn.exact.response_time import AbsorbingChain, TransientChain


def handoff_components(m: PolicyModel, jc: JointChain, pi: np.ndarray, k: int
                       ) -> list[AbsorbingChain | None]:
    """A request accepted by OFN k under handoff, followed with the whole state.

    Transient states: (joint state with it at OFN k, j requests ahead of it there), and
    its position at the handoff FN after a leave (FIFO: later arrivals never matter).
    """
    node = m.nodes[k]
    f = m.handoff_target
    fn = m.nodes[f]
    N = jc.size
    cnt = jc.count
    at_ofn = jc.avail[:, k] & (cnt[:, k] >= 1)
    src_states = np.flatnonzero(at_ofn)
    # transient index of (s, j) for j < n_k(s)
    n_here = cnt[src_states, k]
    offs = np.concatenate([[0], np.cumsum(np.where(at_ofn, cnt[:, k], 0))])
    n_ofn = int(offs[-1])
    n_fn = 1 if fn.multi else fn.capacity
    size = n_ofn + n_fn
    if n_ofn == 0:
        return [None] * len(CLASSES)
    s_of = np.repeat(src_states, n_here)
    j_of = np.arange(n_ofn) - offs[s_of]
    # background transitions of the state, OFN k's own completions and leave left out
    parts = transitions(m, jc.strides, jc.avail, cnt, jc.phase, jc.tables, jc.routes,
                        skip_ofn_events=k)
    bg = rate_matrix(parts, N)[src_states]  # rows: source states that hold the tagged request
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    out_rate = np.zeros(size)
    done = np.zeros(size)
    drop = np.zeros(size)
    # background moves keep j; an arrival at OFN k lands behind it
    coo = bg.tocoo()
    s_src = src_states[coo.row]
    for j in range(int(n_here.max()) if n_here.size else 0):
        sel = cnt[s_src, k] > j
        rows.append(offs[s_src[sel]] + j)
        cols.append(offs[coo.col[sel]] + j)
        vals.append(coo.data[sel])
    bg_out = np.asarray(bg.sum(axis=1)).ravel()
    out_rate[:n_ofn] += np.repeat(bg_out, n_here)
    # OFN k's completions: the tagged one, those ahead (j -> j-1), those behind
    n_s = cnt[s_of, k]
    if node.multi:
        ahead = j_of * node.rate
        behind = (n_s - 1 - j_of) * node.rate
        mine = np.full(n_ofn, node.rate)
    else:
        ahead = np.where(j_of >= 1, node.rate, 0.0)
        behind = np.zeros(n_ofn)
        mine = np.where(j_of == 0, node.rate, 0.0)
    stride = jc.strides[k]
    # OFN k's local phase of count n is n while available (phases list A first)
    for rate, dj in ((ahead, -1), (behind, 0)):  # one fewer ahead, or as many
        on = rate > 0
        rows.append(np.flatnonzero(on))
        cols.append(offs[s_of[on] - stride] + j_of[on] + dj)
        vals.append(rate[on])
    done[:n_ofn] = mine
    out_rate[:n_ofn] += ahead + behind + mine
    # OFN k leaves: the j ahead and then it join the FN's tail
    if m.churns:
        pos = cnt[s_of, f] + j_of + 1
        fits = pos <= fn.capacity
        tgt_fn = n_ofn + (np.zeros_like(pos) if fn.multi else pos - 1)
        rows.append(np.flatnonzero(fits))
        cols.append(tgt_fn[fits])
        vals.append(np.full(int(fits.sum()), m.eta))
        drop[:n_ofn] = np.where(fits, 0.0, m.eta)
        out_rate[:n_ofn] += m.eta
    # at the FN: position p -> p - 1, done from position 1 (multi: one stage)
    if not fn.multi and n_fn > 1:
        rows.append(np.arange(n_ofn + 1, size))
        cols.append(np.arange(n_ofn, size - 1))
        vals.append(np.full(n_fn - 1, fn.rate))
    done[n_ofn] = fn.rate
    out_rate[n_ofn:] = fn.rate
    T = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(size, size))
    T.sum_duplicates()
    chain = TransientChain(T, out_rate, done, drop)
    # initial weights: an arrival in state s routed to k and accepted is at (s + e_k, n_k)
    acc = jc.avail[:, k] & (cnt[:, k] < node.capacity)
    comps: list[AbsorbingChain | None] = []
    for cls in range(len(CLASSES)):
        s0 = np.flatnonzero(acc & (jc.routes[cls, :, k] > 0))
        w = np.zeros(size)
        if s0.size:
            np.add.at(w, offs[s0 + stride] + cnt[s0, k], pi[s0] * jc.routes[cls, s0, k])
        comps.append(AbsorbingChain(chain, w) if w.sum() > 0 else None)
    return comps

"""Seed 002b's light-traffic claims and a QoS design for size-based assignment (pure).

Light traffic: as lambda -> 0 every policy's mean waiting time is lambda * kappa + o(lambda);
the ratio of two policies' waits tends to the ratio of their kappas, so "the TAGS /
SITA-E ratio in light traffic" is kappa_TAGS / kappa_SITA-E (docs/size_based.md,
"Seed 002b's claims").

- SITA (any cutoffs): host i is M/G/1 with rate lambda p_i, so
  kappa = sum_i p_i E[X^2 ; X in I_i] / (2 mu_i^2)  (per-host Pollaczek-Khinchine, exact).
- TAGS, per-host approximation (`predict_tags`'s model as lambda -> 0):
  kappa = sum_k P(X > s_(k-1)) E[min(X, s_k)^2 ; X > s_(k-1)] / (2 mu_k^2).
- TAGS, exact light traffic: to first order in lambda a task is delayed by one earlier
  task only. An earlier task u ahead reaches host k a lead max(u, M_(k-1)) ahead of the
  tagged one (M_(k-1) = max_(j<k) s_j / mu_j: both were killed at every host before),
  and delays it there by (min(Y, s_k)/mu_k - lead)^+; integrating u over (0, inf):
  kappa = sum_k P(X > s_(k-1)) E[((min(Y, s_k)/mu_k)^2 - M_(k-1)^2)^+ ; Y > s_(k-1)] / 2.
  The approximation counts a fresh M/G/1 wait at every host; the lead that the first
  host builds is why the exact coefficient stays bounded as the number of hosts grows.
- TAGS whose cutoffs minimise mean response time: in light traffic the waits vanish and
  only the killed work is left to minimise, so every cutoff moves to the largest size
  (`tags_cutoffs` finds this numerically) and host 1 serves everything:
  kappa = E[X^2] / (2 mu_1^2).

QoS design: size classes, each with a target mean slowdown or mean response time for
the tasks in it; SITA splits each class into the fewest hosts that meet its target
(greedy: each host takes the largest interval that still meets it; the host's metric
grows with the interval's upper end), TAGS the same with its per-host approximation
(no sizes needed at dispatch: the decentralised design).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fogsdn.core.scenario import SizeSpec
from fogsdn.models.size_assignment import (
    SizeModelError,
    moment,
    partial_moment,
    sita_e_cutoffs,
    support,
    tail,
)

INF = math.inf
TAGS_READINGS: tuple[str, ...] = ("fixed_approx", "fixed_exact", "response_optimal")


def _edges(spec: SizeSpec, cutoffs: Sequence[float]) -> list[float]:
    lo, hi = support(spec)
    return [lo - 1.0 if lo > 0 else -1.0, *cutoffs, hi]


def light_sita(spec: SizeSpec, cutoffs: Sequence[float], mus: Sequence[float]) -> float:
    """kappa of SITA with these cutoffs: mean wait / lambda as lambda -> 0 (exact)."""
    if len(cutoffs) != len(mus) - 1:
        raise SizeModelError(f"{len(mus)} hosts need {len(mus) - 1} cutoffs")
    s = _edges(spec, cutoffs)
    return sum(partial_moment(spec, 0, s[i], s[i + 1]) * partial_moment(spec, 2, s[i], s[i + 1])
               / (2.0 * mu * mu) for i, mu in enumerate(mus))


def _min_sq(spec: SizeSpec, a: float, b: float) -> float:
    """E[min(X, b)^2 ; X > a]."""
    hi = support(spec)[1]
    beyond = tail(spec, b) if b < hi else 0.0
    return partial_moment(spec, 2, a, b) + b * b * beyond


def light_tags(spec: SizeSpec, cutoffs: Sequence[float], mus: Sequence[float], *,
               exact: bool) -> float:
    """kappa of TAGS with these cutoffs: the per-host approximation (exact=False) or the
    exact light-traffic coefficient (exact=True); see the module's docstring."""
    if len(cutoffs) != len(mus) - 1:
        raise SizeModelError(f"{len(mus)} hosts need {len(mus) - 1} cutoffs")
    s = _edges(spec, cutoffs)
    kappa, lead = 0.0, 0.0
    for k, mu in enumerate(mus):
        a, b = s[k], s[k + 1]
        reach = tail(spec, a) if k > 0 else 1.0
        if reach <= 0.0:
            break
        if not exact:
            kappa += reach * _min_sq(spec, a, b) / (2.0 * mu * mu)
        else:
            t = max(a, lead * mu)  # sizes below t end at host k before the lead runs out
            if t < b:
                kappa += reach * (_min_sq(spec, t, b) / (mu * mu)
                                  - lead * lead * tail(spec, t)) / 2.0
            lead = max(lead, b / mu)
    return kappa


def light_tags_response_optimal(spec: SizeSpec, mus: Sequence[float]) -> float:
    """kappa of the response-optimal TAGS in light traffic: no kills, host 1 serves all."""
    return moment(spec, 2) / (2.0 * mus[0] ** 2)


def light_ratio(spec: SizeSpec, hosts: int, reading: str) -> float:
    """kappa_TAGS / kappa_SITA-E on `hosts` identical hosts; TAGS per `reading`:
    fixed_approx / fixed_exact (TAGS at SITA-E's cutoffs, the per-host approximation or
    exact) or response_optimal (its light-traffic limit: no kills)."""
    mus = [1.0] * hosts
    cut = sita_e_cutoffs(spec, mus)
    base = light_sita(spec, cut, mus)
    if reading == "fixed_approx":
        return light_tags(spec, cut, mus, exact=False) / base
    if reading == "fixed_exact":
        return light_tags(spec, cut, mus, exact=True) / base
    if reading == "response_optimal":
        return light_tags_response_optimal(spec, mus) / base
    raise SizeModelError(f"unknown reading {reading!r} (one of {', '.join(TAGS_READINGS)})")


def alpha1_fixed_limit(hosts: int) -> float:
    """lim_{H/L -> inf} of kappa_TAGS / kappa_SITA-E at alpha = 1, TAGS at SITA-E's
    cutoffs (approximation and exact agree): (2h - 1) / h. Every host but the last
    serves up to its cutoff t = (H/L)^(1/h) times the smallest size it sees, which
    adds about t to E[min(X, s)^2] beside SITA-E's t per host."""
    return (2.0 * hosts - 1.0) / hosts


# -- QoS design ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeClass:
    """Sizes up to `upto` (from the previous class's `upto`) with a target on `metric`
    ("slowdown" or "W", model ms) for the mean over that class's tasks."""

    upto: float
    metric: str
    target: float


@dataclass(frozen=True)
class DesignHost:
    low: float
    high: float
    size_class: int  # index into the design's classes
    value: float  # the host's class metric as designed (the model's)
    rho: float


@dataclass(frozen=True)
class QosDesign:
    policy: str  # "sita" or "tags"
    lam: float
    classes: tuple[SizeClass, ...]
    hosts: tuple[DesignHost, ...]

    @property
    def cutoffs(self) -> tuple[float, ...]:
        return tuple(h.high for h in self.hosts[:-1])


def _sita_host(lam: float, spec: SizeSpec, a: float, b: float, mu: float
               ) -> tuple[float, float, float]:
    """(rho, mean slowdown, mean W) of one SITA host taking sizes in (a, b] (P-K)."""
    p = partial_moment(spec, 0, a, b)
    if p <= 0.0:
        return 0.0, 1.0, 0.0
    es, es2 = partial_moment(spec, 1, a, b) / p / mu, partial_moment(spec, 2, a, b) / p / mu**2
    rho = lam * p * es
    if rho >= 1.0:
        return rho, INF, INF
    wq = lam * p * es2 / (2.0 * (1.0 - rho))
    return rho, 1.0 + wq * partial_moment(spec, -1, a, b) / p * mu, wq + es


def _tags_host(lam: float, spec: SizeSpec, a: float, b: float, mu: float, before: float,
               wasted: float) -> tuple[float, float, float, float]:
    """(rho, class slowdown, class W, this host's wait) of TAGS host with cutoffs (a, b]
    under the per-host approximation; `before`: the waits at the hosts before, `wasted`:
    the service killed there (what a task completing here has spent before)."""
    reach = tail(spec, a) if a >= support(spec)[0] else 1.0
    p = partial_moment(spec, 0, a, b)
    hi = support(spec)[1]
    beyond = tail(spec, b) if b < hi else 0.0
    es = (partial_moment(spec, 1, a, b) + b * beyond) / reach / mu
    es2 = _min_sq(spec, a, b) / reach / mu**2
    rho = lam * reach * es
    if rho >= 1.0 or p <= 0.0:
        return rho, INF, INF, INF
    wq = lam * reach * es2 / (2.0 * (1.0 - rho))
    delay = before + wq + wasted
    own = partial_moment(spec, 1, a, b) / p / mu
    return rho, 1.0 + delay * partial_moment(spec, -1, a, b) / p * mu, delay + own, wq


def qos_design(policy: str, lam: float, spec: SizeSpec, classes: Sequence[SizeClass],
               mu: float = 1.0, max_hosts: int = 256) -> QosDesign:
    """Identical hosts (rate mu) whose every host meets its class's target (so every
    class's mean does): SITA (exact), greedily, each host the largest interval within
    target. TAGS (per-host approximation; a task's metric counts the waits and killed
    work at every host before it): a host that fills its budget leaves the next hosts
    of its class none, so the greedy runs with each host's budget cut to a fraction f
    of the target's excess (slowdown 1 + f (D - 1), W f D), f = 1, 0.9, ..., 0.1, and
    the design with the fewest hosts is kept (ties: the larger f). Raises
    SizeModelError when no design meets the targets."""
    if policy == "sita":
        return _greedy(policy, lam, spec, classes, classes, mu, max_hosts)
    best: QosDesign | None = None
    errors: list[str] = []
    for f in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1):
        budget = [SizeClass(c.upto, c.metric, 1.0 + f * (c.target - 1.0)
                            if c.metric == "slowdown" else f * c.target) for c in classes]
        try:
            d = _greedy(policy, lam, spec, classes, budget, mu, max_hosts)
        except SizeModelError as err:
            errors.append(str(err))
            continue
        if best is None or len(d.hosts) < len(best.hosts):
            best = d
    if best is None:
        raise SizeModelError(errors[0])
    return best


def _greedy(policy: str, lam: float, spec: SizeSpec, classes: Sequence[SizeClass],
            budget: Sequence[SizeClass], mu: float, max_hosts: int) -> QosDesign:
    """Greedy: per class, each host the largest interval whose metric is within the
    class's `budget` (the metric grows with the interval's upper end)."""
    if policy not in ("sita", "tags"):
        raise SizeModelError(f"qos_design: policy {policy!r} is not sita or tags")
    lo, hi = support(spec)
    if not classes or classes[-1].upto < hi:
        raise SizeModelError("qos_design: the last class must reach the largest size")
    hosts: list[DesignHost] = []
    a = lo - 1.0 if lo > 0 else -1.0
    before = wasted = 0.0
    for ci, cls in enumerate(budget):
        if cls.metric not in ("slowdown", "W"):
            raise SizeModelError(f"qos_design: metric {cls.metric!r} is not slowdown or W")
        end = min(cls.upto, hi)
        while a < end:
            if len(hosts) >= max_hosts:
                raise SizeModelError(f"qos_design: more than {max_hosts} hosts needed")
            start = a

            def value(b: float, start: float = start, cls: SizeClass = cls,
                      before: float = before, wasted: float = wasted
                      ) -> tuple[float, float, float]:
                if policy == "sita":
                    rho, sd, w = _sita_host(lam, spec, start, b, mu)
                    return rho, (sd if cls.metric == "slowdown" else w), 0.0
                rho, sd, w, wq = _tags_host(lam, spec, start, b, mu, before, wasted)
                return rho, (sd if cls.metric == "slowdown" else w), wq

            if value(end)[1] <= cls.target:
                b = end
            else:
                lo_b = max(start, lo)
                hi_b = end
                if value(lo_b + 1e-9 * max(1.0, lo_b))[1] > cls.target:
                    raise SizeModelError(
                        f"qos_design: sizes just above {lo_b:g} cannot meet {cls.metric} "
                        f"<= {cls.target:g} ({policy})")
                for _ in range(200):  # bisection in log size: the metric grows with b
                    mid = math.sqrt(lo_b * hi_b) if lo_b > 0 else 0.5 * (lo_b + hi_b)
                    if value(mid)[1] <= cls.target:
                        lo_b = mid
                    else:
                        hi_b = mid
                    if hi_b - lo_b <= 1e-10 * hi_b:
                        break
                b = lo_b
            rho, v, wq = value(b)
            hosts.append(DesignHost(max(start, lo), b, ci, v, rho))
            before += wq
            wasted += b / mu
            a = b
    return QosDesign(policy, lam, tuple(classes), tuple(hosts))


__all__ = ["TAGS_READINGS", "DesignHost", "QosDesign", "SizeClass", "alpha1_fixed_limit",
           "light_ratio", "light_sita", "light_tags", "light_tags_response_optimal",
           "qos_design"]

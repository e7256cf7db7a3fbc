"""Seed 000's numeric and ordering claims for Figs. 4-6, as checkable rows (pure).

Each `Claim` is one statement of the paper's text and a function of the figures at its
points, evaluated alike on the printed chain, our exact chain, the mean over drawn
capacities and each simulated replication (common random numbers, so a difference gets
its interval from the replications' own values). A claim holds at a number, as an
ordering (> 0) or within a stated tolerance (`at_most`: Fig. 4b's gap "does not
increase" across the whole sweep); `discipline_decides` says when the FN's status-U
discipline changes a verdict. The verdicts: docs/reproduction.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# Fig. 4's x axis, lambda_LP (scenarios/seed000_fig4{a,b}.yaml's sweep)
LP_SWEEP: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# "the gap does not increase": its largest rise across the sweep, as a share of its
# largest value, may be at most this (the 10 % of docs/reproduction.md's verdict rule)
GAP_RISE_TOLERANCE_PCT = 10.0


def at(fig: str, lam_lp: float) -> str:
    """The point of Fig. `fig` (4a, 4b) at `lam_lp`: "4b@0.5"."""
    return f"{fig}@{lam_lp:g}"


# a claim's point: (figure scenario, overrides of the scenario)
POINTS: dict[str, tuple[str, dict[str, float]]] = {
    "4a@0.5": ("seed000_fig4a", {"workload.lambda_lp": 0.5}),
    "4a@0.1": ("seed000_fig4a", {"workload.lambda_lp": 0.1}),
    "4a@1": ("seed000_fig4a", {"workload.lambda_lp": 1.0}),
    "5b@0.3": ("seed000_fig5b", {"workload.lambda_hp": 0.15}),
    "5b@1": ("seed000_fig5b", {"workload.lambda_hp": 0.5}),
    # Fig. 4b's whole sweep, for "the gap does not increase"
    **{at("4b", x): ("seed000_fig4b", {"workload.lambda_lp": x}) for x in LP_SWEEP},
}
SCHEMES: tuple[str, ...] = ("prioritized", "nodiff", "basic")
# (point, scheme, metric) -> value; metrics: W_hp, W_lp, outage_hp
Get = Callable[[str, str, str], float]


@dataclass(frozen=True)
class Claim:
    figure: str
    text: str
    paper: float | None  # None: the text says only that the value is > 0 (or <= at_most)
    unit: str
    value: Callable[[Get], float]
    at_most: float | None = None  # set: the claim holds when value <= at_most (a tolerance)

    @property
    def needs(self) -> tuple[tuple[str, str], ...]:
        """The (point, scheme) pairs the value reads: points in order, schemes as SCHEMES."""
        read: set[tuple[str, str]] = set()

        def record(point: str, scheme: str, metric: str) -> float:
            read.add((point, scheme))
            return 1.0

        try:
            self.value(record)
        except ArithmeticError:  # equal stand-in values: a 0 gap, read in full before
            pass
        return tuple(sorted(read, key=lambda k: (k[0], SCHEMES.index(k[1]))))

    def paper_text(self) -> str:
        if self.at_most is not None:
            return f"<= {self.at_most:g}{self.unit}"
        return "> 0" if self.paper is None else f"{self.paper:g}{self.unit}"


def _pct(a: float, b: float) -> float:
    return 100.0 * (1.0 - a / b)


def _gap(g: Get, point: str) -> float:
    """NoDiff's HP response minus the proposed scheme's HP response at `point`."""
    return g(point, "nodiff", "W_hp") - g(point, "prioritized", "W_hp")


def gap_series(g: Get, fig: str) -> list[float]:
    """Fig. `fig`'s NoDiff - proposed HP gap at every lambda_LP of LP_SWEEP."""
    return [_gap(g, at(fig, x)) for x in LP_SWEEP]


def largest_rise(values: Sequence[float]) -> float:
    """How far the series ever climbs above an earlier value: max over i < j of
    values[j] - values[i] (negative when it falls at every step)."""
    if len(values) < 2:
        raise ValueError("a rise needs two values")
    if any(math.isnan(v) for v in values):
        return math.nan
    rise, low = -math.inf, values[0]
    for v in values[1:]:
        rise, low = max(rise, v - low), min(low, v)
    return rise


def rise_pct(values: Sequence[float]) -> float:
    """largest_rise as a percentage of the series' largest magnitude (ZeroDivisionError
    when every value is 0; a NaN anywhere gives NaN)."""
    return 100.0 * largest_rise(values) / max(abs(v) for v in values)


def _growth(g: Get, fig: str) -> float:
    """How much Fig. `fig`'s NoDiff - proposed HP gap grows from lambda_LP 0.1 to 1."""
    return _gap(g, f"{fig}@1") - _gap(g, f"{fig}@0.1")


def _fig5b(ratio: str, nodiff_gap: float, class_gap: float) -> tuple[Claim, Claim]:
    """Fig. 5b's two gaps at one HP/LP arrival ratio (point `5b@RATIO`)."""
    at = f"5b@{ratio}"
    return (Claim("5b", f"NoDiff - proposed HP at ratio {ratio}", nodiff_gap, " ms",
                  lambda g: g(at, "nodiff", "W_hp") - g(at, "prioritized", "W_hp")),
            Claim("5b", f"proposed LP - proposed HP at ratio {ratio}", class_gap, " ms",
                  lambda g: g(at, "prioritized", "W_lp") - g(at, "prioritized", "W_hp")))


CLAIMS: tuple[Claim, ...] = (
    Claim("4a", "proposed HP shorter than NoDiff at lambda_LP = 0.5", 49.0, " %",
          lambda g: _pct(g("4a@0.5", "prioritized", "W_hp"), g("4a@0.5", "nodiff", "W_hp"))),
    Claim("4a", "proposed HP shorter than Basic at lambda_LP = 0.5", 62.0, " %",
          lambda g: _pct(g("4a@0.5", "prioritized", "W_hp"), g("4a@0.5", "basic", "W_hp"))),
    Claim("4a", "NoDiff above Basic at low load: NoDiff - Basic at lambda_LP = 0.1", None,
          " ms", lambda g: g("4a@0.1", "nodiff", "W_hp") - g("4a@0.1", "basic", "W_hp")),
    Claim("4a", "proposed LP above NoDiff: proposed LP - NoDiff at lambda_LP = 0.5", None,
          " ms", lambda g: g("4a@0.5", "prioritized", "W_lp") - g("4a@0.5", "nodiff", "W_hp")),
    Claim("4b", "proposed HP lowest of all schemes: min(NoDiff, Basic) - proposed HP at "
          "lambda_LP = 0.1", None, " ms",
          lambda g: min(g("4b@0.1", "nodiff", "W_hp"), g("4b@0.1", "basic", "W_hp"))
          - g("4b@0.1", "prioritized", "W_hp")),
    Claim("4b", "proposed LP improves from 4a to 4b: LP(4a) - LP(4b) at lambda_LP = 0.5",
          None, " ms",
          lambda g: g("4a@0.5", "prioritized", "W_lp") - g("4b@0.5", "prioritized", "W_lp")),
    Claim("4b", "the NoDiff - proposed HP gap grows less with lambda_LP than in 4a: "
          "growth(4a) - growth(4b), growth = gap(1) - gap(0.1)", None, " ms",
          lambda g: _growth(g, "4a") - _growth(g, "4b")),
    Claim("4b", "the NoDiff - proposed HP gap does not increase with lambda_LP (literal): "
          "its largest rise across lambda_LP = 0.1, 0.2, ..., 1 in 4b, % of its largest "
          "value", None, " %", lambda g: rise_pct(gap_series(g, "4b")),
          at_most=GAP_RISE_TOLERANCE_PCT),
    *_fig5b("0.3", 12.9, 21.5),
    *_fig5b("1", 0.6, 0.9),
    Claim("6a", "proposed HP outage lowest: min(NoDiff, Basic) - proposed at "
          "lambda_LP = 0.5 (D = 30 ms)", None, "",
          lambda g: min(g("4a@0.5", "nodiff", "outage_hp"), g("4a@0.5", "basic", "outage_hp"))
          - g("4a@0.5", "prioritized", "outage_hp")),
    Claim("6b", "proposed HP outage rises from 6a to 6b: 6b - 6a at lambda_LP = 0.5", None,
          "", lambda g: g("4b@0.5", "prioritized", "outage_hp")
          - g("4a@0.5", "prioritized", "outage_hp")),
)


def reads_prioritized(claim: Claim) -> bool:
    """Whether the claim reads the proposed scheme, the one whose FN serves both classes
    in status U (where the seed says "round-robin fashion")."""
    return any(scheme == "prioritized" for _, scheme in claim.needs)


def needed() -> list[tuple[str, str]]:
    """Every (point, scheme) some claim reads, in a fixed order."""
    return list(dict.fromkeys(k for c in CLAIMS for k in c.needs))


def lookup(table: Mapping[tuple[str, str], Mapping[str, float]]) -> Get:
    """A `Get` over {(point, scheme): {metric: value}}; a missing metric is NaN."""
    def get(point: str, scheme: str, metric: str) -> float:
        return float(table[(point, scheme)].get(metric, math.nan))
    return get


def evaluate(claim: Claim, get: Get) -> float:
    try:
        return float(claim.value(get))
    except ZeroDivisionError:
        return math.nan


def verdict(claim: Claim, value: float) -> str:
    """docs/reproduction.md's rule: within 10 % reproduced, same sign within 2x same order;
    an ordering holds when > 0, a tolerance (`at_most`) when value <= at_most."""
    if not math.isfinite(value):
        return "n/a"
    if claim.at_most is not None:
        return "reproduced" if value <= claim.at_most else "not"
    if claim.paper is None:
        return "reproduced" if value > 0 else "not"
    if abs(value - claim.paper) <= 0.1 * abs(claim.paper):
        return "reproduced"
    if value * claim.paper > 0 and 0.5 <= value / claim.paper <= 2.0:
        return "same order"
    return "not"


def discipline_decides(claim: Claim, fifo: float, round_robin: float | None) -> bool | None:
    """Whether the FN's status-U discipline decides the claim: its verdict with the
    proposed scheme's FN on round robin differs from FIFO's (None: the claim does not
    read the proposed scheme, or either verdict is n/a)."""
    if round_robin is None:
        return None
    a, b = verdict(claim, fifo), verdict(claim, round_robin)
    return None if "n/a" in (a, b) else a != b

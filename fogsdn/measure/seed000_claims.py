"""Seed 000's numeric and ordering claims for Figs. 4-6, as checkable rows (pure).

Each `Claim` is one statement of the paper's text and a function of the figures at its
points, evaluated alike on the printed chain, our exact chain, the mean over drawn
capacities and each simulated replication (common random numbers, so a difference gets
its interval from the replications' own values). The verdicts: docs/reproduction.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# a claim's point: (figure scenario, overrides of the scenario)
POINTS: dict[str, tuple[str, dict[str, float]]] = {
    "4a@0.5": ("seed000_fig4a", {"workload.lambda_lp": 0.5}),
    "4a@0.1": ("seed000_fig4a", {"workload.lambda_lp": 0.1}),
    "4b@0.1": ("seed000_fig4b", {"workload.lambda_lp": 0.1}),
    "4b@0.5": ("seed000_fig4b", {"workload.lambda_lp": 0.5}),
    "4a@1": ("seed000_fig4a", {"workload.lambda_lp": 1.0}),
    "4b@1": ("seed000_fig4b", {"workload.lambda_lp": 1.0}),
    "5b@0.3": ("seed000_fig5b", {"workload.lambda_hp": 0.15}),
    "5b@1": ("seed000_fig5b", {"workload.lambda_hp": 0.5}),
}
SCHEMES: tuple[str, ...] = ("prioritized", "nodiff", "basic")
# (point, scheme, metric) -> value; metrics: W_hp, W_lp, outage_hp
Get = Callable[[str, str, str], float]


@dataclass(frozen=True)
class Claim:
    figure: str
    text: str
    paper: float | None  # None: the text says only that the value is > 0
    unit: str
    value: Callable[[Get], float]

    @property
    def needs(self) -> tuple[tuple[str, str], ...]:
        """The (point, scheme) pairs the value reads: points in order, schemes as SCHEMES."""
        read: set[tuple[str, str]] = set()

        def record(point: str, scheme: str, metric: str) -> float:
            read.add((point, scheme))
            return 1.0

        self.value(record)
        return tuple(sorted(read, key=lambda k: (k[0], SCHEMES.index(k[1]))))

    def paper_text(self) -> str:
        return "> 0" if self.paper is None else f"{self.paper:g}{self.unit}"


def _pct(a: float, b: float) -> float:
    return 100.0 * (1.0 - a / b)


def _gap(g: Get, point: str) -> float:
    """NoDiff's HP response minus the proposed scheme's HP response at `point`."""
    return g(point, "nodiff", "W_hp") - g(point, "prioritized", "W_hp")


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
          "gap(0.1) - gap(1) in 4b", None, " ms", lambda g: -_growth(g, "4b")),
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
    """docs/reproduction.md's rule: within 10 % reproduced, same sign within 2x same order."""
    if not math.isfinite(value):
        return "n/a"
    if claim.paper is None:
        return "reproduced" if value > 0 else "not"
    if abs(value - claim.paper) <= 0.1 * abs(claim.paper):
        return "reproduced"
    if value * claim.paper > 0 and 0.5 <= value / claim.paper <= 2.0:
        return "same order"
    return "not"

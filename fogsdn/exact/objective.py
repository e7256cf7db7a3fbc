"""Objectives and constraints over a policy's exact figures, as users write them
(`all.W`, `hp.W<=2.4`, `lp.blocking + 0.01*power`), parsed once into typed terms (pure).

W is a ratio of two long-run rates, so it may only stand alone (times a number); every
other metric is a long-run average and may be summed with weights. The metrics:
docs/policies.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

CLASS_NAMES = ("hp", "lp", "all")
CLASS_METRICS = ("W", "blocking", "outage", "N", "throughput")
RATIO_METRICS = frozenset({"W"})

_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_TERM = re.compile(rf"\s*([-+])?\s*(?:({_NUMBER})\s*\*?\s*)?([A-Za-z_][A-Za-z_.]*)\s*")
_CONSTRAINT = re.compile(rf"^(.*?)(<=|>=)\s*([-+]?{_NUMBER})\s*$")


class ObjectiveError(ValueError):
    """An objective or constraint that cannot be read or cannot be met; one line."""


@dataclass(frozen=True)
class Metric:
    cls: str  # "hp", "lp", "all", or "" for power
    name: str

    @property
    def is_ratio(self) -> bool:
        return self.name in RATIO_METRICS

    def __str__(self) -> str:
        return f"{self.cls}.{self.name}" if self.cls else self.name


@dataclass(frozen=True)
class Expr:
    """sum of coefficient * metric, as written."""

    terms: tuple[tuple[float, Metric], ...]
    text: str

    @property
    def ratio(self) -> Metric | None:
        """The W metric when the expression is one (scaled) W; None when it is linear."""
        return self.terms[0][1] if self.terms[0][1].is_ratio else None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Constraint:
    expr: Expr
    sense: str  # "<=" or ">="
    bound: float
    text: str

    def holds(self, value: float, rtol: float = 1e-9) -> bool:
        slack = rtol * max(1.0, abs(self.bound))
        return value <= self.bound + slack if self.sense == "<=" else value >= self.bound - slack

    def __str__(self) -> str:
        return self.text


def _metric(word: str, text: str) -> Metric:
    if word == "power":
        return Metric("", "power")
    cls, _, name = word.partition(".")
    if cls not in CLASS_NAMES or name not in CLASS_METRICS:
        raise ObjectiveError(
            f"{text!r}: unknown metric {word!r} (CLASS.NAME with CLASS in "
            f"{'/'.join(CLASS_NAMES)} and NAME in {'/'.join(CLASS_METRICS)}, or power)")
    return Metric(cls, name)


def parse_expr(text: str) -> Expr:
    """`all.W`, `2*hp.W`, `lp.blocking + 0.01*power - hp.throughput`."""
    pos, terms = 0, list[tuple[float, Metric]]()
    src = text.strip()
    if not src:
        raise ObjectiveError("empty objective")
    while pos < len(src):
        m = _TERM.match(src, pos)
        if m is None or m.end() == pos or (terms and m.group(1) is None):
            raise ObjectiveError(f"{text!r}: cannot read it at {src[pos:]!r} (write terms "
                                 "like 2*hp.W or lp.blocking + 0.01*power)")
        sign = -1.0 if m.group(1) == "-" else 1.0
        coef = sign * (float(m.group(2)) if m.group(2) else 1.0)
        terms.append((coef, _metric(m.group(3), text)))
        pos = m.end()
    expr = Expr(tuple(terms), src)
    if any(mt.is_ratio for _, mt in terms) and len(terms) > 1:
        raise ObjectiveError(f"{text!r}: W is a ratio and must stand alone; in a sum use N "
                             "(Little: N = W * throughput) or constrain W separately")
    return expr


def parse_constraint(text: str) -> Constraint:
    """`hp.W<=2.4`, `lp.blocking + hp.blocking <= 0.01`, `all.throughput>=0.79`."""
    m = _CONSTRAINT.match(text.strip())
    if m is None:
        raise ObjectiveError(f"constraint {text!r}: write EXPRESSION<=NUMBER or "
                             "EXPRESSION>=NUMBER, e.g. hp.W<=2.4")
    try:
        expr = parse_expr(m.group(1))
    except ObjectiveError as err:
        raise ObjectiveError(f"constraint {text!r}: {err}") from None
    bound = float(m.group(3))
    if not math.isfinite(bound):
        raise ObjectiveError(f"constraint {text!r}: the bound must be finite")
    return Constraint(expr, m.group(2), bound, text.strip())


def evaluate(expr: Expr, figures: Mapping[str, float]) -> float:
    """The expression's value from a flat {"hp.W": ..., "power": ...} mapping."""
    return math.fsum(c * figures[str(mt)] for c, mt in expr.terms)


__all__ = ["CLASS_METRICS", "CLASS_NAMES", "Constraint", "Expr", "Metric", "ObjectiveError",
           "evaluate", "parse_constraint", "parse_expr"]

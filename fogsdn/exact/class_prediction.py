"""What a prediction of one class and of both classes answers, whichever chain made it
(`fogsdn.exact.ctmc` or `fogsdn.exact.policy_chain`): means, blocking, outage, percentiles and
the response-time CDF, from a `ClassResponse`. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fogsdn.exact.response_time import Among, ClassResponse

CLASSES: tuple[str, ...] = ("hp", "lp")


class ModelError(ValueError):
    """Parameters the model cannot take; the message is one line naming the field."""


PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99),
)


@dataclass(frozen=True)
class ClassPrediction:
    """Exact metrics of one class; the distribution is computed when first asked."""

    cls: str
    lam: float
    response: ClassResponse
    deadline: float

    @property
    def blocking(self) -> float:
        return self.response.blocking

    @property
    def accepted(self) -> float:
        return self.response.accepted

    @property
    def throughput(self) -> float:
        return self.lam * self.accepted

    @property
    def W(self) -> float:  # noqa: N802 - the queueing letter
        return self.response.mean_response

    @property
    def N(self) -> float:  # noqa: N802
        """Little's law with every accepted request's stay, completed or dropped."""
        return self.throughput * self.response.mean_sojourn if self.throughput > 0 else 0.0

    @property
    def drop_prob(self) -> float:
        acc = self.accepted
        return self.response.p_drop / acc if acc > 0 else math.nan

    @property
    def outage(self) -> float:
        return self.response.outage(self.deadline)

    @property
    def outage_accepted(self) -> float:
        return self.response.outage_accepted(self.deadline)

    def percentiles(self) -> dict[str, float]:
        return {name: self.response.percentile(q) for name, q in PERCENTILES}

    def cdf(self, t: np.ndarray, among: Among = "completed") -> np.ndarray:
        return self.response.cdf(t, among)

    def means(self) -> dict[str, float]:
        return {"W": self.W, "blocking": self.blocking, "throughput": self.throughput,
                "N": self.N, "drop_prob": self.drop_prob}

    def to_dict(self) -> dict[str, object]:
        return {**self.means(), "outage": self.outage,
                "outage_accepted": self.outage_accepted,
                "percentiles": self.percentiles()}


class ClassPair:
    """What a prediction of both classes answers, whichever chain made it."""

    hp: ClassPrediction
    lp: ClassPrediction

    def _common(self) -> dict[str, object]:
        raise NotImplementedError

    def cls(self, name: str) -> ClassPrediction:
        if name not in CLASSES:
            raise ModelError(f"class must be hp or lp, got {name!r}")
        return self.hp if name == "hp" else self.lp

    def cdf(self, cls: str, t: np.ndarray | list[float], among: Among = "completed") -> np.ndarray:
        """Exact response-time CDF of `cls` at times t (model ms)."""
        return self.cls(cls).cdf(np.asarray(t, dtype=float), among)

    def means(self) -> dict[str, object]:
        """Mean metrics only: no tagged-chain distribution is computed."""
        return {"hp": self.hp.means(), "lp": self.lp.means(), **self._common()}

    def to_dict(self) -> dict[str, object]:
        return {"hp": self.hp.to_dict(), "lp": self.lp.to_dict(), **self._common()}

"""Figures of merit for comparing policies on response time and power (issue 9), pure.

One run gives: mean and p95 response time of the answered requests after warm-up (model
ms, network included), mean estimated power (servers and switches, W) and energy per
answered request (J). Several runs of the same policy on different seeds combine by
independent replications (95 % t interval over the runs' figures); a single run gets
batch-means intervals (responses in arrival order, power per second).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.metrics import MeanCI, batch_means_ci, batch_quantile_ci, replications_ci

METRICS: tuple[str, ...] = ("response_ms", "p95_ms", "power_W", "energy_per_request_J")


@dataclass(frozen=True)
class RunFigures:
    """One run's figures, each with its within-run 95 % half-width."""

    response_ms: MeanCI
    p95_ms: MeanCI
    power_W: MeanCI  # noqa: N815 (the JSON key)
    energy_per_request_J: MeanCI  # noqa: N815
    answered: int
    failed: int


def run_figures(responses_ms: Sequence[float], failed: int, power_per_s: Sequence[float],
                seconds: Sequence[float]) -> RunFigures:
    """`responses_ms`: answered requests' response times in arrival order; `power_per_s`:
    total power (all servers and switches) per interval of `seconds` length."""
    energy = math.fsum(p * s for p, s in zip(power_per_s, seconds, strict=True))
    span = math.fsum(seconds)
    answered = len(responses_ms)
    per_request = energy / answered if answered else math.nan
    power = batch_means_ci(list(power_per_s), batches=10)
    power = MeanCI(energy / span if span > 0 else math.nan, power.half_width, power.n)
    epr_half = power.half_width * span / answered if answered else math.nan
    return RunFigures(batch_means_ci(list(responses_ms)),
                      batch_quantile_ci(list(responses_ms), 95.0),
                      power, MeanCI(per_request, epr_half, answered), answered, failed)


def combine(runs: Sequence[RunFigures]) -> dict[str, float | int]:
    """The JSON entry of one policy: each metric and its `<metric>_ci95` half-width."""
    out: dict[str, float | int] = {}
    for m in METRICS:
        cis: list[MeanCI] = [getattr(r, m) for r in runs]
        ci = replications_ci([c.mean for c in cis]) if len(cis) > 1 else cis[0]
        out[m] = ci.mean
        out[f"{m}_ci95"] = ci.half_width
    out["runs"] = len(runs)
    out["answered"] = sum(r.answered for r in runs)
    out["failed"] = sum(r.failed for r in runs)
    return out


def relative_to(entry: Mapping[str, float | int], base: Mapping[str, float | int]
                ) -> tuple[float, float]:
    """(response time change, power change) of `entry` against `base`, as fractions."""
    return (float(entry["response_ms"]) / float(base["response_ms"]) - 1.0,
            float(entry["power_W"]) / float(base["power_W"]) - 1.0)


def policy_entry(runs: Sequence[RunFigures], decide_ms: Sequence[float]) -> dict[str, Any]:
    """One policy's JSON entry: its runs combined, and the p50 / p99 of its per-flow
    decision times (ms) when it has any."""
    out: dict[str, Any] = dict(combine(runs))
    if decide_ms:
        out["decide_ms_p50"] = float(np.percentile(decide_ms, 50))
        out["decide_ms_p99"] = float(np.percentile(decide_ms, 99))
    return out


def table(results: Mapping[str, Mapping[str, Any]], base: str = "latency_greedy") -> str:
    """The policies' figures with their intervals, and each one's change against `base`."""
    head = (f"{'policy':22s} {'mean ms':>16s} {'p95 ms':>16s} {'power W':>15s} "
            f"{'J/request':>15s} {'dRT':>7s} {'dP':>7s} {'decide p99 ms':>13s}")
    lines = [head]
    for name, e in results.items():
        d_rt, d_p = relative_to(e, results[base]) if base in results else (math.nan, math.nan)
        lines.append(
            f"{name:22s} {e['response_ms']:8.3f} ±{e['response_ms_ci95']:6.3f} "
            f"{e['p95_ms']:8.3f} ±{e['p95_ms_ci95']:6.3f} {e['power_W']:7.1f} ±"
            f"{e['power_W_ci95']:5.1f} {e['energy_per_request_J']:7.3f} ±"
            f"{e['energy_per_request_J_ci95']:5.3f} {100 * d_rt:+6.1f}% {100 * d_p:+6.1f}% "
            f"{e.get('decide_ms_p99', math.nan):13.4f}")
    return "\n".join(lines)


__all__ = ["METRICS", "RunFigures", "combine", "policy_entry", "relative_to", "run_figures",
           "table"]

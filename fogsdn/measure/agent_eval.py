"""Figures of merit for comparing policies on response time and power (issue 9), pure.

Per run: mean and p95 response (model ms, network included), mean estimated power (W)
and energy per answered request (J), with batch-means intervals; several seeds of a
policy combine by independent replications (docs/learning.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fogsdn.measure.metrics import (
    MeanCI,
    batch_means_ci,
    batch_quantile_ci,
    p50_p99,
    replications_ci,
)

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
    # seed 002a: the switches' share of power_W, and the controller's measured response
    # time against the clients' (relative; NaN where not measured)
    network_power_W: MeanCI | None = None  # noqa: N815 (the JSON key)
    rt_measurement_error: float = math.nan


def run_figures(responses_ms: Sequence[float], failed: int, power_per_s: Sequence[float],
                seconds: Sequence[float], network_per_s: Sequence[float] | None = None,
                rt_measurement_error: float = math.nan) -> RunFigures:
    """`responses_ms`: answered requests' response times in arrival order; `power_per_s`:
    total power (all servers and switches) per interval of `seconds` length;
    `network_per_s` the switches' part of it."""
    span = math.fsum(seconds)

    def mean_power(per_s: Sequence[float]) -> tuple[float, MeanCI]:
        """(energy, time-weighted mean power with a batch-means half-width)."""
        energy = math.fsum(p * s for p, s in zip(per_s, seconds, strict=True))
        return energy, MeanCI(energy / span if span > 0 else math.nan,
                              batch_means_ci(list(per_s), batches=10).half_width, len(seconds))

    energy, power = mean_power(power_per_s)
    network = None if network_per_s is None else mean_power(network_per_s)[1]
    answered = len(responses_ms)
    per_request = energy / answered if answered else math.nan
    epr_half = power.half_width * span / answered if answered else math.nan
    return RunFigures(batch_means_ci(list(responses_ms)),
                      batch_quantile_ci(list(responses_ms), 95.0),
                      power, MeanCI(per_request, epr_half, answered), answered, failed,
                      network, rt_measurement_error)


def combine(runs: Sequence[RunFigures]) -> dict[str, float | int]:
    """The JSON entry of one policy: each metric and its `<metric>_ci95` half-width."""
    out: dict[str, float | int] = {}
    for m in (*METRICS, "network_power_W"):
        cis: list[MeanCI] = [ci for r in runs if (ci := getattr(r, m)) is not None]
        if len(cis) < len(runs):
            continue  # network_power_W where some run did not measure it
        ci = replications_ci([c.mean for c in cis]) if len(cis) > 1 else cis[0]
        out[m], out[f"{m}_ci95"] = ci.mean, ci.half_width
    # the names for the two intervals the claim is decided by
    out["response_ms_ci"] = out["response_ms_ci95"]
    if "network_power_W" in out:
        out["network_power_W_ci"] = out["network_power_W_ci95"]
    # the worst run's |controller - clients| / clients (NaN: nothing measured)
    errors = [abs(r.rt_measurement_error) for r in runs if not math.isnan(r.rt_measurement_error)]
    out["rt_measurement_error"] = max(errors) if errors else math.nan
    out["runs"] = len(runs)
    out["answered"] = sum(r.answered for r in runs)
    out["failed"] = sum(r.failed for r in runs)
    return out


def relative_to(entry: Mapping[str, float | int], base: Mapping[str, float | int]
                ) -> tuple[float, float]:
    """(response time change, power change) of `entry` against `base`, as fractions."""
    return (float(entry["response_ms"]) / float(base["response_ms"]) - 1.0,
            float(entry["power_W"]) / float(base["power_W"]) - 1.0)


def policy_entry(runs: Sequence[RunFigures], decide_ms: Sequence[float]) -> dict[str, float]:
    """One policy's JSON entry: its runs combined, and the p50 / p99 of its per-flow
    decision times (ms) when it has any."""
    out: dict[str, float] = dict(combine(runs))
    if decide_ms:
        out.update({f"decide_ms_{k}": v for k, v in p50_p99(decide_ms).items()})
    return out


def table(results: Mapping[str, Mapping[str, Any]], base: str = "latency_greedy") -> str:
    """The policies' figures with their intervals, and each one's change against `base`."""
    head = (f"{'policy':22s} {'mean ms':>16s} {'p95 ms':>16s} {'power W':>15s} "
            f"{'J/request':>15s} {'dRT':>7s} {'dP':>7s} {'decide p99 ms':>13s}")
    lines = [head]
    net = all("network_power_W" in e for e in results.values())
    if net:
        lines[0] += f" {'network W':>15s} {'dNet':>7s}"
    for name, e in results.items():
        d_rt, d_p = relative_to(e, results[base]) if base in results else (math.nan, math.nan)
        lines.append(
            f"{name:22s} {e['response_ms']:8.3f} ±{e['response_ms_ci95']:6.3f} "
            f"{e['p95_ms']:8.3f} ±{e['p95_ms_ci95']:6.3f} {e['power_W']:7.1f} ±"
            f"{e['power_W_ci95']:5.1f} {e['energy_per_request_J']:7.3f} ±"
            f"{e['energy_per_request_J_ci95']:5.3f} {100 * d_rt:+6.1f}% {100 * d_p:+6.1f}% "
            f"{e.get('decide_ms_p99', math.nan):13.4f}")
        if net:
            d_net = (float(e["network_power_W"]) / float(results[base]["network_power_W"]) - 1.0
                     if base in results else math.nan)
            lines[-1] += (f" {e['network_power_W']:7.1f} ±{e['network_power_W_ci95']:5.1f} "
                          f"{100 * d_net:+6.1f}%")
    return "\n".join(lines)


__all__ = ["METRICS", "RunFigures", "combine", "policy_entry", "relative_to", "run_figures",
           "table"]

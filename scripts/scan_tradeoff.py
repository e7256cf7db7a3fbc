"""How much power a scenario lets a policy save, and at what response time: fixed weightings.

    python scripts/scan_tradeoff.py [--scenario scenarios/multipath_power.yaml]
        [--demote 0.97 0.94 0.9 0.8 0.6] [--seeds 1] [--epochs 30] [--epoch-requests 200]

The best node alone bounds what any policy saves (docs/learning.md, "The trade-off
scenario"); the rows: docs/reproduction.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="gym")  # fogsdn.agents.env
bootstrap.require("gymnasium", "gym")

import numpy as np  # noqa: E402

from fogsdn.agents.env import SimRoutingEnv  # noqa: E402
from fogsdn.core.scenario import ScenarioError, load_scenario  # noqa: E402


def measure(env: SimRoutingEnv, weights: tuple[float, ...], seeds: list[int]
            ) -> tuple[float, float]:
    """Mean response time (ms) and power (W) per epoch with these weights held."""
    action = np.asarray(weights, dtype=np.float32)
    rts: list[float] = []
    powers: list[float] = []
    for seed in seeds:
        env.reset(seed=seed)
        truncated = False
        while not truncated:
            _, _, _, truncated, info = env.step(action)
            rts.append(float(info["response_ms"]))
            powers.append(float(info["power_w"]))
    return float(np.mean(rts)), float(np.mean(powers))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, default=Path("scenarios/multipath_power.yaml"))
    ap.add_argument("--demote", type=float, nargs="*", default=[0.97, 0.94, 0.9, 0.8, 0.6])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--epoch-requests", type=int, default=200)
    ns = ap.parse_args(argv)
    try:
        scenario = load_scenario(ns.scenario)
    except ScenarioError as exc:
        return bootstrap.fail(exc)
    if any(not 0.0 <= w <= 1.0 for w in ns.demote):
        return bootstrap.fail("--demote: levels must be in [0, 1]")
    names = [n.name for n in scenario.nodes]
    env = SimRoutingEnv(scenario, epoch_requests=ns.epoch_requests, epochs=ns.epochs)
    rows: list[tuple[str, tuple[float, ...]]] = [("even (latency-greedy)", (1.0,) * len(names))]
    rows += [(f"{names[0]} at {w:g}", (w,) + (1.0,) * (len(names) - 1)) for w in ns.demote]
    rows += [(f"only {n}", tuple(1.0 if j == i else 0.0 for j in range(len(names))))
             for i, n in enumerate(names)]
    base_rt, base_p = measure(env, rows[0][1], ns.seeds)
    print(f"{'weights':24s} {'response ms':>12s} {'power W':>9s} {'dRT':>8s} {'dP':>8s}")
    for label, weights in rows:
        rt, p = measure(env, weights, ns.seeds)
        print(f"{label:24s} {rt:12.2f} {p:9.1f} {100 * (rt / base_rt - 1):+7.1f}% "
              f"{100 * (p / base_p - 1):+7.1f}%")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

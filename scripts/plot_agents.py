#!/usr/bin/env python3
"""Mean power against mean response time per policy, simulated and live side by side.

    python scripts/plot_agents.py docs/figures/learning/eval_simulate.json \
        docs/figures/learning/eval_emulate.json --out docs/figures/learning/pareto.png \
        [--curve fogsdn/agents/weights/dqn_multipath_power.pt.curve.csv]

Each JSON is `scripts/eval_agents.py --json` output; what it draws: docs/reproduction.md.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any


def sweep_points(results: dict[str, Any], own_a: float) -> list[tuple[float, str]]:
    """(a, label) of the DQN agents, in the order of a."""
    out = [(own_a, "rl_dqn")] if "rl_dqn" in results else []
    out += [(float(k[len("rl_dqn_a"):]), k) for k in results if k.startswith("rl_dqn_a")]
    return sorted(out)


def panel(ax: Any, results: dict[str, Any], title: str, own_a: float,
          colours: dict[str, Any]) -> None:
    for name, e in results.items():
        if name.startswith("rl_dqn_a"):
            continue
        ax.errorbar(e["response_ms"], e["power_W"], xerr=e["response_ms_ci95"],
                    yerr=e["power_W_ci95"], fmt="o" if name.startswith("rl") else "s",
                    capsize=3, label=name, color=colours[name])
    sweep = sweep_points(results, own_a)
    if sweep:
        xs = [results[k]["response_ms"] for _, k in sweep]
        ys = [results[k]["power_W"] for _, k in sweep]
        ax.plot(xs, ys, "kx--", lw=0.8, label="rl_dqn, goal weight a swept")
        for (a, _), x, y in zip(sweep, xs, ys, strict=True):
            ax.annotate(f"a={a:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set(title=title, xlabel="mean response time (model ms, network included)",
           ylabel="mean estimated power (W, servers and switches)")
    ax.grid(alpha=0.3)


def markdown_table(sets: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per policy and engine: the figures with their intervals, and the change
    against latency_greedy of the same engine."""
    lines = ["| policy | engine | mean response ms | p95 ms | power W | J / request | "
             "vs latency_greedy: RT, power | decide p99 ms |",
             "|---|---|---|---|---|---|---|---|"]
    for engine, results in sets:
        base = results.get("latency_greedy")
        for name, e in results.items():
            rel = ""
            if base is not None:
                d_rt = 100 * (e["response_ms"] / base["response_ms"] - 1)
                d_p = 100 * (e["power_W"] / base["power_W"] - 1)
                rel = f"{d_rt:+.1f} %, {d_p:+.1f} %"
            lines.append(
                f"| {name} | {engine} | {e['response_ms']:.2f} ± {e['response_ms_ci95']:.2f} "
                f"| {e['p95_ms']:.2f} ± {e['p95_ms_ci95']:.2f} | {e['power_W']:.1f} ± "
                f"{e['power_W_ci95']:.1f} | {e['energy_per_request_J']:.2f} | {rel} | "
                f"{e.get('decide_ms_p99', float('nan')):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("simulated", type=Path)
    ap.add_argument("live", type=Path, nargs="?")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--own-a", type=float, default=0.5, help="the goal weight rl_dqn has")
    ap.add_argument("--curve", type=Path, help="a training curve CSV to draw as well")
    ap.add_argument("--table", action="store_true", help="also print a markdown table")
    ns = ap.parse_args(argv)
    sets = [(ns.simulated, "simulate", "simulated")] + ([(ns.live, "emulate", "live")]
                                                         if ns.live else [])
    loaded = [(json.loads(path.read_text()), engine, title) for path, engine, title in sets]
    if ns.table:
        print(markdown_table([(engine, results) for results, engine, _ in loaded]))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(6.5 * len(sets), 5), squeeze=False)
    names = sorted({n for r, _, _ in loaded for n in r if not n.startswith("rl_dqn_a")})
    colours = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    for ax, (results, _, title) in zip(axes[0], loaded, strict=True):
        panel(ax, results, f"multipath_power, {title}", ns.own_a, colours)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(ns.out, dpi=110)
    print(f"wrote {ns.out}")
    if ns.curve is not None:
        with open(ns.curve) as fh:
            rows = list(csv.DictReader(fh))
        fig2, ax2 = plt.subplots(figsize=(6, 3.5))
        ax2.plot([int(r["episode"]) for r in rows], [float(r["mean_reward"]) for r in rows])
        ax2.set(xlabel="episode (50 epochs of 100 requests)", ylabel="mean reward 1/G per epoch",
                title="DQN training on multipath_power (simulator)")
        ax2.grid(alpha=0.3)
        fig2.tight_layout()
        out2 = ns.out.with_name(ns.out.stem + "_curve.png")
        fig2.savefig(out2, dpi=110)
        print(f"wrote {out2}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

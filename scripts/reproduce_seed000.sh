#!/usr/bin/env bash
# Seed 000's figures 4a-6b: exact curves with simulated points, and exact curves with
# live (emulated) points at three x positions per figure. Needs root for the live part.
#   sudo bash scripts/reproduce_seed000.sh [FIGURES...]      (default: all six)
# Writes docs/figures/<figure>-{simulate,emulate}.{png,csv}; full runs under results/.
set -euo pipefail
cd "$(dirname "$0")/.."
figs=("${@:-4a 4b 5a 5b 6a 6b}")
mkdir -p docs/figures
for f in ${figs[@]}; do
  sc=scenarios/seed000_fig$f.yaml
  for engine in simulate emulate; do
    out=results/seed000_fig$f-$engine
    rm -rf "$out"
    if [ "$engine" = simulate ]; then
      python scripts/sweep.py --scenario "$sc" --engine simulate --requests 200000 --no-trace --out "$out"
    else
      # 3000 model ms per point at 5 real ms per model ms (docs/emulation.md: fidelity)
      python scripts/sweep.py --scenario "$sc" --engine emulate --model-ms 3000 --time-scale 5 --out "$out"
    fi
    cp "$out/sweep.png" "docs/figures/seed000_fig$f-$engine.png"
    cp "$out/sweep.csv" "docs/figures/seed000_fig$f-$engine.csv"
  done
done

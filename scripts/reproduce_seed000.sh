#!/usr/bin/env bash
# Seed 000's Figs. 4a-6b: the study driver (scripts/sweep.py) on each figure's sweep,
# simulated (200,000 requests per point) and live (3000 model ms per point at 5 real ms
# per model ms, docs/emulation.md). Needs root for the live part.
#   sudo bash scripts/reproduce_seed000.sh [FIGURES...]      (default: all six)
# Writes docs/figures/seed000_fig<X>-{simulate,emulate}.{png,csv} (exact curves beside the
# points, the optimal dispatch among them: docs/reproduction.md); full runs under results/.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A args=([simulate]="--requests 200000 --no-trace" [emulate]="--model-ms 3000 --time-scale 5")
for f in ${@:-4a 4b 5a 5b 6a 6b}; do
  for engine in simulate emulate; do
    out=results/seed000_fig$f-$engine && rm -rf "$out" && mkdir -p docs/figures
    python scripts/sweep.py --scenario "scenarios/seed000_fig$f.yaml" --optimum --engine $engine ${args[$engine]} --out "$out"
    for x in png csv; do cp "$out/sweep.$x" "docs/figures/seed000_fig$f-$engine.$x"; done
  done
done

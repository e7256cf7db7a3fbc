#!/usr/bin/env python3
"""Seed 002b's figures (SITA-E, TAGS, Random, Least-Work-Left: model curves with
simulated points, and the TAGS / SITA-E ratio): the study driver on each of
scenarios/seed002b_{load,alpha,ratio}.yaml, writing docs/figures/seed002b_*.{png,csv}.

    python scripts/reproduce_seed002b.py [--requests N] [--replications R] [--workers W]
        [--executor {process,ray,serial}] [--plot-only] [--out DIR]   (scripts/sweep.py's)
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.exit(max(subprocess.call([sys.executable, str(ROOT / "scripts" / "sweep.py"), "--scenario",
                              str(ROOT / "scenarios" / f"seed002b_{fig}.yaml"), "--out",
                              str(ROOT / "docs" / "figures"), *sys.argv[1:]])
             for fig in ("load", "alpha", "ratio")))

#!/usr/bin/env python3
"""Seed 003's comparison of fog-node selectors against the client/slot ratio: the study
driver on scenarios/city.yaml, writing docs/figures/seed003-<engine>.csv and the Figs.
4-7 PNGs (seed003_fig{4,5,6,7}-<engine>.png).

    python scripts/reproduce_seed003.py [--engine simulate] [--live-scale] [--workers N]
        [--executor {process,ray,serial}] [--set full_scale.ratios=[0.1,0.5,1.0]]
        [--set selectors=[optimal,load_aware]] [--set seed=2] [--duration SECONDS]
    sudo python scripts/reproduce_seed003.py --engine emulate    (the study's live scale)
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.exit(subprocess.call([sys.executable, str(ROOT / "scripts" / "sweep.py"), "--scenario",
                          str(ROOT / "scenarios" / "city.yaml"), "--out",
                          str(ROOT / "docs" / "figures"), *sys.argv[1:]]))

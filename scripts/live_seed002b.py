#!/usr/bin/env python3
"""Live points for seed 002b (SITA-E and TAGS on the testbed at loads 0.3, 0.5, 0.7,
beside the model): the study driver on scenarios/seed002b_live.yaml, writing
docs/figures/seed002b_live.{csv,png}. Root + Open vSwitch; under the emulation lock:

    sudo flock /tmp/fogsdn-emulation.lock python scripts/live_seed002b.py \
        [--duration SECONDS] [--time-scale 4] [--set sweep.policies=[sita_e,tags]] [--plot-only]
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.exit(subprocess.call([sys.executable, str(ROOT / "scripts" / "sweep.py"), "--engine",
                          "emulate", "--scenario", str(ROOT / "scenarios" / "seed002b_live.yaml"),
                          "--out", str(ROOT / "docs" / "figures"), *sys.argv[1:]]))

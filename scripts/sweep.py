#!/usr/bin/env python3
"""Run every point of a scenario's sweep and draw the figure (see sim/sweep.py).

    python scripts/sweep.py --scenario FILE --engine simulate [--executor {process,ray}]
                            [--ray-address ADDR] [--workers N] [--requests N] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=False, extras="sweep")

from sim.sweep import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

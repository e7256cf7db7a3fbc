#!/usr/bin/env python3
"""Run a study and draw its figures (fogsdn/studies/study.py): a scenario's sweep, a size-based
sweep (seed 002b) or a city study file (seed 003); sets up what is missing first.

    python scripts/sweep.py --scenario FILE --engine simulate [--executor {process,ray}]
                            [--ray-address ADDR] [--workers N] [--requests N] [--out DIR]
    sudo python scripts/sweep.py --scenario FILE --engine emulate [--executor ray
                            --ray-address ADDR] [--duration SECONDS | --model-ms MS]
"""

from __future__ import annotations

import sys

import bootstrap  # first run: set-up; outside .venv: re-run inside it

_live = any(a in ("emulate", "--engine=emulate") for a in sys.argv[1:])
bootstrap.bootstrap(needs_network_stack=_live, extras="sweep")

from fogsdn.cli.study_command import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Entry point of the controller benchmark, whose code is tools/bench/controller.py."""

from __future__ import annotations

import sys

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from tools.bench.controller import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

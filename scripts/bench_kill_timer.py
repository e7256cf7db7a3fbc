#!/usr/bin/env python3
"""Entry point of the kill-timer benchmark, whose code is tools/bench/kill_timer.py."""

from __future__ import annotations

import sys

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from tools.bench.kill_timer import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

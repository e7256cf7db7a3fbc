#!/usr/bin/env python3
"""Entry point of the link benchmark, whose code is tools/bench/links.py."""

from __future__ import annotations

import sys

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=True, extras="")

from tools.bench.links import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

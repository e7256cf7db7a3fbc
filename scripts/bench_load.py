#!/usr/bin/env python3
"""Entry point of the live-load benchmark, whose code is tools/bench/load.py."""

from __future__ import annotations

import sys

import bootstrap  # the project on sys.path; the set-up itself waits for the arguments

from tools.bench.load import parse_args, run  # standard library only


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    bootstrap.bootstrap()
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

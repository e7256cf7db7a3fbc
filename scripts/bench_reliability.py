#!/usr/bin/env python3
"""Entry point of the controller crash drill, whose code is tools/bench/reliability.py."""

from __future__ import annotations

import sys

import bootstrap  # the project on sys.path; the set-up itself waits for the arguments

from tools.bench.reliability import parse_args, run  # standard library only


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    bootstrap.bootstrap(needs_network_stack=True)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

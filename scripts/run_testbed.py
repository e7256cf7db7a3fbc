#!/usr/bin/env python3
"""Run a fogsdn scenario: live on Mininet/OVS/os-ken (default), or simulated.

    sudo python scripts/run_testbed.py [--scenario FILE] [--policy NAME] [--duration SECONDS]
                                       [--policy-module FILE]
                                       [--engine emulate|simulate] [--requests N] [--out DIR]
                                       [--view [PORT] [--view-host ADDR]]   # docs/view.md
    sudo python scripts/run_testbed.py --clean     # remove leftovers of crashed runs

The first run sets up what is missing (apt packages, .venv, Open vSwitch); the command
itself is `runner.cli` (`fogsdn-run` once installed).
"""

from __future__ import annotations

import sys

import bootstrap  # the project on sys.path; the set-up itself waits for the arguments

from runner.cli import main as run  # standard library only
from runner.cli import parse_args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bootstrap.bootstrap(needs_network_stack=args.engine == "emulate" or args.clean)
    return run(argv, stop_ovs=bootstrap.stop_ovs_we_started)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before the run's own handler is in: nothing started yet
        print("\n[run] interrupted during start-up; nothing was running", file=sys.stderr)
        sys.exit(130)

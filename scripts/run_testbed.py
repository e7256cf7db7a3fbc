#!/usr/bin/env python3
"""Run a fogsdn scenario: live on Mininet/OVS/os-ken (default), or simulated.

    sudo python scripts/run_testbed.py [--scenario FILE] [--policy NAME] [--duration SECONDS]
                                       [--policy-module FILE]
                                       [--engine emulate|simulate] [--requests N] [--out DIR]
                                       [--view [PORT] [--view-host ADDR]]   # docs/view.md
    sudo python scripts/run_testbed.py --clean     # remove leftovers of crashed runs

The first run sets up what is missing (apt packages, .venv, Open vSwitch); the command
itself is `fogsdn.cli.run_command` (`fogsdn-run` once installed).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fogsdn.core.processes import catch_stop_signals  # noqa: E402 (standard library only)

catch_stop_signals()  # first: a Ctrl-C from here on is a flag every phase checks

import bootstrap  # noqa: E402 (the set-up itself waits for the arguments)

from fogsdn.cli.run_command import main as run  # noqa: E402 (standard library only)
from fogsdn.cli.run_command import parse_args, run_caught  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bootstrap.bootstrap(needs_network_stack=args.engine == "emulate" or args.clean)
    return run(argv, stop_ovs=bootstrap.stop_ovs_we_started)


if __name__ == "__main__":
    sys.exit(run_caught(main))

#!/usr/bin/env python3
"""The test command: sets up what the tests need (apt, .venv, Open vSwitch), then runs pytest.

    sudo python scripts/run_tests.py [pytest args]

Emulation tests (marked `emulation`) need root and Open vSwitch; this command starts
OVS when it is not running, so they run rather than skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TEST_EXTRAS = "test,sweep,bench"


def main() -> int:
    import bootstrap

    bootstrap.bootstrap(needs_network_stack=os.geteuid() == 0, extras=TEST_EXTRAS)
    os.chdir(bootstrap.ROOT)
    args = sys.argv[1:] or ["tests"]
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *args])
    return 0


if __name__ == "__main__":
    sys.exit(main())

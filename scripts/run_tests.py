#!/usr/bin/env python3
"""The test command: sets up what the tests need (apt, .venv, Open vSwitch), then runs
the two stages, each reported, and exits non-zero if either failed.

    sudo python scripts/run_tests.py [--stage unit|emulation|all] [pytest args]

unit: everything not marked `emulation` (no root needed), spread over one pytest-xdist
worker per CPU (the tests wait on states, never on fixed sleeps, so a busy core does
not fail them). emulation: the live tests (root and Open vSwitch; this command starts
OVS when it is not running), one at a time: only one network is built at once. As in
Faucet, which runs its unit tests apart from its Mininet integration tests, each stage
is its own pytest run with its own verdict. Under CI=true an emulation test that cannot
run (no root, no OVS) fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# rl: torch 2.13.0 (pinned to the wheel on disk, no CUDA download), so the DQN test runs
TEST_EXTRAS = "test,sweep,bench,gym,rl"
STAGES = {"unit": "not emulation", "emulation": "emulation"}


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(stages to run, pytest args)."""
    stage = "all"
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--stage":
            stage = next(it, "all")
        elif arg.startswith("--stage="):
            stage = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if stage not in (*STAGES, "all"):
        raise SystemExit(f"run_tests.py: error: --stage: unit, emulation or all, got {stage!r}")
    return (list(STAGES) if stage == "all" else [stage]), rest


def _parallel(stage: str, args: list[str]) -> list[str]:
    """`-n logical` for the unit stage where pytest-xdist is installed and the caller chose
    no distribution of their own; nothing for the emulation stage."""
    if stage != "unit" or importlib.util.find_spec("xdist") is None:
        return []
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in args):
        return []
    return ["-n", "logical", "--dist", "worksteal"]  # a worker per CPU the process may use


def main(argv: list[str] | None = None) -> int:
    stages, args = _split(sys.argv[1:] if argv is None else argv)
    import bootstrap

    bootstrap.bootstrap(needs_network_stack=os.geteuid() == 0, extras=TEST_EXTRAS)
    os.chdir(bootstrap.ROOT)
    if not any(not a.startswith("-") for a in args):
        args = [*args, "tests"]
    verdicts: dict[str, int] = {}
    for stage in stages:
        print(f"\n=== stage {stage}: pytest -m '{STAGES[stage]}' ===", flush=True)
        rc = subprocess.call([sys.executable, "-m", "pytest", "-m", STAGES[stage],
                              *_parallel(stage, args), *args])
        verdicts[stage] = rc
    print("\n=== stages ===")
    for stage, rc in verdicts.items():
        word = {0: "passed", 5: "FAILED (no tests collected)"}.get(rc, f"FAILED (exit {rc})")
        print(f"{stage:10} {word}")
    return 0 if all(rc == 0 for rc in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The test command: sets up what the tests need (apt, .venv, Open vSwitch), then runs
the two stages (README.md), each its own pytest run and verdict, and exits non-zero if
either failed or ran no test.

    sudo python scripts/run_tests.py [--stage unit|emulation|all] [pytest args]
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import bootstrap  # standard library only: the set-up itself waits for the arguments

# rl: torch 2.13.0 (pinned to the wheel on disk, no CUDA download), so the DQN test runs
# browser: Playwright for the view's browser tests, which drive Debian's chromium (apt)
TEST_EXTRAS = "test,sweep,bench,gym,rl,browser"
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


@dataclass(frozen=True)
class StageCounts:
    """What a stage's pytest run did, from its JUnit XML report."""

    ran: int  # tests that ran to a verdict (passed, failed or errored)
    skipped: int  # skipped or expected to fail (xfail)


def stage_counts(junit_xml: Path) -> StageCounts | None:
    """The counts in a pytest JUnit XML report; None when there is none (pytest did not
    get as far as writing it)."""
    try:
        root = ET.parse(junit_xml).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = sum(int(s.get("tests", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return StageCounts(ran=tests - skipped, skipped=skipped)


def stage_verdict(rc: int, counts: StageCounts | None) -> tuple[bool, str]:
    """(passed, one line) for a stage: it passes only if pytest did and some test ran."""
    tally = f"{counts.ran} ran, {counts.skipped} skipped" if counts is not None else "no report"
    if rc == 5 or (rc == 0 and (counts is None or counts.ran == 0)):
        return False, f"FAILED (no test ran; {tally})"
    if rc != 0:
        return False, f"FAILED (exit {rc}; {tally})"
    return True, f"passed ({tally})"


def main(argv: list[str] | None = None) -> int:
    stages, args = _split(sys.argv[1:] if argv is None else argv)
    root = os.geteuid() == 0
    bootstrap.bootstrap(needs_network_stack=root, extras=TEST_EXTRAS, browser=root)
    os.chdir(bootstrap.ROOT)
    if not any(not a.startswith("-") for a in args):
        args = [*args, "tests"]
    verdicts: dict[str, tuple[bool, str]] = {}
    with tempfile.TemporaryDirectory(prefix="fogsdn-tests-") as tmp:
        for stage in stages:
            print(f"\n=== stage {stage}: pytest -m '{STAGES[stage]}' ===", flush=True)
            report = Path(tmp) / f"{stage}.xml"  # the last --junitxml given wins: ours
            rc = subprocess.call([sys.executable, "-m", "pytest", "-m", STAGES[stage],
                                  *_parallel(stage, args), *args, f"--junitxml={report}"])
            verdicts[stage] = stage_verdict(rc, stage_counts(report))
    print("\n=== stages ===")
    for stage, (_, line) in verdicts.items():
        print(f"{stage:10} {line}")
    return 0 if all(ok for ok, _ in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

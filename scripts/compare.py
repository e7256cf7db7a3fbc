"""Measured vs exact for one results directory: updates summary.json, writes comparison.png.

    python scripts/compare.py RESULTS_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")

from fogsdn.core.scenario import ScenarioError  # noqa: E402
from fogsdn.measure.compare import compare_run  # noqa: E402


def merge_unfinished(run_dir: Path, clients: list[str]) -> None:
    """A run whose runner died before merging: merge the per-client traces and mark the
    run crashed, so that its numbers are kept but never set beside the model."""
    from fogsdn.core.scenario import load_scenario
    from fogsdn.core.summary import write_summary
    from fogsdn.live.results import merge_traces
    from fogsdn.measure.metrics import measured_summary

    sc = load_scenario(run_dir / "scenario.yaml")
    rows = merge_traces(run_dir, clients)
    summary = {"engine": "emulate", "scenario": sc.name, "requests": len(rows),
               "interrupted": True, "crashed": True, "incidents": [],
               "failure": "the runner died before it merged the results (merged by compare.py)",
               "measured": measured_summary(rows, sc.warmup_ms, sc.deadline_ms)}
    write_summary(run_dir / "summary.json", summary)
    print(f"merged {len(rows)} requests from {len(clients)} client traces of an unfinished run")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        return bootstrap.fail("usage: python scripts/compare.py RESULTS_DIR")
    run_dir = Path(args[0])
    if not (run_dir / "trace.csv").is_file() and (run_dir / "scenario.yaml").is_file():
        clients = sorted(f.stem.removeprefix("trace-") for f in run_dir.glob("trace-*.csv"))
        if clients:
            merge_unfinished(run_dir, clients)
    for need in ("scenario.yaml", "trace.csv"):
        if not (run_dir / need).is_file():
            return bootstrap.fail(f"compare.py: error: {run_dir / need} not found")
    try:
        print(compare_run(run_dir))
    except (ScenarioError, ValueError) as err:
        return bootstrap.fail(f"compare.py: error: {err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

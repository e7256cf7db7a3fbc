"""The live run's progress line: totals over the clients' progress files never go back."""

from __future__ import annotations

from pathlib import Path

from fogsdn.live.queueing_run import Progress, QueueingRun


def _run(out: Path, clients: list[str]) -> QueueingRun:
    run = QueueingRun.__new__(QueueingRun)  # only what _read_progress uses: no network
    run.out, run.clients, run.progress = out, dict.fromkeys(clients), Progress()  # type: ignore[assignment]
    return run


def test_a_progress_file_caught_mid_rewrite_keeps_the_clients_last_counts(tmp_path: Path) -> None:
    run = _run(tmp_path, ["c1", "c2"])
    (tmp_path / "trace-c1.progress").write_text("100 90\n")
    (tmp_path / "trace-c2.progress").write_text("50 40\n")
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (150, 130)
    (tmp_path / "trace-c1.progress").write_text("")  # truncated, not yet rewritten
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (150, 130)
    (tmp_path / "trace-c1.progress").write_text("120 110\n")
    (tmp_path / "trace-c2.progress").unlink()  # gone: still its last counts
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (170, 150)

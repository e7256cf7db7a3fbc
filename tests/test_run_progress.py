"""The live run's progress line: totals over the clients' progress files never go back."""

from __future__ import annotations

from pathlib import Path

from fogsdn.live.queueing_run import Progress, QueueingRun


def _run(out: Path, clients: list[str]) -> QueueingRun:
    run = QueueingRun.__new__(QueueingRun)  # only what _read_progress uses: no network
    run.out, run.clients, run.progress = out, list(clients), Progress()  # type: ignore[assignment]
    return run


def test_a_progress_file_unreadable_or_gone_keeps_the_clients_last_counts(tmp_path: Path) -> None:
    run = _run(tmp_path, ["c1", "c2"])
    progress = tmp_path / "load-engine.progress"
    progress.write_text('{"c1": [100, 90], "c2": [50, 40]}')
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (150, 130)
    progress.write_text("")  # unreadable: the last counts stay
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (150, 130)
    progress.write_text('{"c1": [120, 110], "c9": [5, 5]}')  # c2 missing, c9 not ours
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (170, 150)
    progress.unlink()  # gone: still the last counts
    (tmp_path / "load-c2.progress").write_text('{"c2": [60, 55]}')  # one engine per client
    run._read_progress()
    assert (run.progress.sent, run.progress.answered) == (180, 165)

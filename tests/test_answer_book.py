"""The controller's book of a per-request learner's open connections: each decision is
answered exactly once, measured or timed out (pure, no network)."""

from __future__ import annotations

import pytest

from fogsdn.controller.answer_book import AnswerBook
from fogsdn.models.network_power import PathOption

OPT = PathOption(switches=("s1", "s5", "s6"), hops=(), delay_ms=0.1)


def test_a_measured_connection_is_answered_once_with_its_time() -> None:
    book = AnswerBook(timeout_ms=500.0, wait_s=2.0)
    assert book.opened(("10.0.0.1", 40000), "c1", "srv1", OPT, t=0.0) == []
    a = book.measured(("10.0.0.1", 40000), 3.5)
    assert a is not None and (a.client, a.node, a.path, a.response_ms, a.timed_out) == (
        "c1", "srv1", OPT, 3.5, False)
    assert book.measured(("10.0.0.1", 40000), 3.5) is None  # not twice
    assert book.measured(("10.0.0.9", 1), 1.0) is None  # never opened: not ours
    assert (book.measured_count, book.timed_out_count, len(book)) == (1, 0, 0)


def test_a_connection_that_never_completes_is_answered_with_the_timeout() -> None:
    book = AnswerBook(timeout_ms=500.0, wait_s=2.0)
    book.opened(("10.0.0.1", 1), "c1", "srv1", OPT, t=0.0)
    book.opened(("10.0.0.2", 2), "c2", "srv2", None, t=1.5)
    assert book.expired(1.9) == []
    late = book.expired(2.5)
    assert [(a.client, a.response_ms, a.timed_out) for a in late] == [("c1", 500.0, True)]
    assert book.measured(("10.0.0.1", 1), 3.0) is None  # its FIN after the answer: ignored
    assert [a.client for a in book.expired(10.0)] == ["c2"]
    assert (book.measured_count, book.timed_out_count, len(book)) == (0, 2, 0)


def test_a_reused_port_and_a_full_book_answer_the_older_connection_as_timed_out() -> None:
    book = AnswerBook(timeout_ms=100.0, wait_s=1.0, max_open=2)
    book.opened(("a", 1), "c1", "n", None, 0.0)
    again = book.opened(("a", 1), "c1", "m", None, 0.1)  # the port reused: a new connection
    assert [(a.node, a.timed_out) for a in again] == [("n", True)]
    book.opened(("b", 2), "c2", "n", None, 0.2)
    full = book.opened(("c", 3), "c3", "n", None, 0.3)  # the oldest makes room
    assert [(a.client, a.node) for a in full] == [("c1", "m")]
    assert len(book) == 2 and book.timed_out_count == 2
    book.clear()
    assert len(book) == 0 and book.expired(100.0) == []


@pytest.mark.parametrize("args", [(0.0, 1.0, 1), (1.0, 0.0, 1), (1.0, 1.0, 0),
                                  (float("nan"), 1.0, 1)])
def test_impossible_settings_are_refused(args: tuple[float, float, int]) -> None:
    with pytest.raises(ValueError, match="AnswerBook"):
        AnswerBook(*args)

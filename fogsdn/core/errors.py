"""An exception as one line of text, for the one-line errors every program prints: a
message with line breaks would break the line, and a user's `__str__` may itself raise."""

from __future__ import annotations


def one_line(err: BaseException) -> str:
    """`Type: message` on one line (its lines joined by " / "); never raises."""
    try:
        text = str(err)
    except Exception as inner:  # noqa: BLE001 (a user's __str__: say so, do not fail)
        text = f"(its message cannot be shown: {type(inner).__name__})"
    lines = [part.strip() for part in text.splitlines() if part.strip()]
    name = type(err).__name__
    return f"{name}: {' / '.join(lines)}" if lines else name

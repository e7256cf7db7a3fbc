"""An exception as one line of text, for the one-line errors every program prints: a
message with line breaks would break the line, and a user's `__str__` may itself raise."""

from __future__ import annotations

from pydantic import ValidationError


def one_line(err: BaseException) -> str:
    """`Type: message` on one line (its lines joined by " / "); never raises."""
    try:
        text = str(err)
    except Exception as inner:  # noqa: BLE001 (a user's __str__: say so, do not fail)
        text = f"(its message cannot be shown: {type(inner).__name__})"
    lines = [part.strip() for part in text.splitlines() if part.strip()]
    name = type(err).__name__
    return f"{name}: {' / '.join(lines)}" if lines else name


def validation_line(err: ValidationError, source: str) -> str:
    """A file's first validation error on one line: `source: field.path: message`, with
    how many more there are."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{source}: {loc + ': ' if loc else ''}{msg}{more}"

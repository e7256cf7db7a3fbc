"""Trace text for a block of rows at numpy speed, byte for byte what `%.6f` and `%07d` write.

Formatting floats one `%` at a time is most of a trace's cost (docs/simulator.md), so
`fogsdn.sim.output.TraceCsvSink` lays a block of plain rows out as a matrix of
little-endian 8-byte words, one column per piece of a line: names and separators
gathered from tables, numbers as ASCII digits from lookup tables. Unused bytes are NUL
and are deleted at the end (`bytes.translate`), so the pieces need no common width.

A value is exact where `%.6f` is: the integer and fractional parts are split exactly
(`x - floor(x)`), and the millionths are rounded from a product whose error is below
1e-9; a value whose millionths lie within 1e-6 of a half (a tie, or nearly) is reported
not `ok`, and its row is left to Python's own formatting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Words = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

WORD = 8  # bytes per word
LIMIT = 1e12  # a value at or above this is not `ok` (its integer part fills two words)
MARK = 1  # a word whose only byte is \x01: where a line formatted elsewhere goes
_U8 = np.dtype("<u8")
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)  # searchsorted: digits of a number
# 4 ASCII digits of 0..9999 in the high half of a word (its bytes 4-7)
_DIGITS4 = np.array([int.from_bytes(f"{i:04d}".encode(), "little") << 32 for i in range(10_000)],
                    dtype=_U8)
_DIGITS4_LOW = _DIGITS4 >> np.uint64(32)  # the same at bytes 0-3
# 3 ASCII digits of 0..999 at bytes 1-3 and at bytes 4-6 of a word
_DIGITS3 = np.array([int.from_bytes(f"{i:03d}".encode(), "little") for i in range(1000)],
                    dtype=_U8)
_DIGITS3_1 = _DIGITS3 << np.uint64(8)
_DIGITS3_4 = _DIGITS3 << np.uint64(32)
# the last d bytes of a word kept (d = 0..8): a number's d digits, its leading zeros gone
_KEEP = np.array([0] + [((1 << 64) - 1) << (8 * (8 - d)) & ((1 << 64) - 1)
                        for d in range(1, 9)], dtype=_U8)
_DOT_COMMA = np.uint64(ord(".") | ord(",") << 56)


def text_words(texts: Sequence[str]) -> Words:
    """ASCII texts as rows of words, NUL-padded to the longest: a table to gather from."""
    raw = [t.encode("ascii") for t in texts]
    width = max(1, -(-max(map(len, raw), default=0) // WORD))
    buf = b"".join(r.ljust(width * WORD, b"\0") for r in raw)
    return np.frombuffer(buf, dtype=_U8).reshape(len(raw), width)


def _word8(v: Ints, keep: Ints) -> Words:
    """v (0..99,999,999) as 8 ASCII digits, only the last `keep` of them (the rest NUL)."""
    hi, lo = np.divmod(v, 10_000)
    return (_DIGITS4_LOW[hi] | _DIGITS4[lo]) & _KEEP[keep]


def _lead(width: int, digits: str) -> str:
    """How `digits` (a number's text) shows in `width` bytes: its leading zeros NUL."""
    return digits.lstrip("0").rjust(width, "\0")


def _table(texts: Sequence[str], shift: int) -> Words:
    """Texts of up to 4 bytes as words, shifted to bytes `shift / 8` on: a look-up table."""
    return np.array([int.from_bytes(t.encode("latin-1"), "little") << shift for t in texts],
                    dtype=_U8)


# v < 10**8 in one word, its leading zeros NUL, from two look-ups of its halves: the
# high half (NUL for 0), then the low half, indexed min(v, 10_000 + lo): lo alone if
# v < 10_000 (its leading zeros NUL, "0" for 0), else all four digits
_HIGH = _table([_lead(4, f"{i:04d}") for i in range(10_000)], 0)
_LOW = _table(["\0" * 3 + "0"] + [_lead(4, f"{i:04d}") for i in range(1, 10_000)]
              + [f"{i:04d}" for i in range(10_000)], 32)
# `%07d`: the high half shows at least 3 digits
_HIGH7 = _table([_lead(1, f"{i:04d}"[:1]) + f"{i:04d}"[1:] for i in range(10_000)], 0)


def int_words(v: Ints, min_digits: int = 1) -> list[Words]:
    """Each v (0 <= v < 10**16) as `%d` (`min_digits` 1) or `%07d` (7) writes it, in one
    word (every v < 10**8) or two, each word shaped like v."""
    if min_digits not in (1, 7):
        raise ValueError(f"min_digits must be 1 or 7, not {min_digits}")
    if not v.size or int(v.max()) < 10**8:
        hi, lo = np.divmod(v, 10_000)
        if min_digits == 7:
            return [_HIGH7[hi] | _DIGITS4[lo]]
        return [_HIGH[hi] | _LOW[np.minimum(v, lo + 10_000)]]
    nd = np.maximum(np.searchsorted(_POW10, v, side="right") + 1, min_digits)
    hi, lo = np.divmod(v, 10**8)
    return [_word8(hi, np.clip(nd - 8, 0, 8)), _word8(lo, np.minimum(nd, 8))]


def fixed6_words(x: Floats) -> tuple[list[Words], Bools]:
    """Each x as `%.6f,` writes it: its integer part's words, then `.dddddd,`, each word
    shaped like x; and where that is exact (`ok`: 0 <= x < LIMIT, not NaN, -0.0 or within
    1e-6 of a tie)."""
    ok = (x < LIMIT) & ~np.signbit(x)  # not negative, -0.0 or NaN
    x = np.where(ok, x, 0.0)
    ip = np.floor(x)
    y = (x - ip) * 1e6  # x - floor(x) is exact; the product is within 1e-9 of the truth
    r = np.rint(y)
    ok &= np.abs(y - r) < 0.5 - 1e-6
    tot = ip.astype(np.int64) * 1_000_000 + r.astype(np.int64)  # r = 1e6 carries here
    ipart, frac = np.divmod(tot, 1_000_000)
    hi, lo = np.divmod(frac, 1000)
    return [*int_words(ipart), _DOT_COMMA | _DIGITS3_1[hi] | _DIGITS3_4[lo]], ok


class PlainLines:
    """The lines of plain trace rows, answered or blocked, as words (see the module).

    A line is `pre[c]`, the seq (`%07d`), `mid[c, cls]`, the head's times (each `%.6f,`),
    `node[k, outcome]`, the tail's times and `end`; a blocked row's line ends with its
    node piece, which holds the rest of its line."""

    def __init__(self, pre: Sequence[str], mid: Sequence[str], node: Sequence[str],
                 end: str) -> None:
        self.pre, self.mid, self.node = text_words(pre), text_words(mid), text_words(node)
        self.end = text_words([end])[0]

    def words(self, pre: Ints, seq: Ints, mid: Ints, node: Ints, times: Floats,
              head: Sequence[int], tail: Sequence[int], short: Bools,
              ) -> tuple[bytearray, Words, Bools]:
        """A block's lines as a matrix of words (row i: line i) over a bytearray, and
        where they are exact. `pre`, `mid` and `node` index the tables; `times` holds each
        distinct time per row (times x rows), `head` and `tail` which of them go before and
        after the node piece; a `short` row (blocked) ends after its node piece."""
        n = len(pre)
        nums, ok = fixed6_words(times)
        seq_w = int_words(seq, 7)
        per = len(nums)  # words per time
        widths = [self.pre.shape[1], len(seq_w), self.mid.shape[1], per * len(head),
                  self.node.shape[1], per * len(tail), len(self.end)]
        at = np.cumsum([0, *widths]).tolist()
        buf = bytearray(n * at[-1] * WORD)
        m = np.frombuffer(buf, dtype=_U8).reshape(n, at[-1])
        m[:, at[0]:at[1]] = self.pre[pre]
        for j, w in enumerate(seq_w):
            m[:, at[1] + j] = w
        m[:, at[2]:at[3]] = self.mid[mid]
        for j, w in enumerate(nums):  # a time's words side by side, then the next time's
            m[:, at[3] + j:at[4]:per] = w[head].T
            m[:, at[5] + j:at[6]:per] = w[tail].T
        m[:, at[4]:at[5]] = self.node[node]
        m[:, at[6]:] = self.end
        if short.any():
            m[short, at[5]:] = 0
        ok_rows = ok[head].all(axis=0) & (ok[tail].all(axis=0) | short)
        return buf, m, ok_rows


def join_lines(buf: bytearray, lines: dict[int, bytes]) -> list[bytes | bytearray | memoryview]:
    """The text of a block, in pieces to write: each row of the word matrix over `buf`
    with its NUL bytes dropped, except the rows in `lines` (their words MARK and NULs),
    which are those bytes instead."""
    text = buf.translate(None, b"\0")
    if not lines:
        return [text]
    view = memoryview(text)
    out: list[bytes | bytearray | memoryview] = []
    at = 0
    for i in sorted(lines):
        mark = text.index(b"\x01", at)
        out.append(view[at:mark])
        out.append(lines[i])
        at = mark + 1
    out.append(view[at:])
    return out


__all__ = ["LIMIT", "MARK", "PlainLines", "fixed6_words", "int_words", "join_lines",
           "text_words"]

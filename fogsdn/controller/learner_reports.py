"""What a run reports of a learning policy while it runs (pure): its learning curve's new
rows, each naming its policy epoch (one more at each swap and restart, so two learners
never read as one curve), and now and then its state (`describe()`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

from fogsdn.policies.base import Epoch

CURVE_FILE = "learning_curve.csv"  # in the run folder, beside the controller's events
CURVE_COLUMNS = "policy_epoch,policy," + Epoch.COLUMNS
# describe() is asked on the packet path: in one decision event of 25 (the view lags <1 s)
DESCRIBE_EVERY = 25


def _csv_field(text: str) -> str:
    """`text` as one CSV field (quoted where it holds a comma or a quote)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([text])
    return out.getvalue()


def curve_rows(policy_epoch: int, policy: str, epochs: Sequence[Epoch]) -> str:
    """`epochs` as lines of learning_curve.csv (`CURVE_COLUMNS`, without the header)."""
    head = f"{policy_epoch},{_csv_field(policy)},"
    return "".join(head + e.csv_row() for e in epochs)


def curve_text(policy: str, epochs: Sequence[Epoch]) -> str:
    """A whole learning_curve.csv of one policy epoch (the simulator's); "" for none."""
    return CURVE_COLUMNS + curve_rows(0, policy, epochs) if epochs else ""


def next_policy_epoch(curve: str | None) -> int:
    """One after the last policy epoch in learning_curve.csv's text `curve`, 0 for none."""
    last = -1
    for row in csv.DictReader(io.StringIO(curve or "")):
        with suppress(KeyError, TypeError, ValueError):
            last = max(last, int(row["policy_epoch"]))
    return last + 1


@dataclass
class LearnerReports:
    """One policy epoch's reports: learner epochs written, decisions made."""

    policy_epoch: int
    policy: str  # its name, in each row
    written: int = 0
    decisions: int = 0

    def new_rows(self, curve: Sequence[Epoch]) -> str:
        """The rows of `curve` not yet written, now counted as written."""
        if len(curve) <= self.written:
            return ""
        rows = curve_rows(self.policy_epoch, self.policy, curve[self.written:])
        self.written = len(curve)
        return rows

    def agent_state(self, policy: object) -> dict[str, object] | None:
        """`describe()` at the policy epoch's first decision and every `DESCRIBE_EVERY`-th
        after; None otherwise and for a policy that has none."""
        describe = getattr(policy, "describe", None)
        if describe is None:
            return None
        due = self.decisions % DESCRIBE_EVERY == 0
        self.decisions += 1
        return dict(describe()) if due else None


__all__ = ["CURVE_COLUMNS", "CURVE_FILE", "DESCRIBE_EVERY", "LearnerReports", "curve_rows",
           "curve_text", "next_policy_epoch"]

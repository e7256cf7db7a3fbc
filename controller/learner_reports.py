"""What a run reports of a learning policy while it runs (pure): the new rows of its
learning curve, and its state (`describe()`) for some of the controller's decision events.

A policy swap or a restarted controller starts a new policy epoch with a new learner,
whose curve starts again from its first decision, so every row of `learning_curve.csv`
names its policy epoch (0 from the start, one more at each swap and restart) and its
policy: two learners' epochs never read as one curve. The simulator writes the same
columns (policy epoch 0).

`describe()` is asked on the packet path, so only the first decision event of a policy
epoch and every `DESCRIBE_EVERY`-th carry it (the run view shows the latest it has
seen, `runner.view_state.ClassRoutes`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from controller.policies.base import Epoch

CURVE_FILE = "learning_curve.csv"  # in the run folder, beside the controller's events
CURVE_COLUMNS = "policy_epoch,policy," + Epoch.COLUMNS
# a learning agent's state in one decision event of this many (the first of each policy
# epoch included): at the seeds' 40 connections a second, the view lags under a second
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
    """The policy epoch a (re)started controller begins: one after the last that the run's
    learning_curve.csv (`curve`, its text) holds, 0 for none."""
    last = -1
    for row in csv.DictReader(io.StringIO(curve or "")):
        with suppress(KeyError, TypeError, ValueError):
            last = max(last, int(row["policy_epoch"]))
    return last + 1


@dataclass
class LearnerReports:
    """One policy epoch's reports: how many of its learner's epochs are written, and how
    many decisions it has made (for `agent_state`)."""

    policy_epoch: int
    policy: str  # its name, in each row
    written: int = 0
    decisions: int = 0

    def new_rows(self, curve: Sequence[Epoch]) -> str:
        """The rows of `curve` (the learner's epochs so far) not yet written, now counted
        as written; "" when none closed since."""
        if len(curve) <= self.written:
            return ""
        rows = curve_rows(self.policy_epoch, self.policy, curve[self.written:])
        self.written = len(curve)
        return rows

    def agent_state(self, policy: object) -> dict[str, Any] | None:
        """A learning agent's `describe()` for this decision's event, at the policy
        epoch's first decision and every `DESCRIBE_EVERY`-th after; None otherwise and for
        a policy that has none."""
        describe = getattr(policy, "describe", None)
        if describe is None:
            return None
        due = self.decisions % DESCRIBE_EVERY == 0
        self.decisions += 1
        return dict(describe()) if due else None


__all__ = ["CURVE_COLUMNS", "CURVE_FILE", "DESCRIBE_EVERY", "LearnerReports", "curve_rows",
           "curve_text", "next_policy_epoch"]

"""The controller's fixed choices for the data plane: tables, groups, bucket weights (pure).

What it must know of the data plane itself (service address, hosts, ports) is
`fogsdn.core.fabric.Fabric`, which the topology layer produces.
"""

from __future__ import annotations

from collections.abc import Mapping

from fogsdn.core.scenario import TaskClass

__all__ = ["BUCKET_SCALE", "CT_ZONE", "GROUP_ID", "TABLE_CLASSIFY", "TABLE_DISPATCH",
           "TABLE_FORWARD", "bucket_weights"]

CT_ZONE = 7
TABLE_CLASSIFY, TABLE_DISPATCH, TABLE_FORWARD = 0, 1, 2
GROUP_ID = {TaskClass.HP: 1, TaskClass.LP: 2}
BUCKET_SCALE = 1000  # select-group weights are integers


def bucket_weights(weights: Mapping[str, float]) -> list[tuple[str, int]]:
    """Integer select-group weights, in a stable order, for one class's route."""
    positive = {n: w for n, w in weights.items() if w > 0}
    total = sum(positive.values())
    if total <= 0:
        return []
    return [(n, max(1, round(BUCKET_SCALE * w / total))) for n, w in sorted(positive.items())]

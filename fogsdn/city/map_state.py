"""Seed 003's live city as the view's state (issue 21): the map, each client's chosen
node and the Vivaldi coordinates (pure; the adapter is `fogsdn.city.map_view`). It keeps the
queueing view's keys, so one page serves both; `city` carries the map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TypedDict

from fogsdn.city.layout import CityLayout
from fogsdn.core.timebase import Timebase
from fogsdn.view.state import NodeLive, finite

Point = tuple[float, float]


class FogDot(TypedDict):
    """A fog node on the map: its place, slots, client count and coordinate."""

    name: str
    x: float
    y: float
    slots: int
    members: int | None  # None: no state written yet
    coord: list[float] | None


class ClientDot(TypedDict):
    """A client on the map: its place, chosen node and coordinate."""

    name: str
    x: float
    y: float
    node: str | None
    coord: list[float] | None


def coordinate_vector(state: Mapping[str, object]) -> list[float] | None:
    """The Vivaldi coordinate's vector in a daemon's or client's state file (None where
    it has none yet, or a selector that keeps none)."""
    coord = state.get("coord")
    vec = coord.get("vec") if isinstance(coord, Mapping) else None
    if not isinstance(vec, list) or not all(isinstance(v, int | float) for v in vec):
        return None
    return [float(v) for v in vec]


def city_state_document(*, layout: CityLayout, selector: str, ratio: float, t_s: float,
                        duration_live_s: float, time_scale: float, running: bool,
                        clients: Sequence[str],
                        positions: Sequence[Point],
                        fog_states: Mapping[str, Mapping[str, object]],
                        client_states: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    """GET /api/state for the city: one point at `t_s` real seconds since its epoch; each
    fog node's `members` and client's `node` as last written (None before)."""
    fogs: list[FogDot] = []
    for site in layout.fog_nodes:
        st = fog_states.get(site.name, {})
        members = st.get("members")
        fogs.append({"name": site.name, "x": site.position[0], "y": site.position[1],
                     "slots": site.slots,
                     "members": members if isinstance(members, int) else None,
                     "coord": coordinate_vector(st)})
    people: list[ClientDot] = []
    for name, (x, y) in zip(clients, positions, strict=True):
        st = client_states.get(name, {})
        node = st.get("node")
        people.append({"name": name, "x": x, "y": y,
                       "node": node if isinstance(node, str) else None,
                       "coord": coordinate_vector(st)})
    return finite({
        "mode": "live", "study": "city", "policy": f"{selector} (ratio {ratio:g})",
        "t_model_ms": Timebase(time_scale).model_ms(t_s),
        "duration_ms": Timebase(time_scale).model_ms(duration_live_s),
        "running": running, "sent": 0, "answered": 0,
        "agent": None, "total_power_w": None, "classes": {}, "links": [], "timeline": [],
        "policy_epochs": [],
        "nodes": [asdict(NodeLive(
            s.name, "fog", True, s.slots, f["members"],
            None if f["members"] is None else f["members"] / max(1, s.slots)))
            for s, f in zip(layout.fog_nodes, fogs, strict=True)],
        "city": {"side_m": layout.side_m, "selector": selector, "ratio": ratio,
                 "towers": [{"x": x, "y": y} for x, y in layout.towers],
                 "fogs": fogs, "clients": people},
    })

"""`--view` for seed 003's live city (issue 21): the `ViewSource` over the point the live
runner is in. The runner hands over each tick's positions (`CityNow`); the state files
are read when the page asks. A city has no policy to swap: writes get 405.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from fogsdn.city.layout import CityLayout
from fogsdn.city.map_state import city_state_document
from fogsdn.city.mobile_client import client_status_path
from fogsdn.live.live_view import VIEW_NICE, ViewConfig
from fogsdn.view.server import ViewServer
from fogsdn.view.state import RequestError, TopologyLink, TopologyNode

Point = tuple[float, float]


@dataclass(frozen=True)
class CityNow:
    """The point running and where its clients are, as of the runner's last tick."""

    selector: str
    ratio: float
    state_dir: Path
    clients: tuple[str, ...]
    positions: tuple[Point, ...]
    epoch: float  # time.monotonic() at the point's start of load
    done: bool = False


def _read_json(path: Path) -> dict[str, object]:
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # not written yet: nothing known
    return obj if isinstance(obj, dict) else {}


class CityView:
    """`ViewSource` over the live city: `now` is replaced by the runner each tick."""

    def __init__(self, layout: CityLayout, duration_live_s: float, time_scale: float) -> None:
        self.layout = layout
        self.duration_live_s = duration_live_s
        self.time_scale = time_scale
        self.token = ""  # read-only
        self.now: CityNow | None = None

    def state(self, t_ms: float | None = None) -> dict[str, object]:
        now = self.now
        if now is None:  # the network is being built
            now = CityNow("starting", 0.0, Path("/nonexistent"), (), (), time.monotonic())
        fogs = {s.name: _read_json(now.state_dir / f"{s.name}.json")
                for s in self.layout.fog_nodes}
        clients = {c: _read_json(client_status_path(now.state_dir, c)) for c in now.clients}
        return city_state_document(
            layout=self.layout, selector=now.selector, ratio=now.ratio,
            t_s=max(0.0, time.monotonic() - now.epoch), duration_live_s=self.duration_live_s,
            time_scale=self.time_scale, running=self.now is not None and not now.done,
            clients=now.clients, positions=now.positions, fog_states=fogs,
            client_states=clients)

    def topology(self) -> dict[str, list[TopologyNode] | list[TopologyLink]]:
        return {"nodes": [], "links": []}  # the map is in each state (`city`)

    def summary(self) -> dict[str, object]:
        return {"study": "city", "note": "the points' figures are in summary.json at the end"}

    def swap_policy(self, request: dict[str, object]) -> NoReturn:
        raise RequestError(405, "a city study has no policy to swap")


def start_city_view(layout: CityLayout, duration_live_s: float, time_scale: float,
                    config: ViewConfig) -> tuple[CityView, ViewServer]:
    """Server started, address printed (OSError: the port is taken)."""
    view = CityView(layout, duration_live_s, time_scale)
    server = ViewServer(view, config.port, config.host, nice=VIEW_NICE)
    server.start()
    print(f"[view] {server.url}  (a city study: read-only)", flush=True)
    return view, server

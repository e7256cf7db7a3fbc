"""Policy files the tests write outside the repository, as a user would keep them."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import scenario_dict

# HP to an OFN while one is up, LP always to the FN: the opposite of seed 000's scheme,
# so a trace shows at once whose policy ran.
HP_AWAY = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import Role, TaskClass


@dataclass
class HpAway(Policy):
    name: ClassVar[str] = "hp_away"

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        ofns = view.up(Role.OFN)
        return {TaskClass.HP: {(ofns[0].name if ofns else fn): 1.0}, TaskClass.LP: {fn: 1.0}}
'''

# the same policy registered with the package's decorator while its file loads, as a
# user reading the built-ins' package might write it
HP_AWAY_REGISTERED = HP_AWAY.replace(
    "from fogsdn.policies.base import",
    "from fogsdn.policies import register_policy\nfrom fogsdn.policies.base import",
).replace("@dataclass\n", "@register_policy\n@dataclass\n")

# a per-request policy that sends LP to the OFN when it knows the loads, and fails
# (a bug that shows only on a live view) whenever the OFN is down
FAILS_WHEN_OFN_DOWN = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import Role, TaskClass


@dataclass
class Brittle(Policy):
    name: ClassVar[str] = "brittle"
    proactive: ClassVar[bool] = False

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        return {TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}

    def decide(self, view, request, rng) -> str:
        fn = view.up(Role.FN)[0].name
        if request.cls is TaskClass.HP:
            return fn
        return view.up(Role.OFN)[0].name  # IndexError while the OFN is out of range
'''

# a per-request policy whose decide loops for ever from its 20th LP request on
LOOPS_LIVE = '''
from dataclasses import dataclass, field
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import Role, TaskClass


@dataclass
class Stuck(Policy):
    name: ClassVar[str] = "stuck"
    proactive: ClassVar[bool] = False
    asked: list = field(default_factory=list)

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        return {TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}

    def decide(self, view, request, rng) -> str:
        self.asked.append(1)
        if len(self.asked) >= 20:
            while True:
                pass
        return view.up(Role.FN)[0].name
'''

# kill and restart of the user's own (no built-in class): every task starts at the FN,
# which gives up on it after 1.5 size units; it then restarts from scratch at the OFN
TRY_FN_FIRST = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import Role, TaskClass
from fogsdn.core.stages import StagePlan


@dataclass
class TryFnFirst(Policy):
    name: ClassVar[str] = "try_fn_first"

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        return {TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}

    def stages(self, view: ClusterView) -> StagePlan:
        hosts = tuple(n.name for n in view.up(Role.FN)[:1] + view.up(Role.OFN)[:1])
        return StagePlan("tags", hosts, (1.5,) if len(hosts) > 1 else ())
'''


def write_policy(tmp: Path, text: str, name: str = "my_policy.py") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def write_scenario(tmp: Path, module: str, **over: object) -> Path:
    """A scenario file in `tmp` naming `module` (relative to that file, as users write)."""
    data = scenario_dict(**over)
    data["policy"] = {"module": module}
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path

"""The chain built from the policy object: identical to the closed chains for the three
schemes, refuses what is not state-based (with the reason), and agrees with the
simulator for state-based policies over several OFNs and FNs."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import ROOT, call_main, scenario_dict
from scipy import stats

from fogsdn.core.scenario import Role, Scenario, TaskClass, parse_scenario
from fogsdn.exact.ctmc import predict
from fogsdn.exact.joint_chain import StateSpaceTooLarge
from fogsdn.exact.model_params import OutsideModel, exact_prediction, model_params_from_scenario
from fogsdn.exact.policy_chain import PolicyPrediction, predict_policy
from fogsdn.exact.policy_probe import PolicyOutsideModel
from fogsdn.measure.metrics import MeasuredAccumulator
from fogsdn.policies import make_policy
from fogsdn.policies.base import ClusterView, Policy, Request, RouteTable
from fogsdn.policies.nodiff import NoDiff
from fogsdn.sim.engine import simulate
from fogsdn.sim.output import TraceCsvSink


def sc(**over: Any) -> Scenario:
    return parse_scenario(scenario_dict(**over))


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        elif isinstance(v, float | int) and not isinstance(v, bool):
            out[prefix + k] = float(v)
    return out


# -- 1. the three schemes are unchanged ---------------------------------------------------


@pytest.mark.parametrize("leave", ["drain", "handoff", "drop"])
@pytest.mark.parametrize("policy", ["prioritized", "nodiff", "basic"])
def test_built_in_schemes_identical_to_the_closed_chains(policy: str, leave: str) -> None:
    s = sc(policy={"name": policy, "alpha": 0.3}, churn={"leave": leave})
    closed = _flat(predict(model_params_from_scenario(s)).to_dict())
    chain = predict_policy(s, make_policy(s.policy))
    got = _flat(chain.to_dict())
    compared = [k for k in closed if not k.startswith("model.") and math.isfinite(closed[k])]
    assert len(compared) >= 24  # means, blocking, outage, percentiles of both classes
    for k in compared:
        assert got[k] == pytest.approx(closed[k], rel=1e-9, abs=1e-15), k
    t = [1.0, 5.0, 20.0]
    for cls in ("hp", "lp"):
        ref = predict(model_params_from_scenario(s)).cdf(cls, t)
        assert chain.cdf(cls, t) == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_multi_servers_and_no_churn_identical_too() -> None:
    for over in ({"nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 6,
                             "servers": "multi"},
                            {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 4,
                             "servers": "multi"}], "churn": {"leave": "handoff"}},
                 {"churn": {"eta": 0.0, "xi": 0.0, "initial": "unavailable"}}):
        s = sc(**over)
        closed = _flat(predict(model_params_from_scenario(s)).to_dict())
        got = _flat(predict_policy(s, make_policy(s.policy)).to_dict())
        for k, v in closed.items():
            if not k.startswith("model.") and math.isfinite(v):
                assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-15), k


# -- 2. which policies qualify ---------------------------------------------------------


@dataclass
class _PerRequest(Policy):
    """Base for test policies asked per request; HP and LP to the first FN."""

    name: ClassVar[str] = "per_request"
    proactive: ClassVar[bool] = False

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        return {TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}


@dataclass
class DrawsRandomly(_PerRequest):
    name: ClassVar[str] = "draws"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        return view.nodes[0].name if rng.random() < 0.7 else view.nodes[1].name


@dataclass
class ReadsClient(_PerRequest):
    name: ClassVar[str] = "reads_client"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        return view.nodes[0].name if request.client == "c1" else view.nodes[1].name


@dataclass
class ReadsSize(_PerRequest):
    name: ClassVar[str] = "reads_size"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        big = request.size is not None and request.size > 2.0
        return view.nodes[1].name if big else view.nodes[0].name


@dataclass
class RoundRobin(_PerRequest):
    name: ClassVar[str] = "round_robin"
    turn: int = 0

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        self.turn += 1
        up = [n.name for n in view.nodes if n.available]
        return up[self.turn % len(up)]


@dataclass
class Declared(ReadsClient):
    name: ClassVar[str] = "declared"
    state_based: ClassVar[bool | None] = False


@dataclass
class LogsClient(_PerRequest):
    """Reads the client only to log it, and says so."""

    name: ClassVar[str] = "logs_client"
    state_based: ClassVar[bool | None] = True
    seen: int = 0

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        self.seen += len(request.client)
        return view.nodes[0].name


@dataclass
class SamplesRoutes(NoDiff):
    """Overrides decide but only samples the route weights: it qualifies."""

    name: ClassVar[str] = "samples_routes"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        weights = self.routes(view)[request.cls]
        names = [n for n, w in weights.items() if w > 0]
        return rng.choices(names, weights=[weights[n] for n in names])[0]


@dataclass
class Raises(_PerRequest):
    name: ClassVar[str] = "raises"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if (view.nodes[0].in_system or 0) > 3:
            raise RuntimeError("boom")
        return view.nodes[0].name


@dataclass
class ShortestDelay(_PerRequest):
    """Each request to the node, up, with the least expected delay (n + 1) / mu (first
    on ties): state-based, reading every node's count."""

    name: ClassVar[str] = "shortest_delay"

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        up = [n for n in view.nodes if n.available]
        return min(up, key=lambda n: ((n.in_system or 0) + 1) / n.mu).name


@pytest.mark.parametrize(("policy", "reason"), [
    (DrawsRandomly, "draws random numbers beyond the route weights"),
    (ReadsClient, "reads Request.client"),
    (ReadsSize, "reads Request.size"),
    (RoundRobin, "answers to the same view differ"),
    (Declared, "declares itself not state-based"),
    (Raises, "decide raised RuntimeError: boom"),
])
def test_policies_outside_the_model_say_why(policy: type[Policy], reason: str) -> None:
    s = sc()
    with pytest.raises(PolicyOutsideModel, match=reason):
        predict_policy(s, policy())


def test_poisoned_view_fields_are_detected() -> None:
    s = sc()
    predict_policy(s, ShortestDelay())  # mu is the scenario's: inside
    with pytest.raises(PolicyOutsideModel, match="reads NodeView.mu"):
        predict_policy(s, ShortestDelay(), poison=frozenset({"mu"}))


def test_declared_state_based_and_sampling_the_routes_qualify() -> None:
    s = sc()
    logs = predict_policy(s, LogsClient())
    basic = predict(model_params_from_scenario(s.with_overrides({"policy.name": "basic"})))
    assert logs.lp.W == pytest.approx(basic.lp.W, rel=1e-9)
    s2 = sc(policy={"name": "nodiff", "alpha": 0.3})
    sampled = predict_policy(s2, SamplesRoutes(spec=s2.policy))
    ref = predict(model_params_from_scenario(s2))
    assert sampled.lp.W == pytest.approx(ref.lp.W, rel=1e-9)
    assert sampled.hp.blocking == pytest.approx(ref.hp.blocking, rel=1e-9)


def test_state_limit_refused_with_the_count() -> None:
    s = sc(policy={"name": "threshold"})
    with pytest.raises(StateSpaceTooLarge, match=r"^462 states: above the 100 this machine"):
        predict_policy(s, make_policy(s.policy), max_states=100)
    with pytest.raises(OutsideModel, match="462 states"):
        exact_prediction(s, max_states=100)


# -- 3. several OFNs and FNs: the simulator agrees within 4 standard errors -----------------

T_975 = float(stats.t.ppf(0.975, 19))  # batch-means intervals use 20 batches


def _small_cluster(policy: str, leave: str, fns: int = 1) -> Scenario:
    nodes = [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 8}]
    if fns > 1:
        nodes.append({"name": "fn2", "role": "fn", "mu": 0.5, "capacity": 5})
    nodes += [{"name": f"ofn{i}", "role": "ofn", "mu": 0.4, "capacity": 4} for i in (1, 2)]
    return sc(nodes=nodes, churn={"eta": 0.2, "xi": 0.3, "leave": leave},
              workload={"lambda_hp": 0.4, "lambda_lp": 0.7},
              policy={"name": policy, "params": {"threshold": 1} if policy == "threshold" else {}})


def _simulated(s: Scenario, policy: Policy | None, requests: int) -> dict[str, Any]:
    acc = MeasuredAccumulator(warmup_ms=50.0, deadline_ms=s.deadline_ms)
    simulate(s, TraceCsvSink(None, s, acc), requests=requests, policy=policy)
    return acc.summary()


def _agree(m: dict[str, Any], pred: PolicyPrediction) -> None:
    for cls in ("hp", "lp"):
        c, p = m[cls], pred.cls(cls)
        for metric, half in (("W", "W_ci95"), ("blocking", "blocking_ci95"),
                             ("outage", "outage_ci95")):
            se = c[half] / T_975
            assert abs(c[metric] - getattr(p, metric)) <= 4 * se, (cls, metric, c[metric],
                                                                   getattr(p, metric), se)


@pytest.mark.parametrize("leave", ["drain", "handoff"])
def test_threshold_over_two_ofns_agrees_with_the_simulator(leave: str) -> None:
    s = _small_cluster("threshold", leave)
    pred = predict_policy(s, make_policy(s.policy))
    assert pred.n_states == 9 * (10 if leave == "drain" else 6) ** 2
    _agree(_simulated(s, None, 40_000), pred)


def test_a_policy_written_here_over_two_fns_and_two_ofns_agrees_with_the_simulator() -> None:
    s = _small_cluster("prioritized", "drop", fns=2)  # the scenario's name is not used
    policy = ShortestDelay()
    pred = predict_policy(s, policy)
    assert pred.n_states == 9 * 6 * 6 * 6 and pred.method == "sparse"
    assert pred.lp.response.p_drop > 0.001  # drop: an OFN leaving loses what it holds
    _agree(_simulated(s, policy, 40_000), pred)


def test_built_ins_on_two_ofns_use_the_lumped_chains() -> None:
    s = _small_cluster("prioritized", "drain")
    pred = exact_prediction(s)
    assert isinstance(pred, PolicyPrediction) and pred.method == "lumped"
    _agree(_simulated(s, None, 40_000), pred)


# -- 4. predict.py ----------------------------------------------------------------------


def test_predict_cli_gives_threshold_exact_figures(capsys: pytest.CaptureFixture[str]) -> None:
    import predict as cli  # type: ignore[import-not-found]

    rc, out, err = call_main(
        cli.main, ["--scenario", str(ROOT / "scenarios/threshold.yaml"), "--json"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert d["model"] == {"chain": "policy", "policy": "threshold", "states": 462,
                          "method": "sparse", "solved_states": 462}
    from fogsdn.core.scenario import load_scenario

    s = load_scenario(ROOT / "scenarios/threshold.yaml")
    ref = predict_policy(s, make_policy(s.policy))
    assert d["lp"]["W"] == pytest.approx(ref.lp.W, rel=1e-12)
    assert 0 < d["lp"]["outage"] < 0.01 and d["hp"]["percentiles"]["p99"] > d["hp"]["W"]


def test_outside_the_model_says_why() -> None:
    with pytest.raises(OutsideModel, match="exponential"):
        exact_prediction(sc(workload={"size": {"distribution": "deterministic"}}))


USER_POLICY = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, Request, RouteTable
from fogsdn.core.scenario import Role, TaskClass


@dataclass
class BusyOffload(Policy):
    """LP to the OFN while the FN holds more than 2 (threshold's rule, written anew)."""

    name: ClassVar[str] = "busy_offload"
    proactive: ClassVar[bool] = False

    def routes(self, view: ClusterView) -> RouteTable:
        fn = view.up(Role.FN)[0].name
        return {TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}

    def decide(self, view: ClusterView, request: Request, rng: object) -> str:
        fn = view.up(Role.FN)[0]
        ofns = view.up(Role.OFN)
        if request.cls is TaskClass.LP and ofns and (fn.in_system or 0) > 2:
            return ofns[0].name
        return fn.name
'''


def test_a_policy_file_outside_the_repository_gets_exact_figures(tmp_path: Path) -> None:
    from fogsdn.core.scenario import load_scenario

    assert not tmp_path.resolve().is_relative_to(ROOT)
    (tmp_path / "my_policy.py").write_text(USER_POLICY)
    d = load_scenario(ROOT / "scenarios/threshold.yaml").to_dict()
    d["policy"] = {"name": "busy_offload", "module": "my_policy.py"}
    d["sweep"] = None
    path = tmp_path / "mine.yaml"
    path.write_text(json.dumps(d))
    r = subprocess.run([sys.executable, "scripts/predict.py", "--scenario", str(path), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["model"]["chain"] == "policy" and got["model"]["policy"] == "busy_offload"
    s = load_scenario(ROOT / "scenarios/threshold.yaml")  # the same rule, built in
    ref = predict_policy(s, make_policy(s.policy))
    assert got["lp"]["W"] == pytest.approx(ref.lp.W, rel=1e-9)
    assert got["hp"]["outage"] == pytest.approx(ref.hp.outage, rel=1e-6)

"""Map a Scenario onto an exact chain, or say why it is outside the model.

`exact_prediction` is the one entry point the engines use: today's closed chains
(`fogsdn.exact.ctmc`) for the three built-in schemes on one FN and at most one OFN, the
chain built from the policy object (`fogsdn.exact.policy_chain`) for everything else a
state-based policy can run.
"""

from __future__ import annotations

import itertools
import math
import time

from fogsdn.core.scenario import Discipline, Role, Scenario
from fogsdn.exact.class_prediction import ModelError
from fogsdn.exact.ctmc import ModelParams, Prediction, predict
from fogsdn.exact.joint_chain import MAX_STATES, StateSpaceTooLarge
from fogsdn.exact.linsolve import NoConvergence
from fogsdn.exact.policy_chain import PolicyPrediction, predict_policy
from fogsdn.exact.policy_probe import PolicyOutsideModel
from fogsdn.models.power_model import busy_fraction, server_count
from fogsdn.policies import Basic, NoDiff, Prioritized, make_policy
from fogsdn.policies.base import PolicyError

AnyPrediction = Prediction | PolicyPrediction
CLOSED_SCHEMES: tuple[type, ...] = (Prioritized, NoDiff, Basic)

POLICY_TO_SCHEME: dict[str, str] = {"prioritized": "proposed", "nodiff": "nodiff", "basic": "basic"}


class OutsideModel(ValueError):
    """The scenario is valid but the CTMC does not describe it; the message says why."""


class DisciplineOutsideModel(OutsideModel):
    """A node's discipline that no chain has: no other chain is tried (the policy chain
    has FIFO nodes only), so the reason names the field."""


def _fn_discipline(scenario: Scenario, scheme: str) -> str:
    """The FN's discipline as the closed chain takes it, or DisciplineOutsideModel.

    The chain has every discipline at the FN (`fogsdn.exact.priority_chain`). An OFN's order
    matters only where it holds both classes (nodiff): under the proposed scheme it
    holds LP alone."""
    fn = scenario.nodes_with(Role.FN)[0]
    for ofn in scenario.nodes_with(Role.OFN):
        if ofn.discipline is not Discipline.FIFO and scheme == "nodiff":
            raise DisciplineOutsideModel(
                f"nodes.{ofn.name}.discipline: {ofn.discipline.value} at an OFN that holds "
                "both classes (nodiff) is outside the exact chains; simulate it")
    return fn.discipline.value


def model_params_from_scenario(scenario: Scenario) -> ModelParams:
    """The CTMC's parameters for `scenario`, or OutsideModel("reason").

    Exponential task sizes of mean m on a node of rate mu give exponential service
    of rate mu/m. With no OFN every policy sends everything to the FN: `basic`.
    """
    if scenario.workload.profile is not None:
        raise OutsideModel("workload.profile: a time-varying rate has no stationary "
                           "prediction (a run compares each phase with its own)")
    policy = scenario.policy.name
    if policy not in POLICY_TO_SCHEME:
        raise OutsideModel(f"policy {policy!r} is not one of the model's schemes "
                           f"({', '.join(POLICY_TO_SCHEME)})")
    if scenario.nodes_with(Role.CLOUD):
        raise OutsideModel("the scenario has a cloud node; the model has one FN and one OFN")
    fns, ofns = scenario.nodes_with(Role.FN), scenario.nodes_with(Role.OFN)
    if len(fns) != 1:
        raise OutsideModel(f"the model has exactly one FN, the scenario has {len(fns)}")
    if len(ofns) > 1:
        raise OutsideModel(f"the model has at most one OFN, the scenario has {len(ofns)}")
    size = scenario.workload.size
    if size.distribution != "exponential":
        raise OutsideModel(f"task sizes are {size.distribution}; the model needs exponential")
    fn = fns[0]
    ofn = ofns[0] if ofns else None
    scheme = POLICY_TO_SCHEME[policy] if ofn is not None else "basic"
    discipline_f = _fn_discipline(scenario, scheme)
    churn = scenario.churn
    try:
        return ModelParams(
            scheme=scheme,  # type: ignore[arg-type]
            lam_hp=scenario.workload.lambda_hp,
            lam_lp=scenario.workload.lambda_lp,
            mu_f=fn.mu / size.mean,
            mu_of=(ofn.mu / size.mean) if ofn is not None else 0.0,
            cap_f=fn.capacity,
            cap_o=ofn.capacity if ofn is not None else 0,
            eta=churn.eta,
            xi=churn.xi,
            alpha=scenario.policy.alpha,
            leave=churn.leave.value,  # type: ignore[arg-type]
            servers_f=fn.servers.value,  # type: ignore[arg-type]
            servers_o=(ofn.servers.value if ofn is not None else "single"),  # type: ignore[arg-type]
            deadline=scenario.deadline_ms,
            initial_available=churn.initial != "unavailable",
            discipline_f=discipline_f,
        )
    except ModelError as err:
        if str(err).startswith("discipline_f"):
            raise DisciplineOutsideModel(f"nodes.{fn.name}.discipline: "
                                         f"{str(err).removeprefix('discipline_f ')}") from None
        raise OutsideModel(str(err)) from None


def exact_prediction(scenario: Scenario, max_states: int = MAX_STATES) -> AnyPrediction:
    """The exact prediction of `scenario`, or OutsideModel("reason"): the closed chains
    for the built-in schemes where they apply (identical to the policy chain there, and
    lumped at any size), else the policy chain of `make_policy(scenario.policy)`."""
    if scenario.workload.profile is not None:
        model_params_from_scenario(scenario)  # raises: no stationary prediction
    if scenario.capacity_drawn:
        raise OutsideModel("a capacity is drawn per replication: a run is compared at its "
                           "draw, replications with the mean over the distribution "
                           "(capacity_mean_prediction)")
    try:
        policy = make_policy(scenario.policy)
    except PolicyError as err:
        raise OutsideModel(f"policy: {err}") from None
    if type(policy) in CLOSED_SCHEMES:
        try:
            return predict(model_params_from_scenario(scenario))
        except DisciplineOutsideModel:
            raise
        except OutsideModel:
            pass  # several nodes, a cloud: the policy chain below
    try:
        return predict_policy(scenario, policy, max_states)
    except (PolicyOutsideModel, StateSpaceTooLarge, NoConvergence, ModelError) as err:
        raise OutsideModel(str(err)) from None


MAX_CAPACITY_COMBINATIONS = 2_000
_MEAN_KEYS = ("W", "blocking", "throughput", "N", "outage")


def capacity_mean_prediction(scenario: Scenario) -> dict[str, object] | str:
    """The exact figures averaged over a drawn capacity's distribution: every
    combination of the nodes' capacities (each integer of each range alike), each solved
    exactly. Percentiles are left out (a mixture's are not an average). A string says
    why there is none."""
    ranged = [n for n in scenario.nodes if n.capacity_range is not None]
    spans = [range(n.capacity_range[0], n.capacity_range[1] + 1)  # type: ignore[index]
             for n in ranged]
    count = math.prod(len(r) for r in spans)
    if count > MAX_CAPACITY_COMBINATIONS:
        return (f"{count} capacity combinations: more than {MAX_CAPACITY_COMBINATIONS} "
                "exact solves")
    total: dict[str, dict[str, float]] = {"hp": {}, "lp": {}}
    top: dict[str, float] = {}
    for caps in itertools.product(*spans):
        fixed = scenario.with_overrides({
            **{f"nodes.{n.name}.capacity": c for n, c in zip(ranged, caps, strict=True)},
            **{f"nodes.{n.name}.capacity_range": None for n in ranged}})
        try:
            d = exact_prediction(fixed).to_dict()
        except OutsideModel as err:
            return f"capacities {dict(zip((n.name for n in ranged), caps, strict=True))}: {err}"
        for cls in ("hp", "lp"):
            block = d[cls]
            assert isinstance(block, dict)
            for k in _MEAN_KEYS:
                total[cls][k] = total[cls].get(k, 0.0) + float(block[k]) / count
        for k in ("p_available", "mean_fn", "mean_ofn"):
            v = d.get(k)
            if isinstance(v, (int, float)):
                top[k] = top.get(k, 0.0) + float(v) / count
    return {**total, **top, "combinations": count,
            "basis": "mean over the capacity distribution, each combination exact"}


def timed_prediction(scenario: Scenario) -> tuple[AnyPrediction, float]:
    """`exact_prediction` and its wall time in seconds (the chain's build and solve)."""
    t0 = time.perf_counter()
    pred = exact_prediction(scenario)
    return pred, time.perf_counter() - t0


def node_busy(sc: Scenario, pred: AnyPrediction) -> dict[str, float]:
    """Each node's exact mean share of busy servers: from the closed chain's stationary
    marginals, or as the policy chain computed it."""
    if isinstance(pred, Prediction):
        st = pred.stationary
        fn = sc.nodes_with(Role.FN)[0]
        busy = {fn.name: busy_fraction(list(st.p_fn.sum(axis=0)), server_count(fn))}
        for ofn in sc.nodes_with(Role.OFN):
            busy[ofn.name] = busy_fraction(list(st.p_ofn.sum(axis=0)), server_count(ofn))
        return busy
    return dict(pred.node_busy)

"""The module names before everything moved under `fogsdn` (one release, deprecated).

A user's policy file written for the old layout (`from controller.policies.base import
Policy`, `from fogsdn.scenario import Role`) still loads: `install()` puts a finder on
`sys.meta_path` that answers an old name with the module at its new place and says, once
per name, which name to use instead (a DeprecationWarning). The policy loader installs it
before it runs a user's file; nothing of fogsdn's own imports an old name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

OLD_TO_NEW: dict[str, str] = {
    "agents.dqn": "fogsdn.agents.dqn",
    "agents.env": "fogsdn.agents.env",
    "agents.live_env": "fogsdn.agents.live_env",
    "agents.live_policy": "fogsdn.agents.live_policy",
    "agents.train_rnn": "fogsdn.agents.train_rnn",
    "analysis.agent_eval": "fogsdn.measure.agent_eval",
    "analysis.class_prediction": "fogsdn.exact.class_prediction",
    "analysis.compare": "fogsdn.measure.compare",
    "analysis.comparison": "fogsdn.measure.comparison",
    "analysis.ctmc": "fogsdn.exact.ctmc",
    "analysis.fidelity": "fogsdn.measure.fidelity",
    "analysis.figures": "fogsdn.measure.figures",
    "analysis.handoff_chain": "fogsdn.exact.handoff_chain",
    "analysis.joint_chain": "fogsdn.exact.joint_chain",
    "analysis.linsolve": "fogsdn.exact.linsolve",
    "analysis.lumped_chain": "fogsdn.exact.lumped_chain",
    "analysis.metrics": "fogsdn.measure.metrics",
    "analysis.model_params": "fogsdn.exact.model_params",
    "analysis.network": "fogsdn.exact.network",
    "analysis.objective": "fogsdn.exact.objective",
    "analysis.optimal_policy": "fogsdn.exact.optimal_policy",
    "analysis.policy_chain": "fogsdn.exact.policy_chain",
    "analysis.policy_chain_model": "fogsdn.exact.policy_chain_model",
    "analysis.policy_epochs": "fogsdn.measure.policy_epochs",
    "analysis.policy_probe": "fogsdn.exact.policy_probe",
    "analysis.printed_chain": "fogsdn.exact.printed_chain",
    "analysis.priority_chain": "fogsdn.exact.priority_chain",
    "analysis.response_time": "fogsdn.exact.response_time",
    "analysis.rt_measurement": "fogsdn.measure.rt_measurement",
    "analysis.seed000_claims": "fogsdn.measure.seed000_claims",
    "analysis.seed000_optimum": "fogsdn.exact.seed000_optimum",
    "analysis.size_compare": "fogsdn.measure.size_compare",
    "analysis.two_node_handoff": "fogsdn.exact.two_node_handoff",
    "controller.app": "fogsdn.controller.app",
    "controller.cluster": "fogsdn.controller.cluster",
    "controller.config": "fogsdn.controller.config",
    "controller.flow_tables": "fogsdn.controller.flow_tables",
    "controller.launch": "fogsdn.controller.launch",
    "controller.learner_reports": "fogsdn.controller.learner_reports",
    "controller.main": "fogsdn.controller.main",
    "controller.of_messages": "fogsdn.controller.of_messages",
    "controller.path_choice": "fogsdn.controller.path_choice",
    "controller.pipeline": "fogsdn.controller.pipeline",
    "controller.policies": "fogsdn.policies",
    "controller.policies.base": "fogsdn.policies.base",
    "controller.policies.basic": "fogsdn.policies.basic",
    "controller.policies.check": "fogsdn.policies.check",
    "controller.policies.greedy": "fogsdn.policies.greedy",
    "controller.policies.loader": "fogsdn.policies.loader",
    "controller.policies.nodiff": "fogsdn.policies.nodiff",
    "controller.policies.observe": "fogsdn.policies.observe",
    "controller.policies.paths": "fogsdn.policies.paths",
    "controller.policies.prioritized": "fogsdn.policies.prioritized",
    "controller.policies.resolve": "fogsdn.policies.resolve",
    "controller.policies.rl": "fogsdn.policies.rl",
    "controller.policies.size_based": "fogsdn.policies.size_based",
    "controller.policies.state_table": "fogsdn.policies.state_table",
    "controller.policies.threshold": "fogsdn.policies.threshold",
    "controller.policy_guard": "fogsdn.controller.policy_guard",
    "controller.policy_swap": "fogsdn.controller.policy_swap",
    "controller.registration": "fogsdn.controller.registration",
    "controller.rt_measure": "fogsdn.controller.rt_measure",
    "controller.running_policy": "fogsdn.controller.running_policy",
    "fogsdn.churn": "fogsdn.core.churn",
    "fogsdn.cli_args": "fogsdn.core.cli_args",
    "fogsdn.csv_rows": "fogsdn.core.csv_rows",
    "fogsdn.fabric": "fogsdn.core.fabric",
    "fogsdn.latency": "fogsdn.core.latency",
    "fogsdn.local_rpc": "fogsdn.core.local_rpc",
    "fogsdn.processes": "fogsdn.core.processes",
    "fogsdn.rate_profile": "fogsdn.core.rate_profile",
    "fogsdn.routing": "fogsdn.core.routing",
    "fogsdn.rx_stamp": "fogsdn.core.rx_stamp",
    "fogsdn.scenario": "fogsdn.core.scenario",
    "fogsdn.scenario_yaml": "fogsdn.core.scenario_yaml",
    "fogsdn.stages": "fogsdn.core.stages",
    "fogsdn.streams": "fogsdn.core.streams",
    "fogsdn.summary": "fogsdn.core.summary",
    "fogsdn.topology": "fogsdn.core.topology",
    "fogsdn.topology_files": "fogsdn.core.topology_files",
    "fogsdn.trace": "fogsdn.core.trace",
    "fogsdn.workload": "fogsdn.core.workload",
    "models.network_power": "fogsdn.models.network_power",
    "models.power_model": "fogsdn.models.power_model",
    "models.rnn_learner": "fogsdn.models.rnn_learner",
    "models.size_assignment": "fogsdn.models.size_assignment",
    "nodes.city_client": "fogsdn.city.mobile_client",
    "nodes.city_fog": "fogsdn.city.fog_daemon",
    "nodes.city_meridian": "fogsdn.city.meridian_node",
    "nodes.client": "fogsdn.nodes.client",
    "nodes.container": "fogsdn.nodes.container",
    "nodes.cpu_work": "fogsdn.nodes.cpu_work",
    "nodes.ncs": "fogsdn.nodes.ncs",
    "nodes.ncs.discovery": "fogsdn.nodes.ncs.discovery",
    "nodes.ncs.meridian": "fogsdn.nodes.ncs.meridian",
    "nodes.ncs.selection": "fogsdn.nodes.ncs.selection",
    "nodes.ncs.vivaldi": "fogsdn.nodes.ncs.vivaldi",
    "nodes.probe": "fogsdn.nodes.probe",
    "nodes.protocol": "fogsdn.nodes.protocol",
    "nodes.realtime": "fogsdn.core.realtime",
    "nodes.service_queue": "fogsdn.models.service_queue",
    "nodes.task_server": "fogsdn.nodes.task_server",
    "nodes.worker": "fogsdn.nodes.worker",
    "runner.agent_study": "fogsdn.studies.agent_study",
    "runner.cgroups": "fogsdn.live.cgroups",
    "runner.city_live": "fogsdn.city.live_run",
    "runner.city_study_run": "fogsdn.city.study_run",
    "runner.city_view": "fogsdn.city.map_view",
    "runner.city_view_state": "fogsdn.city.map_state",
    "runner.cleanup": "fogsdn.live.cleanup",
    "runner.cli": "fogsdn.cli.run_command",
    "runner.cpu_steal": "fogsdn.live.cpu_steal",
    "runner.live_network": "fogsdn.live.live_network",
    "runner.power_meter": "fogsdn.live.power_meter",
    "runner.proc_memory": "fogsdn.live.proc_memory",
    "runner.queueing_run": "fogsdn.live.queueing_run",
    "runner.results": "fogsdn.live.results",
    "runner.seed003_claims_run": "fogsdn.city.claims_run",
    "runner.size_study": "fogsdn.studies.size_study",
    "runner.study": "fogsdn.studies.study",
    "runner.study_cli": "fogsdn.cli.study_command",
    "runner.supervisor": "fogsdn.live.supervisor",
    "runner.sweep": "fogsdn.studies.sweep",
    "runner.switch_tuning": "fogsdn.live.switch_tuning",
    "runner.view_live": "fogsdn.live.live_view",
    "runner.view_replay": "fogsdn.view.replay",
    "runner.view_server": "fogsdn.view.server",
    "runner.view_state": "fogsdn.view.state",
    "sim": "fogsdn.sim",
    "sim.__main__": "fogsdn.sim.__main__",
    "sim.city_output": "fogsdn.city.sim_output",
    "sim.city_study": "fogsdn.city.event_model",
    "sim.engine": "fogsdn.sim.engine",
    "sim.output": "fogsdn.sim.output",
    "sim.policy_tables": "fogsdn.sim.policy_tables",
    "sim.power": "fogsdn.sim.power",
    "sim.rows": "fogsdn.sim.rows",
    "sim.runner": "fogsdn.sim.runner",
    "sim.seed003_claims": "fogsdn.city.claims",
    "sim.seed003_presets": "fogsdn.city.presets",
    "topologies.city_latency": "fogsdn.city.geo_latency",
    "topologies.city_layout": "fogsdn.city.layout",
    "topologies.city_net": "fogsdn.city.study_spec",
    "topologies.link_params": "fogsdn.netem.link_params",
    "topologies.linkem": "fogsdn.netem.linkem",
    "topologies.mininet_net": "fogsdn.netem.mininet_net",
    "topologies.mobility_traces": "fogsdn.city.mobility_traces",
    "topologies.relay_control": "fogsdn.netem.relay_control",
}
# the old top-level packages, importable as empty namespaces so their submodules resolve
OLD_PACKAGES = frozenset(name.split(".")[0] for name in OLD_TO_NEW) - {"fogsdn"}


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str, new: str | None) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.new is None:  # an old top-level package: a namespace for its old modules
            module = ModuleType(self.old)
            module.__path__ = []
            return module
        warnings.warn(f"{self.old} is deprecated (it moved): import {self.new}",
                      DeprecationWarning, stacklevel=6)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new one, already imported."""


class _LegacyFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in OLD_TO_NEW and fullname not in OLD_PACKAGES:
            return None
        top = fullname.split(".")[0]
        if top != "fogsdn" and importlib.machinery.PathFinder.find_spec(top) is not None:
            return None  # a real package of that name (the user's own) wins
        if fullname in OLD_TO_NEW:
            new = OLD_TO_NEW[fullname]
            is_pkg = importlib.util.find_spec(new) is not None and \
                hasattr(importlib.import_module(new), "__path__")
            return importlib.util.spec_from_loader(fullname, _Alias(fullname, new),
                                                   is_package=is_pkg)
        if fullname in OLD_PACKAGES:
            return importlib.util.spec_from_loader(fullname, _Alias(fullname, None),
                                                   is_package=True)
        return None


_FINDER = _LegacyFinder()


def install() -> None:
    """Old names resolve from now on, in this process (idempotent)."""
    if _FINDER not in sys.meta_path:
        # first: the path finder would otherwise load `controller.policies.base` afresh
        # from the aliased package's folder, a second copy with classes of its own
        sys.meta_path.insert(0, _FINDER)

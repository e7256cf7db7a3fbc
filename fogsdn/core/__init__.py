"""The base layer: the scenario schema, traces, topology and workload types, process
and signal helpers."""

"""The processes in the hosts: workers, clients, probes; `ncs/` the coordinate systems."""

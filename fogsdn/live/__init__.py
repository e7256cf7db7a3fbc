"""The live core: network, supervisor, the queueing run, results."""

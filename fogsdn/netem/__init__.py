"""Mininet glue and the link elements (netem or our relay)."""
